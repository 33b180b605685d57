"""interfaces' vocabulary: the seed's driver tables as dimensions, its labels, the parameters and
presets, the metric catalogue, and which network path a case crosses.

  interfaces            --interface  libpq, odbc, jdbc, psycopg
  alternateclientcopy   --method     normal (acc-n), single-row / cursor:N (acc-a), copy (acc-y)
                        --fetch      N of cursor:N, a knob: 100,1000,10000 (the other methods: '-')
  conninfos             --transport  unix (lcl:ipc), tcp (lcl:tcp), remote (rmt:tcp), --latency
  sqlstratiter          --sqlstrat   sql001 (1 row by id, x --iterations), sql50k, sql10m, or a query
                                     of the user's (--query NAME=SQL, --query-file NAME=FILE);
                                     each (connect per query, -k 0) or once (-k 1)
  printfracdest         --output     p-none:null, p-all:null, p-all:file
  (beyond the seed)     --via        direct, pgbouncer (a managed PgBouncer in front of the server, over
                                     the case's transport: its unix socket, or TCP with scram-sha-256),
                        --pool-mode  session, transaction
                        --tls        off, on: TLS on tcp and remote (seed 003's "cost of SSL")
"""

from __future__ import annotations

from ... import user_queries, validate
from ...tools.clients import CLIENTS, ITERATION_METRICS
from ...datasets.seed003 import QUERIES, SEED_ID
from ...evidence import pooler as pooler_evidence
from ...matrix import NOT_APPLICABLE, Dimension, Parameter, Preset
from ...results import upgrade
from ...metrics import Metric, catalogue
from ...servers.cluster import TCP_AUTH
from ...servers.paths import DIRECT, NetworkPath, pooler_hop
from ...servers.pgbouncer import POOL_MODES
from ...tools.spawn import process_figures as spawn_figures, process_metrics
from ..base import Role, Vocabulary, BANDWIDTH, LATENCY, PG, TLS, EVIDENCE, UNTIL_CI, knob_families

INTERFACES = ("libpq", "odbc", "jdbc", "psycopg")
SEED_IFNAME = {"libpq": "libpq", "odbc": "ODBC", "jdbc": "JDBC", "psycopg": "psycopg"}
METHODS = ("normal", "single-row", "cursor", "copy")
METHODS_OF = {"libpq": ("normal", "single-row", "copy"), "odbc": ("normal", "cursor"),
              "jdbc": ("normal", "cursor", "copy"), "psycopg": ("normal", "cursor", "copy")}
ACCDESC = {"normal": "acc-n", "single-row": "acc-a", "cursor": "acc-a", "copy": "acc-y"}
STREAMING = ("single-row", "cursor", "copy")     # methods that need not hold the whole result
TRANSPORTS = ("unix", "tcp", "remote")
QUERY_ORDER = tuple(QUERIES)
NO_FETCH = "-"                                   # the fetch value of the methods that have no fetch size
STRATEGIES = {"each": "0", "once": "1"}          # -> the client's -k (and the seed's connstrat)
SQLSTRATS = ("sql001:each", "sql50k:each", "sql10m:each", "sql001:once", "sql50k:once", "sql10m:once")
OUTPUTS = ("p-none:null", "p-all:null", "p-all:file")   # the seed's printfracdest
SEED_NUMITER = {"sql001": "50k", "sql50k": "001", "sql10m": "001"}
DEFAULT_JVM_OPTIONS = "-XX:+UseSerialGC -Xms32m -XX:MaxRAMPercentage=70"
PREFERRED_OUTPUT = "p-all:file"     # what the seed's summaries show
LOCAL_ROLE, REMOTE_ROLE = "local", "remote"
POOLER = "pgbouncer"
# Clients that prepare a statement on the server once a query repeats (pgJDBC's prepareThreshold, psycopg's
# prepare_threshold: 5): PgBouncer 1.18 keeps no prepared statement across transactions, so not in transaction mode.
SESSION_CLIENTS = ("jdbc", "psycopg")
EXCLUDED = ("jdbc and psycopg under --pool-mode transaction: not measured (they prepare a repeated query on the "
            "server, and PgBouncer 1.18 keeps no prepared statement across transactions)")


