"""file-fdw-tpch's vocabulary: its dimensions, parameters and presets, the metrics a measurement
carries, the layouts' settings and schemas, and the parsers of its options."""

from __future__ import annotations

import os
import re

from ... import user_queries, validate
from ...datasets.tpch.queries import ALL_QUERIES, SEED_QUERIES
from ...datasets.tpch.schema import ORDER_KEY_LIMIT_SCALE, PARTITIONED, TABLES
from ...matrix import Dimension, Parameter, Preset
from ...metrics import Metric, catalogue
from ...results import upgrade
from ...results.baseline import Baseline
from ..base import Role, Vocabulary, PG, EVIDENCE, UNTIL_CI, knob_families

CITUS, COLUMNAR = "citus", "columnar"
# postgres_fdw: sharding through postgres_fdw (managed instances behind foreign partitions); runs
# stored before it had that name call it scaleout, which --layout still accepts.
LAYOUTS = ("single", "partitioned", "postgres_fdw", CITUS)
LEGACY_LAYOUTS = {"scaleout": "postgres_fdw"}
STOCK_LAYOUTS = LAYOUTS[:3]            # stock PostgreSQL: the default (the citus layout needs Citus)
STORAGES = ("regular", "foreign", COLUMNAR)
DEFAULT_STORAGES = STORAGES[:2]        # columnar needs Citus's citus_columnar
DB = "tpch"
CORES = os.cpu_count() or 1
MAX_PARTITIONS = 16
MAX_WORKERS = 16
DUCKDB_MAX_SCALE = 1.0       # the independent check runs up to this scale (in memory)
FETCH_SIZE = 10000           # postgres_fdw rows per fetch (default 100)
LAYOUT_SYSTEM = {"single": "postgresql", "partitioned": "citusdb", "postgres_fdw": "citusdb", CITUS: "citusdb",
                 "scaleout": "citusdb"}
# postgres_fdw options of the postgres_fdw layout's servers (see study.py for why each is on).
POSTGRES_FDW_OPTIONS = {"async_capable": "true", "use_remote_estimate": "true", "fetch_size": str(FETCH_SIZE)}

# The seed's two settings, and what keeps a load fast and a measurement clean: no WAL beyond
# crash safety (wal_level minimal), no JIT (its compile time would dominate the quick scale,
# and the seed's 9.1 had none). Parallel query is set per layout on the connection.
CLUSTER_SETTINGS = {
    "shared_buffers": "2GB", "work_mem": "64MB", "jit": "off",
    "max_parallel_workers_per_gather": "0",
    "wal_level": "minimal", "max_wal_senders": "0", "max_wal_size": "2GB", "checkpoint_timeout": "30min",
    "synchronous_commit": "off",
}


def canonical(layout: str) -> str:
    """A layout's name today (a stored run's scaleout is the postgres_fdw layout)."""
    return LEGACY_LAYOUTS.get(layout, layout)


def parse_layout(v: str) -> str:
    v = canonical(v.strip())
    if v not in LAYOUTS:
        raise ValueError(f"unknown value '{v}'; choose from {','.join(LAYOUTS)}")
    return v


def layout_rank(layout: str) -> int:
    return LAYOUTS.index(canonical(layout))


def layout_settings(layout: str, cores: int = CORES) -> dict[str, str]:
    """What a case's connection sets: the seed's single node ran one core per query; the
    partitioned layout uses parallel query over all cores; the coordinators of the postgres_fdw
    and citus layouts do not (their nodes do the work, one process per shard)."""
    layout = canonical(layout)
    workers = max(1, cores - 1) if layout == "partitioned" else 0
    return {"max_parallel_workers_per_gather": str(workers),
            "enable_partitionwise_join": "off" if layout in ("single", CITUS) else "on",
            # A partial aggregate per postgres_fdw partition runs on the coordinator (15 cannot
            # push it down) and stops the partitions' scans from running at once (asynchronous
            # Append needs foreign scans as its children): off in the postgres_fdw layout.
            "enable_partitionwise_aggregate": "on" if layout == "partitioned" else "off",
            # With use_remote_estimate, postgres_fdw offers parameterized remote scans: on parts
            # without indexes each one re-scans (through file_fdw re-parses) a whole part, once
            # per outer row, and one misestimated row (Q17, Q21) makes that minutes.
            "enable_nestloop": "off" if layout == "postgres_fdw" else "on"}


def single_tables(layouts) -> tuple[str, ...]:
    """The tables of the single layout's schemas: all, or the small ones the partitioned and
    postgres_fdw layouts share (the citus layout has its own, as reference tables)."""
    return tuple(t for t in TABLES if "single" in layouts or t not in PARTITIONED)


