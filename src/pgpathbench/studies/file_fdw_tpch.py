"""file-fdw-tpch (seed 002): TPC-H on regular tables vs file_fdw foreign tables over the same
files, on one node and partitioned.

The seed ran TPC-H SF 10 on PostgreSQL 9.1 regular tables and on file_fdw foreign tables over
the '|' files, and the same on a one-worker CitusDB cluster with lineitem and orders in 4
blocks (all cores); no indexes; shared_buffers 2GB, work_mem 64MB; a warm-up, then three runs.

Here, with stock PostgreSQL only, three layouts, each on both storages:

- `single`: one instance, regular tables and file_fdw tables, no parallel query (the seed's
  PostgreSQL column: one core per query).
- `partitioned`: lineitem and orders as partitioned tables of N range partitions on the order
  key (N = cores by default), in the parts tpchgen-cli writes (--parts N --part K): regular
  partitions, or file_fdw partitions, one per part file; parallel query on (cores - 1 workers
  and the leader), partitionwise join and aggregate on. The small tables are the single
  layout's.
- `scaleout`: N more managed instances each hold one part (regular tables and file_fdw tables
  over their part); a coordinator reaches them through postgres_fdw partitions with
  async_capable, so the N instances scan their parts at once; partitionwise join (with
  use_remote_estimate, else postgres_fdw's own estimate of a remote join is far too high) pushes
  the lineitem-orders join of a part down to its instance, and no nested loop on the
  coordinator (else the parameterized remote scans use_remote_estimate offers re-scan a whole
  part per outer row: minutes for Q17 and Q21 at SF 0.1). postgres_fdw cannot push a partial
  aggregate down, and a local partial aggregate per partition would make the scans run one
  after the other: partitionwise aggregate is off there. The stock-PostgreSQL counterpart of
  the seed's CitusDB column (which also ran the partial aggregates on its workers).

Everything lives in one database `tpch` of the instance `tpch` (the coordinator too), in
schemas named LAYOUT_STORAGE; a case's connection has search_path LAYOUT_STORAGE, then
single_STORAGE for the small tables. A file_fdw table has one extra, always empty, trailing
column, because every tpchgen line ends with '|'; regular tables are loaded without it.

Warm-up and answer checks happen in prepare(): every case runs once before the first round
(unrecorded, as the seed's warm-up run), and its rows are compared: regular, foreign and every
layout must return the same rows (exactly: PostgreSQL's numerics are exact), and at scale <= 1
they must agree with DuckDB run over the same files with the specification's own text (numbers
within 1e-6 relative). Any mismatch fails the run with the differing rows. Every measurement
then checks its rows' digest against the checked answer.

One measurement is one execution of one query on one storage and layout: the time from sending
it to having fetched every row (over the instance's unix socket; results are small). For the
scan-bound queries (Q1 and Q6 read lineitem only) of the foreign storage the bytes of the files
parsed are kept too: the parse rate is bytes over seconds, per core used.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

import psycopg
from psycopg import sql

from .. import validate
from ..errors import CaseError, UserError
from ..matrix import Case, Dimension, Parameter, Preset, cross
from ..references import (FILE_FDW_TPCH_PARSE_MB_S_PER_CORE, FILE_FDW_TPCH_SECONDS, FILE_FDW_TPCH_SOURCE,
                          file_fdw_tpch_slowdown)
from ..report import Table
from ..stats import ratio_summary, summarise
from . import tpch
from .base import PG, StudyEnv, StudyOptions
from .tpch_data import (MB, Task, TpchFiles, answer_digest, compare_rows, copy_tasks, duckdb_answers, parse_rate,
                        plan_shape, plan_workers, run_tasks, scale_text, tpchgen_path, tpchgen_version)

LAYOUTS = ("single", "partitioned", "scaleout")
STORAGES = ("regular", "foreign")
DB = "tpch"
CORES = os.cpu_count() or 1
MAX_PARTITIONS = 16
DUCKDB_MAX_SCALE = 1.0       # the independent check runs up to this scale (in memory)
FETCH_SIZE = 10000           # postgres_fdw rows per fetch (default 100)
LAYOUT_SYSTEM = {"single": "postgresql", "partitioned": "citusdb", "scaleout": "citusdb"}

# The seed's two settings, and what keeps a load fast and a measurement clean: no WAL beyond
# crash safety (wal_level minimal), no JIT (its compile time would dominate the quick scale,
# and the seed's 9.1 had none). Parallel query is set per layout on the connection.
CLUSTER_SETTINGS = {
    "shared_buffers": "2GB", "work_mem": "64MB", "jit": "off",
    "max_parallel_workers_per_gather": "0",
    "wal_level": "minimal", "max_wal_senders": "0", "max_wal_size": "2GB", "checkpoint_timeout": "30min",
    "synchronous_commit": "off",
}


def layout_settings(layout: str, cores: int = CORES) -> dict[str, str]:
    """What a case's connection sets: the seed's single node ran one core per query; the
    partitioned layout uses parallel query over all cores; the coordinator of the scale-out
    layout does not (its instances do the work)."""
    workers = max(1, cores - 1) if layout == "partitioned" else 0
    return {"max_parallel_workers_per_gather": str(workers),
            "enable_partitionwise_join": "off" if layout == "single" else "on",
            # A partial aggregate per postgres_fdw partition runs on the coordinator (15 cannot
            # push it down) and stops the partitions' scans from running at once (asynchronous
            # Append needs foreign scans as its children): off in the scale-out layout.
            "enable_partitionwise_aggregate": "on" if layout == "partitioned" else "off",
            # With use_remote_estimate, postgres_fdw offers parameterized remote scans: on parts
            # without indexes each one re-scans (through file_fdw re-parses) a whole part, once
            # per outer row, and one misestimated row (Q17, Q21) makes that minutes.
            "enable_nestloop": "off" if layout == "scaleout" else "on"}


def single_tables(layouts) -> tuple[str, ...]:
    """The tables of the single layout's schemas: all, or the small ones the others share."""
    return tuple(t for t in tpch.TABLES if "single" in layouts or t not in tpch.PARTITIONED)


