"""interfaces-fidelity's vocabulary: workloads, tools, transports, presets, metrics, the target.

  copy   the whole of t10m (seed 003's shape): `psql -c "COPY (select * from t10m) TO STDOUT"
         > /dev/null` against each client's COPY (`-m copy -p 1 -o /dev/null`); ODBC has no
         COPY, so it runs its normal fetch (a finding about ODBC, not a like-for-like ratio).
  loop   sql001's 1-row query N times on one connection: `pgbench -n -f script -t N -c 1`
         (the query in a -f script, simple protocol, as the clients use) against each client's
         normal mode (`-m normal -k 1 -n N -p 0`).
"""

from __future__ import annotations

from ...tools.clients import CLIENTS
from ...matrix import Dimension, Parameter, Preset
from ...metrics import Metric, catalogue
from ...results.baseline import Baseline
from ...servers.paths import DIRECT, NetworkPath
from ...stats import Summary
from ..base import Role, Vocabulary, PG, EVIDENCE, UNTIL_CI, knob_families
from ..interfaces import spec as interfaces_spec
from ..interfaces.spec import CLIENT, DEFAULT_JVM_OPTIONS, PROCESS, parse_jvm_options, parse_positive, parse_rows

TOOLS = ("reference", "libpq", "libpq-nochecksum", "odbc", "jdbc", "psycopg")
DIAGNOSTIC = "libpq-nochecksum"     # pgpb_libpq without the contract's checksum: what the checksum costs
WORKLOADS = ("copy", "loop")
TRANSPORTS = ("unix", "tcp")
TARGET = 1.05          # the libpq client: at most 5% slower than the reference tool
LOOP_CPU_TARGET = 1.10  # its 1-row loop: CPU a query at most 10% above pgbench's (issue 43)
LOOP_WALL_BOUND = 1.02  # its 1-row loop's wall time: within 2% of pgbench's, or not, when the rounds decide
REFERENCE_TOOL = {"copy": "psql COPY > /dev/null", "loop": "pgbench -f (same query)"}
CLIENT_MODE = {("copy", "libpq"): "copy", ("copy", DIAGNOSTIC): "copy", ("copy", "odbc"): "normal",
               ("copy", "jdbc"): "copy", ("copy", "psycopg"): "copy", ("loop", "libpq"): "normal",
               ("loop", DIAGNOSTIC): "normal", ("loop", "odbc"): "normal", ("loop", "jdbc"): "normal",
               ("loop", "psycopg"): "normal"}

DIMENSIONS = {
    "workload": Dimension("workload", "copy: all of t10m (client COPY vs psql COPY > /dev/null); loop: the "
                          "1-row query N times on one connection (client normal mode vs pgbench -f)", WORKLOADS),
    "tool": Dimension("tool", "reference (psql or pgbench) or a native client", TOOLS),
    "transport": Dimension("transport", "unix socket or loopback TCP (JDBC: TCP only; a user server: its DSN's "
                           "transport only)", TRANSPORTS),
    "pg": PG,
}
PARAMETERS = {
    "rows": Parameter("rows", "rows of t10m for the copy workload", parse_rows(1)),
    "iterations": Parameter("iterations", "queries of the loop workload (pgbench -t)", parse_rows(1)),
    "jvm_options": Parameter("jvm_options", "JVM options of the JDBC client", parse_jvm_options,
                             DEFAULT_JVM_OPTIONS),
    "timeout": Parameter("timeout", "seconds one run may take before it is killed", parse_positive("seconds"),
                         3600),
    "evidence": EVIDENCE,
    "until_ci": UNTIL_CI,
}
PRESETS = {
    "quick": Preset("quick", "t10m 200k rows (55 MB), loop x 2000, 6 rounds (tests)", 6,
                    {"rows": 200_000, "iterations": 2000}),
    "standard": Preset("standard", "t10m 1M rows (276 MB), loop x 20000, 10 rounds", 10,
                       {"rows": 1_000_000, "iterations": 20_000}),
    "paper": Preset("paper", "the seed's sizes: t10m 10M rows (2.8 GB), loop x 50k, 10 rounds", 10,
                    {"rows": 10_000_000, "iterations": 50_000}),
}
DEFAULT_DIMS = {"workload": WORKLOADS, "tool": TOOLS, "transport": TRANSPORTS, "pg": ("15",)}

METRICS = catalogue(
    *PROCESS, *(m for m in CLIENT if m.name not in ("iterations", "checksum")),
    Metric("work_ms", "ms", "lower", "the work without connecting or process start: the client's total minus its "
           "connect; pgbench's transactions / tps (without initial connection time)"),
)
PRIMARY_METRIC = "duration_ms"
# The question: each client's wall time over the reference tool's (psql COPY, pgbench), same
# workload, transport and server.
BASELINE = Baseline("tool", "reference")


def excluded(d: dict[str, str]) -> bool:
    return d["tool"] != "reference" and d["transport"] == "unix" and not CLIENTS[d["tool"]].unix_socket


def network_path(transport: str, pg: str) -> NetworkPath | None:
    """Loopback TCP to the one server (probed every round), or the unix socket: interfaces' local paths."""
    return interfaces_spec.network_path(transport, DIRECT, pg)


def target_verdict(r: Summary, target: float = TARGET) -> str:
    """met: the whole 95% interval at or below the target; missed: the whole interval above it;
    otherwise the rounds do not decide (say which side the median is on)."""
    if r.coverage < 0.95:
        return f"too few rounds ({r.n}): median {'within' if r.median <= target else 'above'} target"
    if r.ci_high <= target:
        return "met"
    if r.ci_low > target:
        return "missed"
    return f"undecided: median {'within' if r.median <= target else 'above'}, CI spans {target}"


def verdict(tool: str, r: Summary) -> str:
    """The last column of the ratios: libpq against the target, the diagnostic, the others' findings."""
    if tool == "libpq":
        return target_verdict(r)
    return "diagnostic: the checksum's cost" if tool == DIAGNOSTIC else "finding"


def loop_verdict(tool: str, r: Summary, target: float) -> str:
    """The loop's CPU and wall-time bounds: libpq's verdict, the diagnostic's beside it (what libpq
    would be without the contract's checksum), the other clients' findings."""
    if tool == "libpq":
        return target_verdict(r, target)
    return f"diagnostic: {target_verdict(r, target)}" if tool == DIAGNOSTIC else "finding"


VOCABULARY = Vocabulary(
    name="interfaces-fidelity", title="the native clients against psql COPY and pgbench: are the clients the bottleneck?",
    seeds=("003",), required_tools=("initdb", "postgres", "psql", "pgbench"),
    dimensions=DIMENSIONS, parameters=PARAMETERS, presets=PRESETS,
    default_dims=DEFAULT_DIMS, metrics=METRICS, primary_metric=PRIMARY_METRIC,
    knob_families=knob_families(), baseline=BASELINE,
    roles={"local": Role("local", "holds t50k and t10m (a database of ours), read by the clients and the reference "
                         "tools; a user server by its DSN's way only: unix if its host is a socket directory, "
                         "else tcp", ("createdb",))})
