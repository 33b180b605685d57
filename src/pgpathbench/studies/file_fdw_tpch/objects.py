"""file-fdw-tpch's objects on its servers: the schemas, tables and file_fdw tables of every layout,
the scale-out layout's postgres_fdw partitions, and their load (COPY FROM STDIN), VACUUM and
ANALYZE.

Only what a run's storages need is made: with the regular storage alone (the tpch role on a user
server, which cannot read our files) neither file_fdw nor its tables, so nothing here needs a
superuser there.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from psycopg import sql

from ...datasets.tpch.files import MB, TpchFiles
from ...datasets.tpch.load import Task, copy_tasks, run_tasks
from ...datasets.tpch.schema import PARTITION_KEY, PARTITIONED, column_list
from ...servers.cluster import SUPERUSER, Cluster
from ...servers.fdw import create_server
from .spec import CORES, DB, POSTGRES_FDW_OPTIONS, STORAGES, schema, single_tables

if TYPE_CHECKING:
    from .study import Shape


def worker_servers(n: int) -> list[str]:
    """The coordinator's foreign servers, one per scale-out instance."""
    return [f"worker{k}" for k in range(1, n + 1)]


# The regular tables are read-only once loaded: one VACUUM after the load (vacuum_once) sets their
# hint bits and visibility map, and autovacuum stays off them, so that no worker scans them during a
# measurement (at SF 10 the insert-triggered autovacuum of lineitem ran for over 7 minutes, into the
# warm-up).
LOADED_ONCE = "WITH (autovacuum_enabled = off)"


def vacuum_once(table: str) -> str:
    """The one VACUUM of a regular table after its load, with its ANALYZE. FREEZE makes it
    aggressive: it waits for a page another process has pinned (the checkpointer writing it)
    where a plain VACUUM skips that page and leaves it not all-visible."""
    return f"VACUUM (FREEZE, ANALYZE) {table}"


FILE_SERVER = ["CREATE EXTENSION IF NOT EXISTS file_fdw", "CREATE SERVER tpch_files FOREIGN DATA WRAPPER file_fdw"]


def file_table(name: str, table: str, path, partition_of: str | None = None, bound: str = "") -> str:
    """A file_fdw table over a .tbl file: with the extra trailing column, or a partition of one."""
    head = (f"CREATE FOREIGN TABLE {name} PARTITION OF {partition_of} {bound}" if partition_of else
            f"CREATE FOREIGN TABLE {name} ({column_list(table, with_dummy=True)})")
    return f"{head} SERVER tpch_files OPTIONS (filename {sql.quote(str(path))}, format 'text', delimiter '|')"


def range_bound(bounds, k: int) -> str:
    low, high = bounds[k]
    return f"FOR VALUES FROM ({'MINVALUE' if low is None else low}) TO ({'MAXVALUE' if high is None else high})"


def main_ddl(files: TpchFiles, shape: Shape, bounds) -> list[str]:
    """The coordinator's schemas: the single layout's tables (its small ones serve the others
    too), the partitioned layout's partitions, the scale-out layout's partitioned parents."""
    layouts = ("single", *(la for la in shape.layouts if la != "single"))
    foreign = "foreign" in shape.storages
    stmts = [*(FILE_SERVER if foreign else ()),
             *(f"CREATE SCHEMA {schema(la, st)}" for la in layouts for st in shape.storages)]
    for table in single_tables(shape.layouts):
        stmts.append(f"CREATE TABLE single_regular.{table} ({column_list(table)}) {LOADED_ONCE}")
        if foreign:
            stmts.append(file_table(f"single_foreign.{table}", table, files.file(table)))
    for table in PARTITIONED:
        by = f"PARTITION BY RANGE ({PARTITION_KEY[table]})"
        if "partitioned" in shape.layouts:
            stmts.append(f"CREATE TABLE partitioned_regular.{table} ({column_list(table)}) {by}")
            stmts.append(f"CREATE TABLE partitioned_foreign.{table} ({column_list(table, with_dummy=True)}) {by}")
            for k in range(shape.partitions):
                stmts.append(f"CREATE TABLE partitioned_regular.{table}_{k + 1} "
                             f"PARTITION OF partitioned_regular.{table} {range_bound(bounds, k)} {LOADED_ONCE}")
                stmts.append(file_table(f"partitioned_foreign.{table}_{k + 1}", table,
                                        files.part_file(table, shape.partitions, k + 1),
                                        f"partitioned_foreign.{table}", range_bound(bounds, k)))
        if "scaleout" in shape.layouts:
            stmts += [f"CREATE TABLE scaleout_{st}.{table} ({column_list(table)}) {by}" for st in STORAGES]
    return stmts


def create_objects(main: Cluster, workers: list[Cluster], files: TpchFiles, shape: Shape) -> None:
    """Tables, file_fdw tables and postgres_fdw partitions of every layout, on every instance.
    Each scale-out instance holds its part as a regular table and over its part file; the
    coordinator reaches it as partition k of the scale-out layout's lineitem and orders."""
    bounds = files.partition_bounds(shape.partitions) if shape.needs_parts else []
    with main.connect(DB) as conn:
        for stmt in main_ddl(files, shape, bounds):
            conn.execute(stmt)
        for k, (w, server) in enumerate(zip(workers, worker_servers(len(workers)))):
            create_server(conn, server, w.tcp_host, w.port, DB, SUPERUSER, w.password, POSTGRES_FDW_OPTIONS)
            for table in PARTITIONED:
                for st in STORAGES:
                    conn.execute(f"CREATE FOREIGN TABLE scaleout_{st}.{table}_{k + 1} PARTITION OF "
                                 f"scaleout_{st}.{table} {range_bound(bounds, k)} SERVER {server} OPTIONS "
                                 f"(schema_name 'worker_{st}', table_name '{table}')")
    for k, w in enumerate(workers, 1):
        stmts = [*FILE_SERVER, "CREATE SCHEMA worker_regular", "CREATE SCHEMA worker_foreign"]
        for table in PARTITIONED:
            stmts.append(f"CREATE TABLE worker_regular.{table} ({column_list(table)}) {LOADED_ONCE}")
            stmts.append(file_table(f"worker_foreign.{table}", table, files.part_file(table, shape.partitions, k)))
        w.execute(DB, *stmts)