def schema(layout: str, storage: str) -> str:
    return f"{canonical(layout)}_{storage}"


def search_path(layout: str, storage: str) -> str:
    if canonical(layout) in ("single", CITUS):
        return schema(layout, storage)
    return f"{schema(layout, storage)}, {schema('single', storage)}"


def scan_cores(layout: str, workers: int, partitions: int) -> int:
    """Processes that parse during a scan: one per shard in the postgres_fdw layout (its instances)
    and the citus layout (a task per shard); else the leader and its parallel workers (a file_fdw
    partition is read by one process, so no more than the partitions)."""
    if canonical(layout) in ("postgres_fdw", CITUS):
        return partitions
    cores = 1 + workers
    return min(cores, partitions) if layout == "partitioned" else cores


# --- options -----------------------------------------------------------------------------------
def tpch_name(name: str) -> bool:
    """Whether a name is TPC-H's (q, q1, q23...) or 'all': not a name for a query of the user's."""
    return name == "all" or re.fullmatch(r"q[0-9]*", name) is not None


def parse_query(v: str) -> str:
    """'6', 'q6', 'Q6' -> 'q6'; 'all' stays (expanded by cases()); a name of the user's (--query-file
    NAME=FILE) stays, checked by cases()."""
    v = v.strip().lower()
    if v == "all" or (user_queries.NAME.fullmatch(v) and not tpch_name(v)):
        return v
    n = v[1:] if v.startswith("q") else v
    if not validate.digits(n) or not 1 <= int(n) <= 22:
        raise ValueError(f"unknown query '{v}'; TPC-H has queries 1 to 22 (e.g. 1,6 or q1,q6), or all")
    return f"q{int(n)}"


def expand_queries(values, user=()) -> tuple[str, ...]:
    """The TPC-H queries chosen, in their order, then every query of the user's (`user`: their
    names, in the order given): those run whether or not --queries names them."""
    chosen = set(ALL_QUERIES if "all" in values else values)
    return tuple(q for q in ALL_QUERIES if q in chosen) + tuple(user)


def query_rank(query: str) -> tuple:
    """TPC-H's queries by number, then the user's by name."""
    return (int(query[1:]), "") if query in ALL_QUERIES else (len(ALL_QUERIES) + 1, query)


def query_label(query: str) -> str:
    """Q6 for TPC-H's, the user's name as given for theirs."""
    return query.upper() if query in ALL_QUERIES else query


