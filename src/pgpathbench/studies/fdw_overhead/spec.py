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
from ...matrix import NOT_APPLICABLE, Dimension, Parameter, Preset, positive_int
from ...evidence import pooler as pooler_evidence
from ...metrics import Metric, catalogue
from ...results import upgrade
from ...results.baseline import Baseline
from ...servers import fdw
from ...servers.paths import DIRECT, NetworkPath, pooler_hop
from ...servers.pgbouncer import POOL_MODES
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


CONNECT = {"once": "each pgbench client connects once", "each": "a new connection per transaction (pgbench -C)"}


def connect(v: str) -> str:
    if v not in CONNECT:
        raise ValueError(f"unknown value '{v}'; choose from {','.join(CONNECT)}")
    return v


def protocol(v: str) -> str:
    if v not in pgbench.PROTOCOLS:
        raise ValueError(f"unknown protocol '{v}'; choose from {','.join(pgbench.PROTOCOLS)}")
    return v


CLOSED_LOOP = "max"        # --rate's quiet value: pgbench without -R, as every run before --rate
AUTO = "auto"
AUTO_STEPS = ("0.2x", "0.4x", "0.6x", "0.8x", "1x", "1.2x")   # --rate auto: shares of a path's closed-loop TPS
MAX_RATE_TPS = 10_000_000
MAX_SHARE = 10


def rate(v: str) -> str:
    """'max', 'auto', a positive rate in TPS ('800', '12.5') or a share of the closed loop ('0.6x')."""
    if v in (CLOSED_LOOP, AUTO):
        return v
    number = v.removesuffix("x")
    if not re.fullmatch(r"-?[0-9]{1,12}(\.[0-9]{1,6})?", number):
        raise ValueError(f"'{v}' is not a rate; give transactions per second (800), a share of the closed "
                         "loop's TPS (0.6x), auto or max")
    x = float(number)
    if not x > 0:
        raise ValueError(f"'{v}' is not a positive rate; give transactions per second above 0")
    if x > (MAX_SHARE if v.endswith("x") else MAX_RATE_TPS):
        raise ValueError(f"'{v}' is too large: at most " + (f"{MAX_SHARE}x" if v.endswith("x") else
                                                           f"{MAX_RATE_TPS} transactions per second"))
    return f"{x:g}x" if v.endswith("x") else f"{x:g}"


def latency_limit(v: str) -> float:
    """--latency-limit in ms: above 0, at most a minute."""
    if not re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,3})?", v) or not 0 < float(v) <= 60_000:
        raise ValueError(f"'{v}' is not a number of milliseconds above 0 and at most 60000; give e.g. 50 or 12.5")
    return float(v)


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
    "rate": Dimension("rate", "pgbench -R: offered transactions per second, open loop (800; 0.6x: a share of "
                      "the path's closed-loop TPS, measured once per run; auto: 0.2x to 1.2x); max: the closed "
                      "loop. The report finds each path's knee", parse=rate, quiet=CLOSED_LOOP),
    # The hops (servers/pgbouncer.py): `direct` is quiet, so cases without a pooler keep their ids.
    "via": Dimension("via", "what pgbench connects through to the target's server: direct, or a managed PgBouncer "
                     "in front of it (over the same unix socket, with the same trust)", ("direct", "pgbouncer"),
                     knob=True, quiet="direct"),
    "pool_mode": Dimension("pool_mode", "PgBouncer's pool_mode for --via/--fdw-via pgbouncer (cases without a "
                           "pooler: '-'); transaction mode excludes --protocol prepared (PgBouncer 1.18 keeps no "
                           "prepared statement across transactions)", POOL_MODES, knob=True, quiet=NOT_APPLICABLE),
    "fdw_via": Dimension("fdw_via", "what the foreign server reaches the source through: direct, or a managed "
                         "PgBouncer in front of the source (bounding postgres_fdw's connections; FDW targets over "
                         "the direct path only)", ("direct", "pgbouncer"), knob=True, quiet="direct"),
    "tls": TLS,   # the FDW hop's: postgres_fdw's connection to the source (local has none: off)
}
POOLER = "pgbouncer"
PARAMETERS = {
    "scale": Parameter("scale", "pgbench scale factor of the source (100 = 10M accounts)", count("scale", 1)),
    "duration": Parameter("duration", "seconds per measurement (pgbench -T)", whole_seconds),
    "max_tries": Parameter("max_tries", "pgbench --max-tries for serialization failures", count("tries", 1), 10),
    "isolation": Parameter("isolation", "default_transaction_isolation on every database", isolation,
                           "repeatable-read"),
    "connect": Parameter("connect", "once: each pgbench client connects once; each: a new connection per "
                         "transaction (pgbench -C), where a pooler matters most", connect, "once", knob=True),
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
    "latency_limit": Parameter("latency_limit", "MS: pgbench --latency-limit with --rate: transactions already "
                               "later than MS at their scheduled start are skipped, and counted", latency_limit),
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
                "latency": (DIRECT,), "pg": ("15",), "protocol": ("simple",), "rate": (CLOSED_LOOP,),
                "via": ("direct",), "pool_mode": ("session",), "fdw_via": ("direct",), "tls": ("off",)}

