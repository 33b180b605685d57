"""fdw-overhead's vocabulary: dimensions, parameters, presets, metrics, and which network path a
case crosses.

Targets: `local` (pgbench on the source database itself), `fdw_local` (foreign tables in a
database of the source instance, reaching it over loopback TCP), `fdw_external` and
`fdw_external_ro` (foreign tables on the external instance, the latter `updatable 'false'`,
seed 000's Snippet 2), over the direct path or an emulated link per --latency.
"""

from __future__ import annotations

import re
from pathlib import Path

from ... import files, validate
from ...matrix import Dimension, Parameter, Preset, positive_int
from ...metrics import Metric, catalogue
from ...results import upgrade
from ...results.baseline import Baseline
from ...servers import fdw
from ...servers.paths import DIRECT, NetworkPath
from ...tools import pgbench
from ...servers.copy_tables import table_names
from . import statements
from ..base import Role, Vocabulary, BANDWIDTH, LATENCY, PG, TLS, EVIDENCE, UNTIL_CI, knob_families

TABLES = ("pgbench_accounts", "pgbench_history", "pgbench_branches", "pgbench_tellers")
REMOTE_TARGETS = ("fdw_external", "fdw_external_ro")   # the targets that cross a link to the source
TARGET_LABEL = {"local": "local", "fdw_local": "FDW_local", "fdw_external": "FDW_external",
                "fdw_external_ro": "FDW_ext_ro"}
ISOLATIONS = {"repeatable-read": "repeatable read", "read-committed": "read committed",
              "serializable": "serializable"}
SOURCE_ROLE = "source"    # the role (and database) holding the pgbench tables
HOP = "+fdw_scan"         # a probe's link name: <path id>+fdw_scan, a one-row foreign scan over that path


def whole_seconds(v: str) -> int:
    return validate.seconds(v, validate.MAX_DURATION_S, whole_for="pgbench")


def count(what: str, minimum: int):
    def parse(v: str) -> int:
        return validate.whole(v, minimum, None, what)
    return parse


def isolation(v: str) -> str:
    if v not in ISOLATIONS:
        raise ValueError(f"unknown isolation '{v}'; choose from {','.join(ISOLATIONS)}")
    return v


SCRIPT_PREFIX = "script:"   # the workload of a run of the user's scripts: script:NAME (several: script:A+B)
MAX_FILE_BYTES = 1 << 20     # a script's or --init's file (files.read_text's rule)


def _read(path: str, what: str) -> str:
    text = files.read_text(path, MAX_FILE_BYTES, what)
    if not text.strip():
        raise ValueError(f"{path} is empty; give {what}")
    return text


def scripts(given: list[str]) -> list[dict]:
    """['read.sql', 'write.sql@2'] -> [{name, path, weight, text}]: each file read now (a resumed
    run runs the same text), its name (the file's stem) unique. pgbench parses them in check()."""
    out: list[dict] = []
    for raw in given:
        path, at, weight = raw.rpartition("@") if "@" in raw else (raw, "", "1")
        if not validate.digits(weight) or int(weight) < 1 or int(weight) > 1_000_000:
            raise ValueError(f"weight '{weight}' of '{raw}' is not a whole number from 1 to 1000000; "
                             "write FILE@WEIGHT")
        name = Path(path).stem
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", name):
            raise ValueError(f"'{Path(path).name}': name the file with letters, digits, '_', '-' or '.' "
                             "(its stem names the workload)")
        if any(s["name"] == name for s in out):
            raise ValueError(f"two scripts named '{name}'; give files with different names")
        out.append({"name": name, "path": str(Path(path).resolve()), "weight": int(weight),
                    "text": _read(path, "a pgbench script")})
    return out


def init_script(path: str) -> dict:
    """The SQL that creates and loads the scripts' tables on the source, read now."""
    return {"name": Path(path).name, "path": str(Path(path).resolve()), "text": _read(path, "a file of SQL statements")}


# pgbench -i (--init-steps=dtGvp) on a managed 15, measured here at its peak (tables, indexes and
# WAL): 325 MB at scale 10, 1755 MB at scale 50 (the tables 16 MB a scale unit, the WAL as much).
PGBENCH_BYTES_PER_SCALE = 35_000_000
DISK_SAFETY = 1.5          # the read-write rounds' new rows and dead versions, and a margin
SERVERS_BYTES = 200_000_000   # two managed clusters' own files and the results cluster's growth


def disk_needed(scale: int) -> float:
    """Bytes the workspace needs for a run at pgbench scale `scale` on a managed source."""
    return scale * PGBENCH_BYTES_PER_SCALE * DISK_SAFETY + SERVERS_BYTES


def script_workload(given: list[dict]) -> str:
    return SCRIPT_PREFIX + "+".join(s["name"] for s in given)


def protocol(v: str) -> str:
    if v not in pgbench.PROTOCOLS:
        raise ValueError(f"unknown protocol '{v}'; choose from {','.join(pgbench.PROTOCOLS)}")
    return v