# -- parsers of the options -------------------------------------------------------------------------
def parse_rows(minimum: int):
    def parse(v: str) -> int:
        return validate.rows(v, minimum)
    return parse


def parse_positive(what: str):
    def parse(v: str) -> int:
        return validate.whole(v, 1, None, what)
    return parse


def parse_jvm_options(v: str) -> str:
    opts = validate.shell_words(v)
    if any(not o.startswith("-") or o in ("-jar", "-cp", "-classpath") for o in opts):
        raise ValueError(f"'{v}': give JVM options only (each starting with '-', no -jar or -cp)")
    return " ".join(opts)


def parse_tcp_auth(v: str) -> str:
    if v not in TCP_AUTH:
        raise ValueError(f"unknown value '{v}'; choose {' or '.join(TCP_AUTH)}")
    return v


def tcp_auth(options) -> str:
    """--tcp-auth of a run."""
    return options.params["tcp_auth"]


def parse_fetch(v: str) -> str:
    return str(validate.whole(v, 1, None, "rows"))


def parse_sqlstrat(v: str) -> str:
    """A seed sqlstrat, or NAME:each / NAME:once of a query of the user's (checked by cases())."""
    query, _, strategy = v.partition(":")
    if v in SQLSTRATS or (strategy in STRATEGIES and user_queries.NAME.fullmatch(query) and query not in QUERIES):
        return v
    raise ValueError(f"unknown value '{v}'; choose from {','.join(SQLSTRATS)}, or NAME:each or NAME:once of "
                     "a --query NAME=SQL")


def parse_among(what: str, values: tuple[str, ...]):
    """A comma-separated list of some of `values`, normalised ('tcp,unix')."""
    def parse(v: str) -> str:
        chosen = [t.strip() for t in v.split(",")]
        if not v.strip() or any(t not in values for t in chosen):
            raise ValueError(f"'{v}': give {what} among {','.join(values)}")
        return ",".join(dict.fromkeys(chosen))
    return parse


# -- the seed's labels ------------------------------------------------------------------------------
def numiter_text(n: int) -> str:
    """The seed's way of writing a count: 1 -> '001', 50000 -> '50k', 10000000 -> '10m'."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:03d}" if n < 1000 else str(n)


def conndesc(transport: str, latency: str = DIRECT) -> str:
    """The seed's conninfos key: lcl:ipc, lcl:tcp, rmt:tcp; an emulated link is rmt+5ms:tcp."""
    if transport == "unix":
        return "lcl:ipc"
    if transport == "tcp":
        return "lcl:tcp"
    return "rmt:tcp" if latency == DIRECT else f"rmt+{latency}:tcp"


def split_sqlstrat(value: str) -> tuple[str, str]:
    query, strategy = value.split(":")
    return query, strategy


def query_rank(query: str) -> tuple:
    """The seed's queries in their order, then the user's by name."""
    return (QUERY_ORDER.index(query), "") if query in QUERY_ORDER else (len(QUERY_ORDER), query)


def user_sqlstrats(chosen: tuple[str, ...], queries) -> tuple[str, ...]:
    """--sqlstrat's values, and NAME:once of every user query it does not name (connect once)."""
    named = {split_sqlstrat(s)[0] for s in chosen}
    return tuple(chosen) + tuple(f"{q}:once" for q in queries if q not in named)


def fetch_values(options) -> tuple[str, ...]:
    """--fetch's values, and NO_FETCH for the methods without a fetch size."""
    return (*options.dims["fetch"], NO_FETCH)


def network_path(transport: str, latency: str, pg: str, pool_mode: str | None = None) -> NetworkPath | None:
    """The path a case's client crosses: the remote server's (direct or through its link), the
    local server's loopback TCP (probed for lcl:tcp's round trip), none over the unix socket; through
    a PgBouncer in `pool_mode` when given (then the unix socket's path too)."""
    hops = (pooler_hop(pool_mode),) if pool_mode else ()
    if transport == "remote":
        return NetworkPath(pg, REMOTE_ROLE, latency, hops)
    if transport == "tcp" or hops:
        return NetworkPath(pg, LOCAL_ROLE, DIRECT, hops)
    return None


