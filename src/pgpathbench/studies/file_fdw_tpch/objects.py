"""file-fdw-tpch's objects on the tpch instance and the postgres_fdw layout's workers: the schemas,
tables, file_fdw tables and columnar tables of the single, partitioned and postgres_fdw layouts,
the postgres_fdw layout's foreign partitions, and their load (COPY FROM STDIN), VACUUM and ANALYZE
(the citus layout's are in citus.py).

Only what a run's storages need is made: with the regular storage alone (the tpch role on a user
server, which cannot read our files) neither file_fdw nor its tables, so nothing here needs a
superuser there. A columnar table is its regular twin copied by INSERT ... SELECT on its own server
(citus_columnar, which needs no preloading: these servers never load citus itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg import sql

from ...datasets.tpch.files import TpchFiles
from ...datasets.tpch.load import Task, copy_tasks
from ...datasets.tpch.schema import PARTITION_KEY, PARTITIONED, column_list
from ...servers.cluster import SUPERUSER, Cluster
from ...servers.fdw import create_server
from .spec import COLUMNAR, CORES, DB, POSTGRES_FDW_OPTIONS, schema, single_tables

if TYPE_CHECKING:
    from .shape import Shape


def worker_servers(n: int) -> list[str]:
    """The coordinator's foreign servers, one per postgres_fdw layout instance."""
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
COLUMNAR_AM = "CREATE EXTENSION IF NOT EXISTS citus_columnar"


def columnar_copy(table: str, regular: str) -> tuple[str, str]:
    """A columnar table filled from its regular twin, then analysed (a task of the pool)."""
    return f"INSERT INTO {table} SELECT * FROM {regular}", f"ANALYZE {table}"


def file_table(name: str, table: str, path, partition_of: str | None = None, bound: str = "") -> str:
    """A file_fdw table over a .tbl file: with the extra trailing column, or a partition of one."""
    head = (f"CREATE FOREIGN TABLE {name} PARTITION OF {partition_of} {bound}" if partition_of else
            f"CREATE FOREIGN TABLE {name} ({column_list(table, with_dummy=True)})")
    return f"{head} SERVER tpch_files OPTIONS (filename {sql.quote(str(path))}, format 'text', delimiter '|')"


def range_bound(bounds, k: int) -> str:
    low, high = bounds[k]
    return f"FOR VALUES FROM ({'MINVALUE' if low is None else low}) TO ({'MAXVALUE' if high is None else high})"


def main_ddl(files: TpchFiles, shape: Shape, bounds) -> list[str]:
    """The tpch instance's schemas: the single layout's tables (its small ones serve the
    partitioned and postgres_fdw layouts too), the partitioned layout's partitions, the
    postgres_fdw layout's partitioned parents."""
    layouts = ("single", *(la for la in shape.stock_layouts if la != "single"))
    foreign, columnar = "foreign" in shape.storages, shape.columnar
    stmts = [*(FILE_SERVER if foreign else ()), *([COLUMNAR_AM] if columnar else ()),
             *(f"CREATE SCHEMA {schema(la, st)}" for la in layouts for st in shape.storages)]
    for table in single_tables(shape.layouts):
        stmts.append(f"CREATE TABLE single_regular.{table} ({column_list(table)}) {LOADED_ONCE}")
        if foreign:
            stmts.append(file_table(f"single_foreign.{table}", table, files.file(table)))
        if columnar:
            stmts.append(f"CREATE TABLE single_columnar.{table} ({column_list(table)}) USING columnar")
    for table in PARTITIONED:
        by = f"PARTITION BY RANGE ({PARTITION_KEY[table]})"
        if "partitioned" in shape.layouts:
            stmts += partitioned_ddl(files, shape, bounds, table, by)
        if "postgres_fdw" in shape.layouts:
            stmts += [f"CREATE TABLE postgres_fdw_{st}.{table} ({column_list(table)}) {by}" for st in shape.storages]
    return stmts