# -- load and analyse -----------------------------------------------------------------------------
def load_tasks(main: Cluster, workers: list[Cluster], files: TpchFiles, shape: Shape) -> tuple[list[Task], list[Task]]:
    """COPY slices (large files cut so that every core has work), then every ANALYZE: a regular
    table's with its one VACUUM (vacuum_once)."""
    ci, n, sizes = main.conninfo(DB), shape.partitions, files.sizes()
    # A user server's password is held in memory, never in a conninfo (servers/user.py).
    secret = None if main.managed else main.password
    slice_bytes = max(16 << 20, sum(sizes.values()) // (2 * CORES))
    load: list[Task] = []
    analyze: list[Task] = []
    for table in single_tables(shape.layouts):
        load += copy_tasks("single", ci, f"single_regular.{table}", files.file(table), slice_bytes, secret)
        analyze.append(Task("single regular", ci, sql=vacuum_once(f"single_regular.{table}"),
                            weight=sizes[table] * 0.3,
                            password=secret))
        if "foreign" in shape.storages:
            analyze.append(Task("single foreign", ci, sql=f"ANALYZE single_foreign.{table}", weight=sizes[table]))
    for table in PARTITIONED:
        if "partitioned" in shape.layouts:
            for k in range(1, n + 1):
                load += copy_tasks("partitioned", ci, f"partitioned_regular.{table}_{k}",
                                   files.part_file(table, n, k), slice_bytes)
            # A partitioned table's ANALYZE samples the whole (for the joins above the
            # partitions) and then each partition: file_fdw parses every part twice.
            analyze.append(Task("partitioned regular", ci, sql=vacuum_once(f"partitioned_regular.{table}"),
                                weight=sizes[table] * 0.35))
            analyze.append(Task("partitioned foreign", ci, sql=f"ANALYZE partitioned_foreign.{table}",
                                weight=sizes[table] * 2))
        for k, w in enumerate(workers, 1):
            wci = w.conninfo(DB)
            load += copy_tasks("scaleout", wci, f"worker_regular.{table}", files.part_file(table, n, k), slice_bytes)
            analyze.append(Task("scaleout worker regular", wci, sql=vacuum_once(f"worker_regular.{table}"),
                                weight=sizes[table] * 0.3 / n))
            analyze.append(Task("scaleout worker foreign", wci, sql=f"ANALYZE worker_foreign.{table}",
                                weight=sizes[table] / n))
        # The coordinator's statistics of its postgres_fdw partitions: PostgreSQL 15 fetches
        # every row to sample them (analyze_sampling is 16+), for the whole and each part.
        analyze += [Task(f"scaleout coordinator {st}", ci, sql=f"ANALYZE scaleout_{st}.{table}",
                         weight=sizes[table] * 2) for st in STORAGES if workers]
    return load, analyze


def load_and_analyze(main: Cluster, workers: list[Cluster], files: TpchFiles, shape: Shape, log) -> dict:
    """Every load task, then every ANALYZE, on one connection per core; their figures."""
    load, analyze = load_tasks(main, workers, files, shape)
    t0 = time.monotonic()
    loaded = run_tasks(load, CORES)
    load_bytes = sum(t.bytes for t in load)
    facts: dict = {"load": {"seconds": loaded.wall_s, "bytes": load_bytes,
                            "mb_per_s": round(load_bytes / MB / max(loaded.wall_s, 1e-9), 1),
                            "connections": CORES, "by_layout": loaded.groups}}
    log(f"loaded {load_bytes / MB:,.0f} MB with COPY in {loaded.wall_s:.1f} s "
        f"({facts['load']['mb_per_s']:,.0f} MB/s on {CORES} connections)")
    analysed = run_tasks(analyze, CORES)
    facts["analyze"] = {"seconds": analysed.wall_s, "by_layout": analysed.groups}
    log(f"analysed {' and '.join(shape.storages)} tables in {analysed.wall_s:.1f} s")
    facts["load_and_analyze_s"] = round(time.monotonic() - t0, 3)
    facts["loaded_once"] = loaded_once(main)
    return facts


def loaded_once(main: Cluster) -> dict[str, dict]:
    """What LOADED_ONCE left on the coordinator's regular tables: the share of their pages VACUUM
    marked all-visible, and whether autovacuum is off on them."""
    with main.connect(DB) as conn:
        rows = conn.execute(
            "SELECT format('%I.%I', n.nspname, c.relname), c.relallvisible, c.relpages, "
            "  'autovacuum_enabled=off' = ANY (coalesce(c.reloptions, '{}')) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname IN ('single_regular', 'partitioned_regular') ORDER BY 1").fetchall()
    return {name: {"all_visible": round(visible / pages, 4) if pages else 1.0, "autovacuum_off": off}
            for name, visible, pages, off in rows}