def pool_mode_of(case) -> str | None:
    """The case's pool mode when it crosses a PgBouncer, else None."""
    return case.get("pool_mode") if case.get("via") == POOLER else None


def case_path(case) -> NetworkPath | None:
    return network_path(case["transport"], case["latency"], case["pg"], pool_mode_of(case))


# -- dimensions, parameters, presets ----------------------------------------------------------------
DIMENSIONS = {
    "interface": Dimension("interface", "client interface (seed 003's interfaces; psycopg is beyond the seed)",
                           INTERFACES),
    "method": Dimension("method", "fetch method (seed's alternateclientcopy): normal = acc-n; single-row "
                        "(libpq) or cursor (ODBC, JDBC, psycopg; --fetch rows per fetch) = acc-a; copy = acc-y",
                        METHODS),
    "fetch": Dimension("fetch", "rows per fetch of the cursor method (a knob: e.g. 100,1000,10000); the other "
                       "methods have none and run once, as fetch '-'", parse=parse_fetch, knob=True),
    "transport": Dimension("transport", "seed's conninfos: unix = lcl:ipc (unix socket), tcp = lcl:tcp "
                           "(loopback), remote = rmt:tcp (a second server over TCP, through --latency links)",
                           TRANSPORTS),
    "sqlstrat": Dimension("sqlstrat", "seed's sqlstratiter: query (sql001 = 1 row by id, --iterations times; "
                          "sql50k = all of t50k; sql10m = all of t10m; NAME = a --query of yours, which also "
                          "runs as NAME:once when not named here) and connection strategy (each = "
                          "connect per query, once = connect once)", SQLSTRATS, parse=parse_sqlstrat),
    "output": Dimension("output", "seed's printfracdest: p-none:null (fetch, do not print), p-all:null "
                        "(print every row to /dev/null), p-all:file (print every row to a file)", OUTPUTS),
    "latency": LATENCY,
    "pg": PG,
    # Beyond the seed, and quiet at its values: the seed's cases keep their ids.
    "via": Dimension("via", "what the client connects through: direct, or a managed PgBouncer in front of the "
                     "server (over the case's transport: its unix socket with trust, TCP with scram-sha-256; "
                     "the direct path only)", ("direct", POOLER), knob=True, quiet="direct"),
    "pool_mode": Dimension("pool_mode", "PgBouncer's pool_mode with --via pgbouncer (direct cases: '-'); jdbc and "
                           "psycopg are not measured in transaction mode (they prepare repeated queries)",
                           POOL_MODES, knob=True, quiet=NOT_APPLICABLE),
    "tls": TLS,
}
PARAMETERS = {
    "iterations": Parameter("iterations", "how many times sql001 runs per measurement (seed: 50k)", parse_rows(1)),
    "t50k_rows": Parameter("t50k_rows", f"rows of t50k (seed: 50k; at least {SEED_ID}, the row sql001 reads)",
                           parse_rows(SEED_ID)),
    "t10m_rows": Parameter("t10m_rows", "rows of t10m (seed: 10M)", parse_rows(1)),
    "each_transports": Parameter("each_transports", "transports over which connect-per-query (--sqlstrat ...:each) "
                                 "runs, e.g. tcp; connect once runs over every --transport (default: each too)",
                                 parse_among("transports", TRANSPORTS)),
    "each_methods": Parameter("each_methods", "methods with which connect-per-query runs, e.g. normal (what a "
                              "connection costs does not depend on the fetch method); default: every --method",
                              parse_among("methods", METHODS)),
    "jvm_options": Parameter("jvm_options", "JVM options of the JDBC client, as --jvm-options='...' (default: "
                             "the serial collector, one thread as the client is, and a small initial heap, so "
                             "that its resident set follows what the driver holds)", parse_jvm_options,
                             DEFAULT_JVM_OPTIONS),
    "tcp_auth": Parameter("tcp_auth", "how the managed servers check a TCP client's password: scram-sha-256 "
                          "(4,096 HMAC-SHA-256 iterations in the client at every connection) or md5 (the password "
                          "stored as an md5 hash: one hash a connection, as before PostgreSQL 10); the unix "
                          "socket asks no password",
                          parse_tcp_auth, TCP_AUTH[0], knob=True),
    "timeout": Parameter("timeout", "seconds one client run may take before it is killed",
                         parse_positive("seconds"), 3600),
    "bandwidth": BANDWIDTH,
    "evidence": EVIDENCE,
    "until_ci": UNTIL_CI,
    **user_queries.parameters(lambda name: name in QUERIES, "run by every client, method and transport as "
                              "--sqlstrat NAME:once, or as --sqlstrat names it; checked against psql's COPY"),
}
# quick: every client and method over the three transports connecting once (the rankings), and each
# client's normal method connecting per query over TCP, where the four clients meet (the seed's point:
# the ratio each/once; a connection's cost does not depend on the fetch method). The clients' process
# starts (the JVM's, the interpreter's) are most of its time: the fewest cases that keep that shape.
PRESETS = {
    "quick": Preset("quick", "sql001 x 20 connecting once over every transport, per query (normal method) over "
                    "tcp; t50k 5k rows; p-all:file; 6 rounds, 34 cases (demo, tests)", 6,
                    {"iterations": 20, "t50k_rows": 5000, "t10m_rows": 50_000, "each_transports": "tcp",
                     "each_methods": "normal"},
                    {"sqlstrat": ("sql001:each", "sql001:once"), "output": ("p-all:file",)}),
    "standard": Preset("standard", "sql001 x 1000, t50k 50k rows, t10m 1M rows; p-all:file; 3 rounds "
                       "(about half an hour)", 3,
                       {"iterations": 1000, "t50k_rows": 50_000, "t10m_rows": 1_000_000},
                       {"output": ("p-all:file",)}),
    "paper": Preset("paper", "the seed: sql001 x 50k, t50k 50k rows, t10m 10M rows, every output; "
                    "9 rounds (the seed's group size)", 9,
                    {"iterations": 50_000, "t50k_rows": 50_000, "t10m_rows": 10_000_000}),
}
EACH_ONLY = {"transport": "each_transports", "method": "each_methods"}   # dimension -> the parameter limiting it
DEFAULT_DIMS = {"interface": INTERFACES, "method": METHODS, "fetch": ("1000",), "transport": TRANSPORTS,
                "sqlstrat": SQLSTRATS, "output": OUTPUTS, "latency": (DIRECT,), "pg": ("15",), "via": ("direct",),
                "pool_mode": ("session",), "tls": ("off",)}