def partitioned_ddl(files: TpchFiles, shape: Shape, bounds, table: str, by: str) -> list[str]:
    """The partitioned layout's parent and partitions of one table, in each storage."""
    stmts = [f"CREATE TABLE partitioned_regular.{table} ({column_list(table)}) {by}"]
    if "foreign" in shape.storages:
        stmts.append(f"CREATE TABLE partitioned_foreign.{table} ({column_list(table, with_dummy=True)}) {by}")
    if shape.columnar:
        stmts.append(f"CREATE TABLE partitioned_columnar.{table} ({column_list(table)}) {by}")
    for k in range(shape.partitions):
        bound = range_bound(bounds, k)
        stmts.append(f"CREATE TABLE partitioned_regular.{table}_{k + 1} "
                     f"PARTITION OF partitioned_regular.{table} {bound} {LOADED_ONCE}")
        if "foreign" in shape.storages:
            stmts.append(file_table(f"partitioned_foreign.{table}_{k + 1}", table,
                                    files.part_file(table, shape.partitions, k + 1), f"partitioned_foreign.{table}",
                                    bound))
        if shape.columnar:
            stmts.append(f"CREATE TABLE partitioned_columnar.{table}_{k + 1} PARTITION OF "
                         f"partitioned_columnar.{table} {bound} USING columnar")
    return stmts


def create_objects(main: Cluster, workers: list[Cluster], files: TpchFiles, shape: Shape) -> dict[str, dict]:
    """Tables, file_fdw tables, columnar tables and postgres_fdw partitions of the stock layouts, on
    every instance. Each postgres_fdw instance holds its part as a regular table, over its part file
    and as a columnar table; the coordinator reaches it as partition k of that layout's lineitem and
    orders. Returns where each instance's file_fdw tables read their part files."""
    read_at = {}
    bounds = files.partition_bounds(shape.partitions) if shape.needs_parts else []
    with main.connect(DB) as conn:
        for stmt in main_ddl(files, shape, bounds):
            conn.execute(stmt)
        for k, (w, server) in enumerate(zip(workers, worker_servers(len(workers)))):
            create_server(conn, server, w.tcp_host, w.port, DB, SUPERUSER, w.password, POSTGRES_FDW_OPTIONS)
            for table in PARTITIONED:
                for st in shape.storages:
                    conn.execute(f"CREATE FOREIGN TABLE postgres_fdw_{st}.{table}_{k + 1} PARTITION OF "
                                 f"postgres_fdw_{st}.{table} {range_bound(bounds, k)} SERVER {server} OPTIONS "
                                 f"(schema_name 'worker_{st}', table_name '{table}')")
    for k, w in enumerate(workers, 1):
        stmts = [*FILE_SERVER, *([COLUMNAR_AM] if shape.columnar else ()),
                 *(f"CREATE SCHEMA worker_{st}" for st in shape.storages)]
        # its part files where it reads them: here, or shipped to its host (a placed worker)
        parts = read_at[w.name] = w.server_paths({t: files.part_file(t, shape.partitions, k) for t in PARTITIONED})
        for table in PARTITIONED:
            stmts.append(f"CREATE TABLE worker_regular.{table} ({column_list(table)}) {LOADED_ONCE}")
            stmts.append(file_table(f"worker_foreign.{table}", table, parts[table]))
            if shape.columnar:
                stmts.append(f"CREATE TABLE worker_columnar.{table} ({column_list(table)}) USING columnar")
        w.execute(DB, *stmts)
    return read_at