RATE_OFFERED = Metric("rate_offered_tps", "tx/s", "none", "pgbench -R: the transactions per second offered "
                      "(open loop); for a share (0.6x), that share of the path's closed-loop TPS measured for the run")
TLS_NEGOTIATED = Metric("tls", "text", "none", "the TLS postgres_fdw's connections to the source negotiated "
                        "(protocol, cipher, bits; off: none), as the source logged each, or with --fdw-via "
                        "pgbouncer its connections to the pooler, as the pooler logged each (runs with --tls on)")
METRICS = catalogue(*pgbench.METRICS, *statements.METRICS, RATE_OFFERED, TLS_NEGOTIATED, *pooler_evidence.METRICS,
                    pooler_evidence.SERVER_LEG_TLS)
PRIMARY_METRIC = "tps"
# The seeds' question is the overhead: TPS of local over TPS through each FDW target, for the same
# workload, clients, major and protocol; local crosses no link and has no postgres_fdw option.
BASELINE = Baseline("target", "local", free=("latency", "fdw_via", "tls", fdw.FAMILY.prefix + "."), inverse=True)


def network_path(target: str, latency: str, pg: str, via: str = "direct", pool_mode: str = NOT_APPLICABLE,
                 fdw_via: str = "direct") -> NetworkPath | None:
    """The path to the source a target's queries cross: none for local (the unix socket) unless through
    a pooler, the direct loopback path for fdw_local, the case's link for the external targets; the
    poolers on the way as its hops."""
    hops = ((pooler_hop(pool_mode),) if via == POOLER else ()) + \
        ((pooler_hop(pool_mode, fdw=True),) if fdw_via == POOLER else ())
    if target == "local" and not hops:
        return None
    return NetworkPath(pg, SOURCE_ROLE, latency if target in REMOTE_TARGETS else DIRECT, hops)


def case_path(case) -> NetworkPath | None:
    """network_path of a case (matrix.Case or the result model's), from its dimensions."""
    return network_path(case["target"], case["latency"], case["pg"], case.get("via", "direct"),
                        case.get("pool_mode", NOT_APPLICABLE), case.get("fdw_via", "direct"))


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


def upgrade_before_rate(stored: upgrade.StoredRun) -> None:
    """Runs stored before --rate ran pgbench's closed loop (their case ids leave it out, as today's)."""
    upgrade.fill_dimension(stored, "rate", lambda dims: CLOSED_LOOP)


def upgrade_before_poolers(stored: upgrade.StoredRun) -> None:
    """Runs stored before --via and --fdw-via crossed no pooler (their ids never had these values)."""
    for name, value in (("via", "direct"), ("pool_mode", NOT_APPLICABLE), ("fdw_via", "direct")):
        upgrade.fill_dimension(stored, name, lambda dims, value=value: value)


VOCABULARY = Vocabulary(
    name="fdw-overhead", title="pgbench through a local table vs postgres_fdw",
    seeds=("000", "001"), required_tools=("initdb", "postgres", "pgbench"),
    dimensions=DIMENSIONS, parameters=PARAMETERS, presets=PRESETS,
    default_dims=DEFAULT_DIMS, metrics=METRICS, primary_metric=PRIMARY_METRIC,
    knob_families=knob_families(fdw.FAMILY), baseline=BASELINE,
    upgrades=(upgrade_before_latency, upgrade_before_majors, upgrade_before_protocol, upgrade_before_rate,
              upgrade_before_poolers),
    roles={"source": Role("source", "holds the pgbench tables (a database of ours); local and fdw_local run "
                          "there", ("createdb",), needs_when={"target=fdw_local": ("postgres_fdw",)}),
           "external": Role("external", "holds the foreign tables of the source (databases of ours) that "
                            "fdw_external and fdw_external_ro read", ("createdb", "postgres_fdw"),
                            reaches=("source",))})