def excluded(d: dict[str, str], requested_latencies, each_only: dict[str, str]) -> bool:
    """The seed's exclusions, where links apply, and where connect-per-query runs (each_only:
    dimension -> the values it is limited to, 'tcp,remote')."""
    if d["method"] not in METHODS_OF[d["interface"]]:
        return True
    if (d["method"] == "cursor") == (d["fetch"] == NO_FETCH):
        return True                  # a fetch size is the cursor method's alone; the others run once
    if d["transport"] == "unix" and not CLIENTS[d["interface"]].unix_socket:
        return True                  # pgjdbc has no unix sockets (the seed had no JDBC lcl:ipc)
    if d["transport"] == "unix" and d.get("tls", "off") != "off":
        return True                  # a unix socket has no TLS
    if d["sqlstrat"].endswith(":each") and any(d[dim] not in values.split(",") for dim, values in each_only.items()):
        return True
    if "pool_mode" in d and _pooler_excluded(d):
        return True
    if d["transport"] == "remote":
        return d["latency"] not in requested_latencies
    return d["latency"] != DIRECT    # local paths never cross a link


def _pooler_excluded(d: dict[str, str]) -> bool:
    """A pool mode only through a pooler, a pooler on the direct path only, no session client in transaction mode."""
    pooled = d["via"] == POOLER
    if pooled != (d["pool_mode"] != NOT_APPLICABLE):
        return True
    return pooled and (d["latency"] != DIRECT or (d["pool_mode"] == "transaction" and d["interface"] in SESSION_CLIENTS))


# -- metrics ----------------------------------------------------------------------------------------
# What the kernel accounts for the measured command (tools/spawn.py): the same for every tool.
PROCESS = process_metrics("duration_ms", "the command (the JVM's, the interpreter's start: the seed's duration)",
                          "lower")