# -- load and analyse -----------------------------------------------------------------------------
def load_tasks(main: Cluster, workers: list[Cluster], files: TpchFiles, shape: Shape) -> tuple[list[Task], list[Task]]:
    """COPY slices (large files cut so that every core has work), then every ANALYZE: a regular
    table's with its one VACUUM (vacuum_once), a columnar table's after its copy."""
    ci, n, sizes = main.conninfo(DB), shape.partitions, files.sizes()
    # A user server's password is held in memory, never in a conninfo (servers/user.py).
    secret = None if main.managed else main.password
    slice_bytes = max(16 << 20, sum(sizes.values()) // (2 * CORES))
    load: list[Task] = []
    analyze: list[Task] = []
    foreign = "foreign" in shape.storages
    for table in single_tables(shape.layouts):
        load += copy_tasks("single", ci, f"single_regular.{table}", files.file(table), slice_bytes, secret)
        analyze.append(Task("single regular", ci, sql=vacuum_once(f"single_regular.{table}"),
                            weight=sizes[table] * 0.3,
                            password=secret))
        if foreign:
            analyze.append(Task("single foreign", ci, sql=f"ANALYZE single_foreign.{table}", weight=sizes[table]))
        if shape.columnar:
            analyze.append(Task("single columnar", ci, sql=columnar_copy(f"single_columnar.{table}",
                                                                         f"single_regular.{table}"),
                                weight=sizes[table], password=secret))
    for table in PARTITIONED:
        if "partitioned" in shape.layouts:
            load, analyze = load + partitioned_loads(ci, files, table, n, slice_bytes), analyze + \
                partitioned_analyses(ci, shape, table, sizes[table])
        for k, w in enumerate(workers, 1):
            wci, wpw = w.conninfo(DB), tcp_password(w)
            load += copy_tasks("postgres_fdw", wci, f"worker_regular.{table}", files.part_file(table, n, k),
                               slice_bytes, wpw)
            analyze.append(Task("postgres_fdw worker regular", wci, sql=vacuum_once(f"worker_regular.{table}"),
                                weight=sizes[table] * 0.3 / n, password=wpw))
            analyze.append(Task("postgres_fdw worker foreign", wci, sql=f"ANALYZE worker_foreign.{table}",
                                weight=sizes[table] / n, password=wpw))
            if shape.columnar:
                analyze.append(Task("postgres_fdw worker columnar", wci, weight=sizes[table] / n, password=wpw,
                                    sql=columnar_copy(f"worker_columnar.{table}", f"worker_regular.{table}")))
    analyze += coordinator_analyses(main, shape, sizes, [st for st in shape.storages if st != COLUMNAR])
    return load, analyze


def tcp_password(server) -> str | None:
    """A worker on a host (--place) is reached over TCP only: its password, held in memory (never in
    a conninfo); one here by its private socket."""
    return None if "unix" in server.transports else server.password


def partitioned_loads(ci: str, files: TpchFiles, table: str, n: int, slice_bytes: int) -> list[Task]:
    return [task for k in range(1, n + 1) for task in copy_tasks(
        "partitioned", ci, f"partitioned_regular.{table}_{k}", files.part_file(table, n, k), slice_bytes)]


def partitioned_analyses(ci: str, shape: Shape, table: str, size: int) -> list[Task]:
    """A partitioned table's ANALYZE samples the whole (for the joins above the partitions) and then
    each partition: file_fdw parses every part twice."""
    tasks = [Task("partitioned regular", ci, sql=vacuum_once(f"partitioned_regular.{table}"), weight=size * 0.35)]
    if "foreign" in shape.storages:
        tasks.append(Task("partitioned foreign", ci, sql=f"ANALYZE partitioned_foreign.{table}", weight=size * 2))
    if shape.columnar:
        tasks.append(Task("partitioned columnar", ci, weight=size,
                          sql=columnar_copy(f"partitioned_columnar.{table}", f"partitioned_regular.{table}")))
    return tasks


def coordinator_analyses(main: Cluster, shape: Shape, sizes: dict, storages) -> list[Task]:
    """The postgres_fdw coordinator's statistics of its foreign partitions, once the workers' tables
    are loaded (their columnar ones copied: a phase after): PostgreSQL 15 fetches every row to sample
    them (analyze_sampling is 16+), for the whole and each part."""
    if "postgres_fdw" not in shape.layouts:
        return []
    ci = main.conninfo(DB)
    return [Task(f"postgres_fdw coordinator {st}", ci, sql=f"ANALYZE postgres_fdw_{st}.{table}",
                 weight=sizes[table] * 2) for table in PARTITIONED for st in storages]