def parse_scale(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise ValueError(f"'{v}' is not a TPC-H scale factor (e.g. 0.1, 1, 10)") from None
    if not 0.01 <= x <= ORDER_KEY_LIMIT_SCALE:
        raise ValueError(f"scale must be from 0.01 to {ORDER_KEY_LIMIT_SCALE}, got {v}")
    return x


def parse_partitions(v: str) -> int:
    if not validate.digits(v) or not 1 <= int(v) <= MAX_PARTITIONS:
        raise ValueError(f"'{v}' is not a number of partitions from 1 to {MAX_PARTITIONS}")
    return int(v)


def parse_workers(v: str) -> int:
    return validate.whole(v, 1, MAX_WORKERS, "worker nodes",
                          small="'{v}' is not a number of worker nodes from 1 to " + str(MAX_WORKERS))


def parse_timeout(v: str) -> int:
    return validate.whole(v, 1, None, "seconds", small="'{v}' is not a whole number of seconds >= 1")


# Bytes on disk per unit of scale (measured at SF 1, rounded up): what --scale needs free.
_FILES_PER_SF = 1.1e9           # the .tbl files
_PARTS_PER_SF = 0.95e9          # lineitem and orders again, in parts
_SINGLE_PER_SF = 1.4e9          # the regular tables of the single layout
_SHARED_PER_SF = 0.22e9         # its small tables only, which the other layouts share (2.0 GB at SF 10)
_PARTITIONED_PER_SF = 1.2e9     # lineitem and orders once more, per further layout
_COLUMNAR_PER_SF = 0.5e9        # a layout's tables again in columnar (compressed: an estimate)
_WAL_PER_CLUSTER = 2.5e9        # COPY is WAL-logged; max_wal_size 2GB caps what is kept
# The queries' temporary files (one query at a time): at SF 10 a warm-up query filled the 20.5 GB
# the loaded layouts had left free. Which query, and its peak, are not yet measured: a floor.
_SPILL_PER_SF = 2.0e9


def cluster_settings(scale: float, partitions: int) -> dict[str, str]:
    """CLUSTER_SETTINGS and temp_file_limit: each process's share of the temporary files the disk
    check reserves (_SPILL_PER_SF), so that a query that would spill more fails alone, as a failed
    measurement, instead of filling the disk; a query's processes are its backend and one per
    partition (parallel workers, or the scale-out instances' backends). At least 1 GB."""
    limit_kb = max(1 << 20, int(_SPILL_PER_SF * scale / (partitions + 1) / 1024))
    return {**CLUSTER_SETTINGS, "temp_file_limit": f"{limit_kb}kB"}


def disk_needed(scale: float, layouts, cached_files: bool, cached_parts: bool, partitions: int = 2,
                managed: bool = True, workers: int = 1, columnar: bool = False) -> float:
    """Bytes a run needs free: the files not yet cached, the regular tables of each layout,
    the WAL of each instance (as much as it loads, up to what max_wal_size keeps) and the
    queries' temporary files; the citus layout's tables, their shards' files (its foreign
    storage) and its nodes' WAL; columnar copies. Not managed (a user tpch server, the single
    layout): its tables' disk is the server's."""
    layouts = [canonical(la) for la in layouts]
    files = 0 if cached_files else _FILES_PER_SF * scale
    if not managed:
        return files + 0.5e9
    stock = [la for la in layouts if la != CITUS]
    single = _SINGLE_PER_SF if "single" in layouts else _SHARED_PER_SF
    need = _SPILL_PER_SF * scale + files + (single * scale if stock else 0)
    others = [la for la in stock if la != "single"]
    if others and not cached_parts:
        need += _PARTS_PER_SF * scale
    need += _PARTITIONED_PER_SF * scale * len(others)
    main_loads = (single + (_PARTITIONED_PER_SF if "partitioned" in layouts else 0)) * scale
    need += min(_WAL_PER_CLUSTER, main_loads) if stock else 0
    if "postgres_fdw" in layouts:
        need += partitions * min(_WAL_PER_CLUSTER, _PARTITIONED_PER_SF * scale / partitions)
    if CITUS in layouts:   # its tables, lineitem and orders again as shard files, the small ones on every node
        nodes = workers + 1
        need += (_SINGLE_PER_SF + _PARTS_PER_SF + _SHARED_PER_SF * nodes) * scale
        need += nodes * min(_WAL_PER_CLUSTER, _SINGLE_PER_SF * scale / workers)
    if columnar:
        need += _COLUMNAR_PER_SF * scale * len(layouts)
    return need + 0.5e9


# --- declarations ------------------------------------------------------------------------------
DIMENSIONS = {
    "queries": Dimension("queries", "TPC-H queries with the specification's validation parameters "
                         "(1-22, q1-q22, or all), and NAMEs of --query-file (which run also when not named here)",
                         parse=parse_query),
    "storage": Dimension("storage", "regular: tables loaded with COPY; foreign: file_fdw over the .tbl files; "
                         "columnar: Citus's columnar access method (needs Citus)", STORAGES),
    "layout": Dimension("layout", "single: one node, one core per query; partitioned: lineitem and orders in "
                        "N partitions, parallel query; postgres_fdw (formerly scaleout): N instances behind "
                        "postgres_fdw partitions; citus: a Citus coordinator and --workers nodes, lineitem and "
                        "orders in N shards (needs Citus)", LAYOUTS, parse=parse_layout),
    "pg": PG,
}
PARAMETERS = {
    "scale": Parameter("scale", "TPC-H scale factor (1 = 1 GB of files; 0.01 to 300)", parse_scale),
    "partitions": Parameter("partitions", "partitions of lineitem and orders: the partitioned layout's, the "
                            "postgres_fdw layout's instances, the citus layout's shards "
                            f"(default: cores, here {CORES})", parse_partitions, CORES),
    "workers": Parameter("workers", "worker nodes of the citus layout (the seed's CitusDB: one)", parse_workers, 1),
    "timeout": Parameter("timeout", "statement timeout of one query, seconds", parse_timeout, 3600),
    "evidence": EVIDENCE,
    "until_ci": UNTIL_CI,
    **user_queries.parameters(tpch_name, "SQL over the TPC-H tables, run on both storages and every layout, its "
                              "answer checked equal across them", inline=False),
}
# Quick: the seed's two columns (one core; all cores on partitions, as CitusDB's 4 blocks) at the
# smallest scale, in rounds enough for 95% intervals; --layout adds the others. Paper: the seed's
# scale and its 4 blocks, every layout (the citus one on one worker, the seed's CitusDB cluster).
QUICK_SCALE = 0.01
PRESETS = {
    "quick": Preset("quick", f"SF {QUICK_SCALE:g}, the seed's eight queries, layouts single and partitioned, "
                    "6 rounds (demo, tests)", 6, {"scale": QUICK_SCALE}, {"layout": ("single", "partitioned")}),
    "standard": Preset("standard", "SF 1, all 22 queries, 3 rounds", 3, {"scale": 1.0}, {"queries": ("all",)}),
    "paper": Preset("paper", "the seed: SF 10, its eight queries, 4 partitions (its 4 blocks), every layout (citus "
                    "on one worker), 3 runs (over 100 GB of disk on a first run: fewer --layout need less)", 3,
                    {"scale": 10.0, "partitions": 4}, {"layout": LAYOUTS}),
}
DEFAULT_DIMS = {"queries": SEED_QUERIES, "storage": DEFAULT_STORAGES, "layout": STOCK_LAYOUTS, "pg": ("15",)}

METRICS = catalogue(
    Metric("duration_ms", "ms", "lower", "one execution of the query: from sending it to having fetched every "
           "row, over the instance's unix socket (the seed's seconds per query, in ms)"),
    Metric("rows", "rows", "none", "rows the query returned (checked: the same on every side)"),
    Metric("answer", "digest", "none", "digest of the sorted rows (exact values), equal to the answer checked "
           "in the warm-up against every side and DuckDB"),
    Metric("plan_workers", "1", "none", "parallel workers the query's plan asked for (0: a serial plan)"),
    Metric("sort_methods", "text", "none", "with --set: the sorts of the query's plan under the case's settings, "
           "from EXPLAIN ANALYZE before its first measurement (e.g. 'external merge Disk 1000kB')"),
    Metric("bytes_scanned", "bytes", "none", "Q1 and Q6 on file_fdw: bytes of lineitem's file the scan parses"),
    Metric("scan_cores", "1", "none", "Q1 and Q6 on file_fdw: processes that parse during the scan"),
    Metric("mb_per_s", "MB/s", "higher", "Q1 and Q6 on file_fdw: the file's MB over the query's time "
           "(the seed's parse rate)"),
    Metric("mb_per_s_per_core", "MB/s", "higher", "Q1 and Q6 on file_fdw: mb_per_s over scan_cores"),
)
PRIMARY_METRIC = "duration_ms"
# The seed's question is the slowdown: each query on file_fdw over the same query on the regular
# tables of its layout and major.
BASELINE = Baseline("storage", "regular")
OLDEST_MAJOR = "15"   # what runs stored before the pg dimension ran


def upgrade_before_majors(stored: upgrade.StoredRun) -> None:
    """Runs stored before the pg dimension ran PostgreSQL 15."""
    upgrade.fill_dimension(stored, "pg", lambda dims: OLDEST_MAJOR)


VOCABULARY = Vocabulary(
    name="file-fdw-tpch", title="TPC-H on regular tables vs file_fdw over the same files, single node vs partitioned, "
                                "sharded through postgres_fdw and by Citus",
    seeds=("002",), required_tools=("initdb", "postgres"),
    dimensions=DIMENSIONS, parameters=PARAMETERS, presets=PRESETS,
    default_dims=DEFAULT_DIMS, metrics=METRICS, primary_metric=PRIMARY_METRIC,
    knob_families=knob_families(), baseline=BASELINE, upgrades=(upgrade_before_majors,),
    roles={"tpch": Role("tpch", "holds the loaded tables (a database of ours) and reads the TPC-H files through "
                        "file_fdw; a user server runs the regular storage of the single layout only (the files "
                        "generated here, loaded by COPY FROM STDIN): file_fdw reads the server's own disk",
                        ("createdb",)),
           "coordinator": Role("coordinator", "the citus layout's coordinator (managed: with --workers managed "
                               "worker nodes; a user's Citus cluster: its workers from pg_dist_node): the regular and "
                               "columnar storages in schemas of ours in the DSN's own database (Citus's metadata is "
                               "per database); not foreign: the shards' files would have to be on the workers' disks",
                               ("citus",)),
           "worker": Role("worker", "worker1..N of the postgres_fdw layout: a partition each, as a loaded table and "
                          "through file_fdw", None, "its file_fdw partitions read files on the server's own disk, "
                          "and the coordinator must reach it; possible with its regular storage only, once the "
                          "tpch role's user server may reach the workers (their addresses, --fdw-host) and the "
                          "partitions are sized by the workers' own cores")})