DIMENSIONS = {
    "workload": Dimension("workload", "ro: pgbench -S (select only); rw: the default TPC-B-like script",
                          ("ro", "rw")),
    "target": Dimension("target", "where pgbench connects: the table itself, or foreign tables over it",
                        tuple(TARGET_LABEL)),
    "clients": Dimension("clients", "pgbench -c: concurrent client sessions", parse=positive_int("clients")),
    "latency": LATENCY,
    "pg": PG,
    "protocol": Dimension("protocol", "pgbench -M: how statements go to the server (simple query, extended "
                          "query, prepared statements)", pgbench.PROTOCOLS, knob=True),
    "tls": TLS,   # the FDW hop's: postgres_fdw's connection to the source (local has none: off)
}
PARAMETERS = {
    "scale": Parameter("scale", "pgbench scale factor of the source (100 = 10M accounts)", count("scale", 1)),
    "duration": Parameter("duration", "seconds per measurement (pgbench -T)", whole_seconds),
    "max_tries": Parameter("max_tries", "pgbench --max-tries for serialization failures", count("tries", 1), 10),
    "isolation": Parameter("isolation", "default_transaction_isolation on every database", isolation,
                           "repeatable-read"),
    "bandwidth": BANDWIDTH,
    "evidence": EVIDENCE,
    "until_ci": UNTIL_CI,
    "script": Parameter("script", f"FILE[@WEIGHT]: your own pgbench script, a UTF-8 text file of at "
                        f"most {files.size_text(MAX_FILE_BYTES)} whose every SQL command the server parses (checked "
                        "before anything is written), run through local and every FDW target instead of the "
                        "builtin ones (repeatable: a weighted mix, as pgbench -f; the workload is named "
                        "script:NAME)", scripts, repeatable=True),
    "script_tables": Parameter("script_tables", "TABLE,...: tables of your own database (the DSN of --server "
                               "source=) copied into ours there for your --script: read, never written",
                               lambda text: list(table_names(text))),
    "init": Parameter("init", f"FILE: SQL statements (a UTF-8 text file of at most {files.size_text(MAX_FILE_BYTES)} "
                      "that the server parses; no psql meta-commands) run on the source after pgbench -i, "
                      "creating and loading the tables your --script reads (every table of its public schema "
                      "becomes a foreign table)", init_script),
}
# quick: the seeds' shape (1 client, RO and RW, the four targets) in 6 rounds of 1 s: the fewest
# rounds whose min..max interval of a median covers 95%, and the whole run within about a minute.
PRESETS = {
    "quick": Preset("quick", "scale 1, 1 client, 6 rounds x 1 s (demo, tests)", 6, {"scale": 1, "duration": 1},
                    {"clients": ("1",)}),
    "standard": Preset("standard", "scale 10, 6 rounds x 10 s (the fewest whose median has a 95% interval)", 6,
                       {"scale": 10, "duration": 10}),
    "paper": Preset("paper", "the seeds: scale 100, 10 rounds x 10 s", 10, {"scale": 100, "duration": 10}),
}
DEFAULT_DIMS = {"workload": ("ro", "rw"), "target": tuple(TARGET_LABEL), "clients": ("1", "5"),
                "latency": (DIRECT,), "pg": ("15",), "protocol": ("simple",),
                "tls": ("off",)}

METRICS = catalogue(*pgbench.METRICS, *statements.METRICS, Metric(
    "tls", "text", "none", "the TLS postgres_fdw's connections to the source negotiated (protocol, cipher, bits; "
    "off: none), as the source logged each (runs with --tls on)"))
PRIMARY_METRIC = "tps"
# The seeds' question is the overhead: TPS of local over TPS through each FDW target, for the same
# workload, clients, major and protocol; local crosses no link and has no postgres_fdw option.
BASELINE = Baseline("target", "local", free=("latency", "tls", fdw.FAMILY.prefix + "."), inverse=True)


def network_path(target: str, latency: str, pg: str) -> NetworkPath | None:
    """The path to the source a target's queries cross: none for local (the unix socket),
    the direct loopback path for fdw_local, the case's link for the external targets."""
    if target == "local":
        return None
    return NetworkPath(pg, SOURCE_ROLE, latency if target in REMOTE_TARGETS else DIRECT)


# -- runs stored by older versions (results/upgrade.py) ----------------------------------------
DEFAULT_PROTOCOL = "simple"   # pgbench's default -M
OLDEST_MAJOR = "15"           # what runs stored before the pg dimension ran


def upgrade_before_latency(stored: upgrade.StoredRun) -> None:
    """Runs stored before the latency dimension measured every path directly."""
    upgrade.fill_dimension(stored, "latency", lambda dims: DIRECT)


def upgrade_before_majors(stored: upgrade.StoredRun) -> None:
    """Runs stored before the pg dimension ran PostgreSQL 15 and named their paths without it
    (source_0ms): pg15_source_0ms today."""
    upgrade.fill_dimension(stored, "pg", lambda dims: OLDEST_MAJOR)
    upgrade.rename_paths(stored, lambda link: link if link.startswith("pg") else f"pg{OLDEST_MAJOR}_{link}")


def upgrade_before_protocol(stored: upgrade.StoredRun) -> None:
    """Runs stored before the protocol dimension ran pgbench's default, -M simple."""
    upgrade.fill_dimension(stored, "protocol", lambda dims: DEFAULT_PROTOCOL)


VOCABULARY = Vocabulary(
    name="fdw-overhead", title="pgbench through a local table vs postgres_fdw",
    seeds=("000", "001"), required_tools=("initdb", "postgres", "pgbench"),
    dimensions=DIMENSIONS, parameters=PARAMETERS, presets=PRESETS,
    default_dims=DEFAULT_DIMS, metrics=METRICS, primary_metric=PRIMARY_METRIC,
    knob_families=knob_families(fdw.FAMILY), baseline=BASELINE,
    upgrades=(upgrade_before_latency, upgrade_before_majors, upgrade_before_protocol),
    roles={"source": Role("source", "holds the pgbench tables (a database of ours); local and fdw_local run "
                          "there", ("createdb",), needs_when={"target=fdw_local": ("postgres_fdw",)}),
           "external": Role("external", "holds the foreign tables of the source (databases of ours) that "
                            "fdw_external and fdw_external_ro read", ("createdb", "postgres_fdw"),
                            reaches=("source",))})