def schema(layout: str, storage: str) -> str:
    return f"{layout}_{storage}"


def search_path(layout: str, storage: str) -> str:
    return schema(layout, storage) if layout == "single" else f"{schema(layout, storage)}, {schema('single', storage)}"


# --- options -----------------------------------------------------------------------------------
def parse_query(v: str) -> str:
    """'6', 'q6', 'Q6' -> 'q6'; 'all' stays (expanded by cases())."""
    v = v.strip().lower()
    if v == "all":
        return v
    n = v[1:] if v.startswith("q") else v
    if not validate.digits(n) or not 1 <= int(n) <= 22:
        raise ValueError(f"unknown query '{v}'; TPC-H has queries 1 to 22 (e.g. 1,6 or q1,q6), or all")
    return f"q{int(n)}"


def expand_queries(values) -> tuple[str, ...]:
    chosen = set(tpch.ALL_QUERIES if "all" in values else values)
    return tuple(q for q in tpch.ALL_QUERIES if q in chosen)


def parse_scale(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise ValueError(f"'{v}' is not a TPC-H scale factor (e.g. 0.1, 1, 10)") from None
    if not 0.01 <= x <= tpch.ORDER_KEY_LIMIT_SCALE:
        raise ValueError(f"scale must be from 0.01 to {tpch.ORDER_KEY_LIMIT_SCALE}, got {v}")
    return x


def parse_partitions(v: str) -> int:
    if not validate.digits(v) or not 1 <= int(v) <= MAX_PARTITIONS:
        raise ValueError(f"'{v}' is not a number of partitions from 1 to {MAX_PARTITIONS}")
    return int(v)


def parse_timeout(v: str) -> int:
    return validate.whole(v, 1, None, "seconds", small="'{v}' is not a whole number of seconds >= 1")


# Bytes on disk per unit of scale (measured at SF 1, rounded up): what --scale needs free.
_FILES_PER_SF = 1.1e9           # the .tbl files
_PARTS_PER_SF = 0.95e9          # lineitem and orders again, in parts
_SINGLE_PER_SF = 1.4e9          # the regular tables of the single layout
_PARTITIONED_PER_SF = 1.2e9     # lineitem and orders once more, per further layout
_WAL_PER_CLUSTER = 2.5e9        # COPY is WAL-logged; max_wal_size 2GB caps what is kept


def disk_needed(scale: float, layouts, cached_files: bool, cached_parts: bool, partitions: int = 2) -> float:
    """Bytes a run needs free: the files not yet cached, the regular tables of each layout,
    and the WAL of each instance (as much as it loads, up to what max_wal_size keeps)."""
    need = _SINGLE_PER_SF * scale + (0 if cached_files else _FILES_PER_SF * scale)
    others = [la for la in layouts if la != "single"]
    if others and not cached_parts:
        need += _PARTS_PER_SF * scale
    need += _PARTITIONED_PER_SF * scale * len(others)
    main_loads = (_SINGLE_PER_SF + (_PARTITIONED_PER_SF if "partitioned" in layouts else 0)) * scale
    need += min(_WAL_PER_CLUSTER, main_loads)
    if "scaleout" in layouts:
        need += partitions * min(_WAL_PER_CLUSTER, _PARTITIONED_PER_SF * scale / partitions)
    return need + 0.5e9


class FileFdwTpch:
    name = "file-fdw-tpch"
    title = "TPC-H on regular tables vs file_fdw over the same files, single node vs partitioned"
    seeds = ("002",)
    required_tools = ("initdb", "postgres")
    primary_metric = "duration_s"
    higher_is_better = False
    dimensions = {
        "queries": Dimension("queries", "TPC-H queries with the specification's validation parameters "
                             "(1-22, q1-q22, or all)", parse=parse_query),
        "storage": Dimension("storage", "regular: tables loaded with COPY; foreign: file_fdw over the .tbl files",
                             STORAGES),
        "layout": Dimension("layout", "single: one node, one core per query; partitioned: lineitem and orders in "
                            "N partitions, parallel query; scaleout: N instances behind postgres_fdw partitions",
                            LAYOUTS),
        "pg": PG,
    }
    parameters = {
        "scale": Parameter("scale", "TPC-H scale factor (1 = 1 GB of files; 0.01 to 300)", parse_scale),
        "partitions": Parameter("partitions", "partitions of lineitem and orders, and instances of the scale-out "
                                f"layout (default: cores, here {CORES})", parse_partitions, CORES),
        "timeout": Parameter("timeout", "statement timeout of one query, seconds", parse_timeout, 3600),
    }
    presets = {
        "quick": Preset("quick", "SF 0.05, the seed's eight queries, 3 rounds (demo, tests)", 3, {"scale": 0.05}),
        "standard": Preset("standard", "SF 1, all 22 queries, 3 rounds", 3, {"scale": 1.0}, {"queries": ("all",)}),
        "paper": Preset("paper", "the seed: SF 10, its eight queries, 3 runs (about 65 GB of disk)", 3,
                        {"scale": 10.0}),
    }
    default_dims = {"queries": tpch.SEED_QUERIES, "storage": STORAGES, "layout": LAYOUTS, "pg": ("15",)}

    # -- the matrix -------------------------------------------------------------------------
    def cases(self, options: StudyOptions) -> list[Case]:
        dims = {**options.dims, "queries": expand_queries(options.dims["queries"])}
        return cross(self.name, self.dimensions, dims)

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> None:
        opts, p = env.options, env.options.params
        scale, n = float(p["scale"]), int(p["partitions"])
        layouts = [la for la in LAYOUTS if la in opts.dims["layout"]]
        queries = expand_queries(opts.dims["queries"])
        ws = env.servers.workspace
        files = TpchFiles(ws.root / "data" / "tpch", scale)
        need_parts = any(la != "single" for la in layouts)
        need, free = self._check_disk(ws, files, layouts, n, scale)
        env.log(f"TPC-H SF {scale_text(scale)}, layouts {','.join(layouts)}: needs about {need / 1e9:.1f} GB of "
                f"disk, {free / 1e9:.0f} GB free")
        fp: dict = {"scale": scale, "partitions": n, "layouts": layouts, "queries": list(queries), "cores": CORES}

        # 1. The files: generated once per scale (and per number of parts), then reused.
        (ws.root / "data").mkdir(parents=True, exist_ok=True)
        os.chmod(ws.root / "data", 0o755)
        tool = tpchgen_path()
        fp["tpchgen"] = tpchgen_version(tool)
        fp["generate"] = files.ensure(tool, env.log)
        if need_parts:
            fp["generate_parts"] = files.ensure_parts(tool, n, env.log)
        fp["data_dir"] = str(files.dir)
        fp["files"] = files.sizes()
        if need_parts:
            fp["part_files"] = files.part_sizes(n)
        bounds = files.partition_bounds(n) if need_parts else []

        # 2. The servers.
        t0 = time.monotonic()
        main = env.servers.cluster("tpch", settings=CLUSTER_SETTINGS)
        workers = ([env.servers.cluster(f"worker{k}", settings=CLUSTER_SETTINGS) for k in range(1, n + 1)]
                   if "scaleout" in layouts else [])
        for c in (main, *workers):
            c.create_database(DB)
        env.log(f"{1 + len(workers)} server(s) up in {time.monotonic() - t0:.1f} s")

        # 3. Tables: regular and foreign, per layout; then load and analyse on every core.
        self._create_objects(main, workers, files, layouts, n, bounds)
        load, analyze = self._load_tasks(main, workers, files, layouts, n)
        t0 = time.monotonic()
        loaded = run_tasks(load, CORES)
        load_bytes = sum(t.bytes for t in load)
        fp["load"] = {"seconds": loaded.wall_s, "bytes": load_bytes,
                      "mb_per_s": round(load_bytes / MB / max(loaded.wall_s, 1e-9), 1),
                      "connections": CORES, "by_layout": loaded.groups}
        env.log(f"loaded {load_bytes / MB:,.0f} MB with COPY in {loaded.wall_s:.1f} s "
                f"({fp['load']['mb_per_s']:,.0f} MB/s on {CORES} connections)")
        analysed = run_tasks(analyze, CORES)
        fp["analyze"] = {"seconds": analysed.wall_s, "by_layout": analysed.groups}
        env.log(f"analysed regular and foreign tables in {analysed.wall_s:.1f} s")
        fp["load_and_analyze_s"] = round(time.monotonic() - t0, 3)

        # 4. A connection per layout and storage, with the layout's settings.
        conns = {}
        for layout in layouts:
            for storage in STORAGES:
                conns[(layout, storage)] = self._connect(main, layout, storage, p["timeout"])
        env.state.update(conns=conns, main=main, files=files, sizes=files.sizes(), scale=scale, partitions=n, timeout=p["timeout"])
        fp["settings"] = {"cluster": CLUSTER_SETTINGS, "layouts": {la: layout_settings(la) for la in layouts},
                          "search_path": {f"{la}/{st}": search_path(la, st) for la in layouts for st in STORAGES}}
        if workers:
            fp["settings"]["postgres_fdw"] = {"async_capable": "true", "use_remote_estimate": "true",
                                              "fetch_size": str(FETCH_SIZE),
                                              "transport": "TCP 127.0.0.1, scram-sha-256"}

        # 5. Plans, then the warm-up run of every case, whose rows are checked.
        plans = self._plans(conns, queries, layouts, scale)
        env.state["plans"] = plans
        t0 = time.monotonic()
        fp["answers"], fp["duckdb"] = self._warm_up_and_check(env, conns, files, queries, layouts, scale)
        fp["warmup_and_check_s"] = round(time.monotonic() - t0, 3)
        env.log(f"warm-up run and answer checks of {len(queries) * len(layouts) * 2} cases in "
                f"{fp['warmup_and_check_s']:.1f} s: every answer agrees"
                + (f" (and with DuckDB {fp['duckdb']['version']})" if fp["duckdb"].get("checked") else ""))
        major = str(env.bins.major)
        env.fingerprint[f"file_fdw_tpch_pg{major}"] = fp
        env.fingerprint[f"file_fdw_tpch_pg{major}_plans"] = {
            f"{q}:{st}:{la}": {"shape": v["shape"], "workers": v["workers"], "text": v["text"]}
            for (q, la, st), v in plans.items()}

    @staticmethod
    def _check_disk(ws, files: TpchFiles, layouts, n: int, scale: float) -> tuple[float, float]:
        need = disk_needed(scale, layouts, files.complete(), files.complete(n), n)
        free = ws.free_bytes()
        if need > free:
            raise UserError(f"--scale: TPC-H SF {scale_text(scale)} with layouts {','.join(layouts)} needs about "
                            f"{need / 1e9:.0f} GB free in the workspace ({ws.root}), {free / 1e9:.0f} GB are; "
                            "free some space, use --workspace elsewhere, a smaller --scale or fewer --layout")
        return need, free

    @staticmethod
    def _create_objects(main, workers, files: TpchFiles, layouts, n: int, bounds) -> None:
        def foreign_table(name: str, table: str, path, partition_of: str | None = None, bound: str = "") -> str:
            head = (f"CREATE FOREIGN TABLE {name} PARTITION OF {partition_of} {bound}" if partition_of else
                    f"CREATE FOREIGN TABLE {name} ({tpch.column_list(table, with_dummy=True)})")
            return (f"{head} SERVER tpch_files OPTIONS (filename {sql.quote(str(path))}, format 'text', "
                    "delimiter '|')")

        def bound(k: int) -> str:
            low, high = bounds[k]
            return (f"FOR VALUES FROM ({'MINVALUE' if low is None else low}) "
                    f"TO ({'MAXVALUE' if high is None else high})")

        stmts = ["CREATE EXTENSION IF NOT EXISTS file_fdw",
                 "CREATE SERVER tpch_files FOREIGN DATA WRAPPER file_fdw"]
        for layout in ("single", *(la for la in layouts if la != "single")):
            for storage in STORAGES:
                stmts.append(f"CREATE SCHEMA {schema(layout, storage)}")
        # The single layout: every table, both storages (its small tables serve the others too).
        for table in single_tables(layouts):
            stmts.append(f"CREATE TABLE single_regular.{table} ({tpch.column_list(table)})")
            stmts.append(foreign_table(f"single_foreign.{table}", table, files.file(table)))
        for table in tpch.PARTITIONED:
            key = tpch.PARTITION_KEY[table]
            if "partitioned" in layouts:
                stmts.append(f"CREATE TABLE partitioned_regular.{table} ({tpch.column_list(table)}) "
                             f"PARTITION BY RANGE ({key})")
                stmts.append(f"CREATE TABLE partitioned_foreign.{table} "
                             f"({tpch.column_list(table, with_dummy=True)}) PARTITION BY RANGE ({key})")
                for k in range(n):
                    stmts.append(f"CREATE TABLE partitioned_regular.{table}_{k + 1} "
                                 f"PARTITION OF partitioned_regular.{table} {bound(k)}")
                    stmts.append(foreign_table(f"partitioned_foreign.{table}_{k + 1}", table,
                                               files.part_file(table, n, k + 1), f"partitioned_foreign.{table}",
                                               bound(k)))
            if "scaleout" in layouts:
                for storage in STORAGES:
                    stmts.append(f"CREATE TABLE scaleout_{storage}.{table} ({tpch.column_list(table)}) "
                                 f"PARTITION BY RANGE ({key})")
        if "scaleout" in layouts:
            stmts.append("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
            for k, w in enumerate(workers):
                srv = f"worker{k + 1}"
                stmts += [
                    f"CREATE SERVER {srv} FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', "
                    f"port '{w.port}', dbname '{DB}', async_capable 'true', use_remote_estimate 'true', "
                    f"fetch_size '{FETCH_SIZE}')",
                    f"CREATE USER MAPPING FOR CURRENT_USER SERVER {srv} OPTIONS (user 'pgpathbench', "
                    f"password {sql.quote(w.password)})"]
                for table in tpch.PARTITIONED:
                    for storage in STORAGES:
                        stmts.append(f"CREATE FOREIGN TABLE scaleout_{storage}.{table}_{k + 1} PARTITION OF "
                                     f"scaleout_{storage}.{table} {bound(k)} SERVER {srv} OPTIONS "
                                     f"(schema_name 'worker_{storage}', table_name '{table}')")
        main.execute(DB, *stmts)
        # Each instance of the scale-out layout: its part, as a regular table and over the file.
        for k, w in enumerate(workers):
            ws = ["CREATE EXTENSION IF NOT EXISTS file_fdw",
                  "CREATE SERVER tpch_files FOREIGN DATA WRAPPER file_fdw",
                  "CREATE SCHEMA worker_regular", "CREATE SCHEMA worker_foreign"]
            for table in tpch.PARTITIONED:
                ws.append(f"CREATE TABLE worker_regular.{table} ({tpch.column_list(table)})")
                ws.append(foreign_table(f"worker_foreign.{table}", table, files.part_file(table, n, k + 1)))
            w.execute(DB, *ws)

    @staticmethod
    def _load_tasks(main, workers, files: TpchFiles, layouts, n: int) -> tuple[list[Task], list[Task]]:
        """COPY slices (large files cut so that every core has work), then every ANALYZE."""
        ci = main.conninfo(DB)
        total = sum(files.sizes().values())
        slice_bytes = max(16 << 20, total // (2 * CORES))
        load: list[Task] = []
        analyze: list[Task] = []
        sizes = files.sizes()
        for table in single_tables(layouts):
            load += copy_tasks("single", ci, f"single_regular.{table}", files.file(table), slice_bytes)
            analyze.append(Task("single regular", ci, sql=f"ANALYZE single_regular.{table}",
                                weight=sizes[table] * 0.05))
            analyze.append(Task("single foreign", ci, sql=f"ANALYZE single_foreign.{table}", weight=sizes[table]))
        for table in tpch.PARTITIONED:
            if "partitioned" in layouts:
                for k in range(1, n + 1):
                    load += copy_tasks("partitioned", ci, f"partitioned_regular.{table}_{k}",
                                       files.part_file(table, n, k), slice_bytes)
                # A partitioned table's ANALYZE samples the whole (for the joins above the
                # partitions) and then each partition: file_fdw parses every part twice.
                analyze.append(Task("partitioned regular", ci, sql=f"ANALYZE partitioned_regular.{table}",
                                    weight=sizes[table] * 0.1))
                analyze.append(Task("partitioned foreign", ci, sql=f"ANALYZE partitioned_foreign.{table}",
                                    weight=sizes[table] * 2))
            if "scaleout" in layouts:
                for k, w in enumerate(workers, 1):
                    wci = w.conninfo(DB)
                    load += copy_tasks("scaleout", wci, f"worker_regular.{table}", files.part_file(table, n, k),
                                       slice_bytes)
                    analyze.append(Task("scaleout worker regular", wci, sql=f"ANALYZE worker_regular.{table}",
                                        weight=sizes[table] * 0.05 / n))
                    analyze.append(Task("scaleout worker foreign", wci, sql=f"ANALYZE worker_foreign.{table}",
                                        weight=sizes[table] / n))
                # The coordinator's statistics of its postgres_fdw partitions: PostgreSQL 15 fetches
                # every row to sample them (analyze_sampling is 16+), for the whole and each part.
                for storage in STORAGES:
                    analyze.append(Task(f"scaleout coordinator {storage}", ci,
                                        sql=f"ANALYZE scaleout_{storage}.{table}", weight=sizes[table] * 2))
        return load, analyze

    @staticmethod
    def _connect(cluster, layout: str, storage: str, timeout: int) -> psycopg.Connection:
        conn = cluster.connect(DB)
        conn.execute(f"SET search_path = {search_path(layout, storage)}")
        for k, v in layout_settings(layout).items():
            conn.execute(f"SET {k} = {v}")
        conn.execute(f"SET statement_timeout = '{int(timeout)}s'")
        return conn

    def _plans(self, conns, queries, layouts, scale: float) -> dict:
        plans = {}
        for q in queries:
            text = tpch.query_text(q, scale)
            for layout in layouts:
                for storage in STORAGES:
                    conn = conns[(layout, storage)]
                    doc = conn.execute(f"EXPLAIN (FORMAT JSON) {text}").fetchone()[0]
                    root = (doc[0] if isinstance(doc, list) else doc)["Plan"]
                    lines = [r[0] for r in conn.execute(f"EXPLAIN (COSTS OFF) {text}").fetchall()]
                    plans[(q, layout, storage)] = {"shape": plan_shape(root), "workers": plan_workers(root),
                                                   "text": "\n".join(lines)}
        return plans

    def _warm_up_and_check(self, env: StudyEnv, conns, files: TpchFiles, queries, layouts, scale: float):
        """Every case once (the warm-up), its rows compared with every other side's and DuckDB's."""
        results: dict[tuple, list] = {}
        skipped: dict[tuple, str] = {}
        for q in queries:
            text = tpch.query_text(q, scale)
            for layout in layouts:
                for storage in STORAGES:
                    try:
                        results[(q, layout, storage)] = conns[(layout, storage)].execute(text).fetchall()
                    except psycopg.errors.QueryCanceled:
                        skipped[(q, layout, storage)] = "statement timeout"
        duck: dict = {"checked": False}
        duck_rows: dict = {}
        if scale <= DUCKDB_MAX_SCALE:
            duck_rows, info = duckdb_answers(files, queries, CORES)
            duck = {"checked": True, **info}
        else:
            duck["reason"] = f"scale {scale_text(scale)} > {scale_text(DUCKDB_MAX_SCALE)}: PostgreSQL sides only"
        answers, problems = {}, []
        for q in queries:
            sides = [(la, st) for la in layouts for st in STORAGES if (q, la, st) in results]
            if not sides:
                answers[q] = {"rows": None, "digest": None, "agreeing": [], "duckdb": "not run (timeouts)"}
                continue
            ref_side = sides[0]
            ref = results[(q, *ref_side)]
            digest = answer_digest(ref)
            agreeing = []
            for side in sides:
                rows = results[(q, *side)]
                if answer_digest(rows) == digest:
                    agreeing.append(f"{side[1]}/{side[0]}")
                else:
                    diff = compare_rows(rows, ref, rel_tol=0) or "same values, differently written"
                    problems.append(f"{q} on {side[1]}/{side[0]} differs from {ref_side[1]}/{ref_side[0]}: {diff}")
            verdict = "not checked"
            if q in duck_rows:
                diff = compare_rows(ref, duck_rows[q])
                verdict = "agrees" if diff is None else f"DIFFERS: {diff}"
                if diff is not None:
                    problems.append(f"{q}: PostgreSQL and DuckDB differ: {diff}")
            answers[q] = {"rows": len(ref), "digest": digest, "agreeing": agreeing, "duckdb": verdict,
                          "unchecked": [f"{st}/{la}: {why}" for (qq, la, st), why in skipped.items() if qq == q]}
        if problems:
            raise AnswerMismatch("file-fdw-tpch: wrong answers, the run stops here:\n  " + "\n  ".join(problems))
        env.state["answers"] = {q: a["digest"] for q, a in answers.items()}
        return answers, duck

    # -- one measurement --------------------------------------------------------------------
    def measure(self, env: StudyEnv, case: Case) -> dict:
        st = env.state
        q, storage, layout = case["queries"], case["storage"], case["layout"]
        text = tpch.query_text(q, st["scale"])
        conn = st["conns"].get((layout, storage))
        if conn is None or conn.closed:
            try:
                conn = st["conns"][(layout, storage)] = self._connect(st["main"], layout, storage, st["timeout"])
            except psycopg.Error as e:
                raise CaseError(f"cannot connect: {str(e).strip()}") from None
        try:
            t0 = time.perf_counter()
            cur = conn.execute(text)
            rows = cur.fetchall()
            seconds = time.perf_counter() - t0
        except psycopg.errors.QueryCanceled:
            raise CaseError(f"statement timeout ({st['timeout']} s)") from None
        except psycopg.Error as e:
            raise CaseError(f"{type(e).__name__}: {str(e).strip().splitlines()[0]}") from None
        digest = answer_digest(rows)
        expected = st["answers"].get(q)
        if expected is not None and digest != expected:
            raise CaseError(f"wrong answer: {len(rows)} rows, digest {digest}, checked answer {expected}")
        metrics = {"duration_s": round(seconds, 6), "rows": len(rows), "answer": digest,
                   "plan_workers": st["plans"][(q, layout, storage)]["workers"]}
        if storage == "foreign" and q in tpch.SCAN_QUERIES:
            nbytes = st["sizes"][tpch.SCAN_QUERIES[q]]
            cores = scan_cores(layout, st["plans"][(q, layout, storage)]["workers"], st["partitions"])
            rate, per_core = parse_rate(nbytes, seconds, cores)
            metrics.update(bytes_scanned=nbytes, scan_cores=cores, mb_per_s=round(rate, 2),
                           mb_per_s_per_core=round(per_core, 2))
        return metrics

    # -- the report -------------------------------------------------------------------------
    def report(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Table]:
        series, failed = _series(self.name, measurements)
        if not series and not failed:
            return []
        env = _setup(run)
        tables = [self._seed_table(series), self._slowdown_table(series), self._parse_table(series, env),
                  self._plans_table(run, series), self._answers_table(env), self._data_table(env)]
        if failed:
            tables.append(Table("Failed measurements", ["Query", "Storage", "Layout", "PG", "n", "Last error"],
                                [[k[0].upper(), k[1], k[2], k[3], len(v), v[-1]] for k, v in sorted(failed.items())],
                                align_left=4))
        return [t for t in tables if t is not None]

    @staticmethod
    def _seed_table(series) -> Table:
        layouts = [la for la in LAYOUTS if any(k[2] == la for k in series)]
        pgs = sorted({k[3] for k in series}, key=int)
        rows = []
        for pg in pgs:
            for q in _queries_in(series):
                row = [q.upper()] + ([pg] if len(pgs) > 1 else [])
                for la in layouts:
                    for st in STORAGES:
                        v = series.get((q, st, la, pg))
                        row.append(summarise(list(v.values())).median if v else None)
                for system in ("postgresql", "citusdb"):
                    for st in STORAGES:
                        row.append(FILE_FDW_TPCH_SECONDS.get((q, system, st)))
                rows.append(row)
        cols = ["Query"] + (["PG"] if len(pgs) > 1 else [])
        cols += [f"{la} {st}" for la in layouts for st in STORAGES]
        cols += ["Published PostgreSQL regular", "Published PostgreSQL foreign", "Published CitusDB regular",
                 "Published CitusDB foreign"]
        return Table("TPC-H seconds per query (median of the rounds): regular vs foreign, per layout", cols, rows,
                     [f"Published: {FILE_FDW_TPCH_SOURCE}. Compare slowdowns, not seconds, across machines and "
                      "scales.",
                      "single: one core per query (the seed's PostgreSQL); partitioned: lineitem and orders in N "
                      "partitions with parallel query; scaleout: N instances behind postgres_fdw (the seed's "
                      "CitusDB: one node, 4 blocks)."], align_left=2 if len(pgs) > 1 else 1)

    @staticmethod
    def _slowdown_table(series) -> Table:
        rows = []
        found: dict[tuple, float] = {}
        for pg in sorted({k[3] for k in series}, key=int):
            for la in LAYOUTS:
                for q in _queries_in(series):
                    reg, fdw = series.get((q, "regular", la, pg)), series.get((q, "foreign", la, pg))
                    if not reg or not fdw:
                        continue
                    r = ratio_summary(fdw, reg)
                    if r is None:
                        continue
                    rs, fs = summarise(list(reg.values())), summarise(list(fdw.values()))
                    found[(q, la, pg)] = r.median
                    rows.append([q.upper(), la, pg, rs.median, rs.ci_text, fs.median, fs.ci_text, r.median, r.ci_text,
                                 r.verdict(1.0), file_fdw_tpch_slowdown(q, LAYOUT_SYSTEM[la]),
                                 LAYOUT_SYSTEM[la].replace("postgresql", "PostgreSQL").replace("citusdb", "CitusDB")])
        notes = ["Slowdown: seconds on file_fdw / seconds on regular tables, paired by round (measured in the same "
                 "round); its median and the distribution-free 95% interval ((NN%): too few rounds for 95%).",
                 "Published: the seed's foreign/regular means, PostgreSQL beside single, CitusDB beside the others."]
        for (pg, la) in sorted({(k[2], k[1]) for k in found}):
            q1, q6 = found.get(("q1", la, pg)), found.get(("q6", la, pg))
            if q1 and q6:
                notes.append(f"PG {pg}, {la}: Q6 slowdown {q6:.2f}x {'above' if q6 > q1 else 'NOT above'} Q1 "
                             f"slowdown {q1:.2f}x (seed: Q6 11.8x, Q1 1.7x: parsing dominates a light query, "
                             "is dwarfed by Q1's aggregates).")
        return Table("Slowdown through file_fdw: foreign / regular", [
            "Query", "Layout", "PG", "Regular s", "95% CI", "Foreign s", "95% CI", "Slowdown", "95% CI",
            "Differs from 1", "Published slowdown", "Published system"], rows, notes, align_left=3)

    @staticmethod
    def _parse_table(series, env: dict) -> Table | None:
        rows = []
        for (q, st, la, pg), values in sorted(series.items()):
            if st != "foreign" or q not in tpch.SCAN_QUERIES:
                continue
            fp = env.get(pg) or {}
            nbytes = (fp.get("files") or {}).get(tpch.SCAN_QUERIES[q])
            if not nbytes:
                continue
            cores = scan_cores(la, ((env.get(f"{pg}_plans") or {}).get(f"{q}:foreign:{la}") or {}).get("workers", 0),
                               fp.get("partitions", 1))
            s = summarise(list(values.values()))
            rate, per_core = parse_rate(nbytes, s.median, cores)
            reg = series.get((q, "regular", la, pg))
            extra = None
            if reg:
                deltas = [values[r] - reg[r] for r in sorted(values.keys() & reg.keys()) if values[r] > reg[r]]
                if deltas:
                    extra = parse_rate(nbytes, summarise(deltas).median, cores)[1]
            rows.append([q.upper(), la, pg, nbytes / MB, s.median, cores, rate, per_core, extra,
                         FILE_FDW_TPCH_PARSE_MB_S_PER_CORE])
        if not rows:
            return None
        return Table("Parse rate of file_fdw: MB of lineitem's file per second", [
            "Query", "Layout", "PG", "File MB", "Foreign s", "Cores", "MB/s", "MB/s per core",
            "Parse only, MB/s per core", "Published MB/s per core"], rows,
            ["MB/s: the file's bytes over the query's median time on file_fdw (the seed's arithmetic: lineitem "
             "over the time of Q1 or Q6). Cores: processes that parse (1 + the plan's parallel workers; the "
             "instances of the scale-out layout). Parse only: the bytes over the extra time file_fdw takes "
             "(foreign - regular, paired by round).", "Published: the seed's 7.2 GB lineitem in a little over "
             "200 s on one core."], align_left=3)

    @staticmethod
    def _plans_table(run: dict, series) -> Table | None:
        env = _setup(run)
        rows = []
        differ = []
        for pg in sorted({k[3] for k in series}, key=int):
            plans = env.get(f"{pg}_plans") or {}
            for q in _queries_in(series):
                for la in LAYOUTS:
                    reg, fdw = plans.get(f"{q}:regular:{la}"), plans.get(f"{q}:foreign:{la}")
                    if not reg or not fdw:
                        continue
                    same = reg["shape"] == fdw["shape"]
                    if not same:
                        differ.append(f"{q.upper()} {la}")
                    rows.append([q.upper(), la, pg, reg["shape"], reg["workers"], fdw["shape"], fdw["workers"],
                                 "same" if same else "DIFFERS"])
        if not rows:
            return None
        return Table("Plans: join tree of each query on each side", [
            "Query", "Layout", "PG", "Regular plan", "Workers", "Foreign plan", "Workers", "Shape"], rows,
            ["Join methods and order over base tables (a table, its partitions, or file_fdw over its file read the "
             "same); sorts, hashes, gathers and aggregates left out; [InitPlan/SubPlan] in brackets; per-partition: "
             "a partitionwise join; remote(...): pushed down by postgres_fdw. Workers: parallel workers planned.",
             ("Plan shape differs between regular and foreign: " + ", ".join(differ) + ".") if differ else
             "Every query has the same plan shape on both storages (file_fdw tables are ANALYZEd too; the seed's "
             "9.1 could not, and chose another plan for Q12).",
             "Full EXPLAIN texts: `pgpathbench report RUN --format json`, run.environment.sessions[].file_fdw_tpch_"
             "pgN_plans."], align_left=3)

    @staticmethod
    def _answers_table(env: dict) -> Table | None:
        rows, notes = [], []
        for key, fp in sorted(env.items()):
            if key.endswith("_plans") or not isinstance(fp, dict) or "answers" not in fp:
                continue
            sides = 2 * len(fp.get("layouts", []))
            for q, a in fp["answers"].items():
                rows.append([q.upper(), key, a.get("rows"), f"{len(a.get('agreeing', []))} of {sides}",
                             a.get("duckdb"), a.get("digest")])
            duck = fp.get("duckdb") or {}
            notes.append(f"PG {key}: DuckDB {duck.get('version')} over the same files in {duck.get('seconds')} s"
                         if duck.get("checked") else f"PG {key}: no DuckDB check ({duck.get('reason')})")
        if not rows:
            return None
        return Table("Answer checks (the warm-up run of every case)", [
            "Query", "PG", "Rows", "Sides agreeing", "DuckDB", "Digest"], rows,
            ["Sides: regular and foreign on every layout, compared exactly (sorted rows, PostgreSQL's numerics are "
             "exact); DuckDB runs the specification's text (Q2, Q17, Q20, Q21 with their correlated subqueries, "
             "which PostgreSQL runs decorrelated), numbers within 1e-6 relative. Any difference fails the run; every "
             "measurement re-checks its digest.", *notes], align_left=2)

    @staticmethod
    def _data_table(env: dict) -> Table | None:
        rows = []
        for pg, fp in sorted(env.items()):
            if pg.endswith("_plans") or not isinstance(fp, dict) or "files" not in fp:
                continue
            gen = fp.get("generate") or {}
            rows.append([pg, "scale factor", scale_text(fp["scale"]), ""])
            rows.append([pg, "files", f"{sum(fp['files'].values()) / MB:,.0f} MB",
                         ", ".join(f"{t} {b / MB:,.1f}" for t, b in fp["files"].items())])
            rows.append([pg, "generation", f"{gen.get('seconds')} s, {gen.get('mb_per_s')} MB/s",
                         "cached from an earlier run" if gen.get("cached") else gen.get("command", "")])
            parts = fp.get("generate_parts")
            if parts:
                rows.append([pg, f"generation of {fp['partitions']} parts",
                             f"{parts.get('seconds')} s, {parts.get('mb_per_s')} MB/s",
                             "cached from an earlier run" if parts.get("cached") else parts.get("command", "")])
            load = fp.get("load") or {}
            rows.append([pg, "load (COPY)", f"{load.get('seconds')} s, {load.get('mb_per_s')} MB/s",
                         f"{load.get('bytes', 0) / MB:,.0f} MB on {load.get('connections')} connections; " + "; ".join(
                             f"{g}: {v['bytes'] / MB:,.0f} MB" for g, v in (load.get("by_layout") or {}).items())])
            an = fp.get("analyze") or {}
            rows.append([pg, "ANALYZE", f"{an.get('seconds')} s", "; ".join(
                f"{g} {v['busy_s']:.1f} s" for g, v in (an.get("by_layout") or {}).items())])
            rows.append([pg, "warm-up and answer checks", f"{fp.get('warmup_and_check_s')} s", ""])
            s = fp.get("settings") or {}
            rows.append([pg, "settings", ", ".join(f"{k}={v}" for k, v in (s.get("cluster") or {}).items()), ""])
            for la, v in (s.get("layouts") or {}).items():
                rows.append([pg, f"settings {la}", ", ".join(f"{k}={x}" for k, x in v.items()),
                             (s.get("search_path") or {}).get(f"{la}/foreign", "")])
            if s.get("postgres_fdw"):
                rows.append([pg, "postgres_fdw", ", ".join(f"{k}={v}" for k, v in s["postgres_fdw"].items()), ""])
        if not rows:
            return None
        return Table("Data, load and settings", ["Set-up", "What", "Figure", "Detail"], rows,
                     ["Load: COPY FROM STDIN of each file (large files in slices at line boundaries, all loaded at "
                      "once on one connection per core); MB/s over the wall time. bench/tpch_load.py compares it "
                      "with one plain COPY of lineitem."], align_left=2)

    # -- charts -----------------------------------------------------------------------------
    def plots(self, run: dict, measurements: list[dict], probes: list[dict]):
        from ..report import Plot, Point
        series, _ = _series(self.name, measurements)
        if not series:
            return []
        seconds: dict[str, list] = defaultdict(list)
        slowdown: dict[str, list] = defaultdict(list)
        multi = len({k[3] for k in series}) > 1
        for (q, st, la, pg), values in sorted(series.items(), key=lambda kv: int(kv[0][0][1:])):
            s = summarise(list(values.values()))
            name = f"{la} {st}" + (f" (PG {pg})" if multi else "")
            seconds[name].append(Point(q.upper(), s.median, s.ci_low, s.ci_high))
            if st == "foreign" and (q, "regular", la, pg) in series:
                r = ratio_summary(values, series[(q, "regular", la, pg)])
                if r is not None:
                    slowdown[la + (f" (PG {pg})" if multi else "")].append(Point(q.upper(), r.median, r.ci_low,
                                                                                 r.ci_high))
        for system, label in (("postgresql", "published PostgreSQL"), ("citusdb", "published CitusDB")):
            pts = [Point(q.upper(), file_fdw_tpch_slowdown(q, system)) for q in _queries_in(series)
                   if file_fdw_tpch_slowdown(q, system)]
            if pts:
                slowdown[label] = pts
        return [
            Plot("Seconds per TPC-H query", "Query", "Seconds (median)", "bar", dict(seconds), log_y=True,
                 notes=["Error bars: 95% CI of the median (fewer than 6 rounds cover less)."]),
            Plot("Slowdown through file_fdw (foreign / regular)", "Query", "Slowdown, x", "bar", dict(slowdown),
                 ref_y=1.0, notes=["Paired by round; error bars: the interval of the median ratio."]),
        ]


class AnswerMismatch(RuntimeError):
    """Two sides (or PostgreSQL and DuckDB) returned different rows for a query."""


def scan_cores(layout: str, workers: int, partitions: int) -> int:
    """Processes that parse during a scan: the instances of the scale-out layout; else the
    leader and its parallel workers (a file_fdw partition is read by one process, so no more
    than the partitions)."""
    if layout == "scaleout":
        return partitions
    cores = 1 + workers
    return min(cores, partitions) if layout == "partitioned" else cores


def _series(study: str, measurements: list[dict]):
    series: dict[tuple, dict[int, float]] = defaultdict(dict)
    failed: dict[tuple, list[str]] = defaultdict(list)
    for m in measurements:
        if m["study"] != study:
            continue
        d = m["dims"]
        key = (d["queries"], d["storage"], d["layout"], d.get("pg", "15"))
        if not m["ok"]:
            failed[key].append(m["error"])
        elif m["metrics"].get("duration_s") is not None:
            series[key][m["round"]] = float(m["metrics"]["duration_s"])
    return dict(series), dict(failed)


def _queries_in(series) -> list[str]:
    return sorted({k[0] for k in series}, key=lambda q: int(q[1:]))


def _setup(run: dict) -> dict:
    """The study's set-up from the latest session that recorded one: {major: fp, 'major_plans': plans}."""
    out: dict = {}
    for s in (run.get("environment") or {}).get("sessions") or []:
        for k, v in s.items():
            if k.startswith("file_fdw_tpch_pg"):
                out[k[len("file_fdw_tpch_pg"):]] = v
    return out