# What a native client prints (clients/CONTRACT.md), its seconds as milliseconds.
CLIENT = (
    Metric("connect_ms", "ms", "lower", "the client's clock: connection set-up, summed over its connections"),
    Metric("exec_ms", "ms", "lower", "the client's clock: from sending the query to the first result (the whole "
           "transfer where the driver receives the result first: normal methods)"),
    Metric("fetch_ms", "ms", "lower", "the client's clock: reading, rendering, hashing and printing the rows"),
    Metric("total_ms", "ms", "lower", "the client's clock: from before its first connection to its output closed"),
    Metric("rows", "rows", "none", "rows read, over every iteration"),
    Metric("bytes", "bytes", "none", "bytes of row data read as COPY text, over every iteration"),
    Metric("iterations", "1", "none", "times the query ran (-n)"),
    Metric("checksum", "text", "none", "sum of every row's hash (hex, clients/CONTRACT.md), checked against psql's COPY"),
    Metric("mode", "text", "none", "the client's fetch mode (-m), or the reference tool"),
    Metric("version", "text", "none", "the client's driver and its version"),
)
METRICS = catalogue(
    *PROCESS, *CLIENT,
    Metric("startup_ms", "ms", "lower", "duration_ms - total_ms: process start and exit outside the client's clock"),
    Metric("rows_per_s", "rows/s", "higher", "rows over the client's total"),
    Metric("mb_per_s", "MB/s", "higher", "10^6 bytes of COPY text over the client's total"),
    Metric("ms_per_iteration", "ms", "lower", "the client's total per run of the query"),
    *ITERATION_METRICS, *pooler_evidence.CLIENT_METRICS, pooler_evidence.SERVER_LEG_TLS,
    Metric("tls", "text", "none", "the TLS the client's connections negotiated (protocol, cipher, bits; off: none), "
           "as the server logged each, or through a PgBouncer the pooler (runs with --tls on)"),
)
PRIMARY_METRIC = "duration_ms"


def process_figures(run) -> dict:
    """PROCESS of a measured run (tools.spawn.Measured or clients.ClientRun)."""
    return spawn_figures(run, "duration_ms")


def client_times(output: dict) -> dict:
    """The contract's connect_s, exec_s, fetch_s and total_s as milliseconds."""
    return {f"{k}_ms": output[f"{k}_s"] * 1000 for k in ("connect", "exec", "fetch", "total")}


# No baseline: the seed ranks every candidate by its duration normalised within its testcase (no
# one case is the reference, every candidate's own median counts), and its connect-per-query and
# memory ratios are side tables; so --until-ci reads each case's own duration.


def upgrade_before_fetch_dimension(stored: upgrade.StoredRun) -> None:
    """Runs stored before --fetch was a dimension fetched by one size, their parameter fetch
    (1000 when not given), in the cursor method's cases only."""
    fetch = str(stored.params.get("fetch", 1000))
    stored.study_options["dims"].setdefault("fetch", [fetch])
    upgrade.fill_dimension(stored, "fetch", lambda dims: fetch if dims["method"] == "cursor" else NO_FETCH)


def upgrade_before_poolers(stored: upgrade.StoredRun) -> None:
    """Runs stored before --via connected directly (their ids never had these values)."""
    upgrade.fill_dimension(stored, "via", lambda dims: "direct")
    upgrade.fill_dimension(stored, "pool_mode", lambda dims: NOT_APPLICABLE)


VOCABULARY = Vocabulary(
    name="interfaces", title="client interfaces and fetch methods (libpq, ODBC, JDBC, psycopg) by transport and strategy",
    seeds=("003",), required_tools=("initdb", "postgres", "psql"),
    dimensions=DIMENSIONS, parameters=PARAMETERS, presets=PRESETS,
    default_dims=DEFAULT_DIMS, metrics=METRICS, primary_metric=PRIMARY_METRIC,
    knob_families=knob_families(), upgrades=(upgrade_before_fetch_dimension, upgrade_before_poolers),
    roles={"local": Role("local", "holds the test tables (a database of ours), reached by socket and TCP; a "
                         "user server by its DSN's way only: unix if its host is a socket directory, else tcp",
                         ("createdb",)),
           "remote": Role("remote", "the seed's rmt:tcp: the same tables (a database of ours) on another server, "
                          "over TCP", ("createdb",))})
