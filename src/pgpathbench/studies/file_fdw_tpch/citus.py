"""file-fdw-tpch's citus layout: a Citus cluster, its distributed and reference tables in each
storage, and how each storage's shards are made.

- Nodes: managed, a coordinator and --workers worker nodes (servers/citus.py sets them up), in
  the database tpch of each; or the user's cluster (--server coordinator=DSN), in the DSN's own
  database (Citus's metadata is per database), its workers those pg_dist_node lists, everything
  of ours in schemas of ours (pgpathbench_<tag>_citus_<storage>, marked and recorded as the user
  servers' databases are: servers/user.py).
- Tables: lineitem and orders distributed on their order keys, in --partitions shards, co-located
  (orders and every other storage's tables with the regular lineitem: shard k of every storage
  holds the same hash range); the six small tables are reference tables (a copy on every node).
- regular: loaded by COPY FROM STDIN through the coordinator (which routes each row to its
  shard), then VACUUM (FREEZE, ANALYZE) once, propagated to the shards.
- columnar: the same tables USING columnar, filled by INSERT ... SELECT from the regular ones
  (co-located: each shard copied on its own node).
- foreign (managed only): each shard of the foreign storage's tables, on every node holding it,
  is replaced by a file_fdw table over a file of that shard's own rows: the regular storage's shard
  of the same hash range COPYed TO a file in the node's directory (FORMAT text, '|'), the empty
  shard table dropped and a foreign table of the same name made in its place
  (citus.enable_manual_changes_to_shards: Citus refuses to distribute a foreign table), then
  ANALYZEd. The coordinator plans and runs the queries as on any distributed table; each task's
  scan on a worker parses its shard's file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from ...datasets.tpch.files import TpchFiles
from ...datasets.tpch.load import Task, copy_tasks
from ...datasets.tpch.schema import PARTITION_KEY, PARTITIONED, TABLES, column_list
from ...evidence import Watched
from ...servers import citus as engine
from ...servers.topology import Server
from .objects import COLUMNAR_AM, FILE_SERVER, LOADED_ONCE, columnar_copy, tcp_password, vacuum_once
from .spec import CITUS, COLUMNAR, CORES, DB

if TYPE_CHECKING:
    from ..base import StudyEnv
    from .shape import Shape

ROLE = "coordinator"
SHARDS_HOW = ("each shard of the foreign storage's tables, on every node holding it, is a file_fdw table over a "
              "file of that shard's own rows: the regular storage's co-located shard (same hash range) COPYed to a "
              "file in the node's directory after the load, the empty shard table replaced by the foreign table "
              "(citus.enable_manual_changes_to_shards), then ANALYZEd")


@dataclass
class CitusNodes:
    """The citus layout's servers: its coordinator (managed, or the user's) and its managed workers
    (none for a user's cluster: pg_dist_node lists its own)."""
    coordinator: Server
    workers: list[Server] = field(default_factory=list)   # managed: here, or on hosts (--place)
    user_workers: list[dict] = field(default_factory=list)   # a user's cluster's, from pg_dist_node

    @property
    def managed(self) -> bool:
        return self.coordinator.managed

    def schema(self, storage: str) -> str:
        """citus_STORAGE, named ours on a user's cluster (pgpathbench_<tag>_citus_STORAGE)."""
        return self.coordinator.dbname(f"{CITUS}_{storage}")

    def connect(self) -> psycopg.Connection:
        """The database our tables are in: tpch of ours, or the DSN's own (writable: our schemas)."""
        return self.coordinator.connect(DB) if self.managed else self.coordinator.connect_own()

    def conninfo(self) -> str:
        return self.coordinator.conninfo(DB if self.managed else "postgres")

    def watched(self) -> list[Watched]:
        """The coordinator and each managed worker, whose activity (the tasks) is a case's evidence."""
        if not self.managed:   # its workers' processes are not visible from here: their SQL only
            return [self.coordinator.watched_own(ROLE)] + [
                self.coordinator.watched_own(f"worker{k}", w["host"], w["port"]) for k, w in enumerate(self.user_workers, 1)]
        return [self.coordinator.watched(ROLE, DB)] + [w.watched(f"citus_worker{k}", DB)
                                                       for k, w in enumerate(self.workers, 1)]


def start(env: StudyEnv, shape: Shape, settings: dict[str, str]) -> CitusNodes:
    """The coordinator (the user's with --server coordinator) and, when managed, its workers, each
    preloading citus and sharing the coordinator's password; the nodes joined in pg_dist_node."""
    preload = {**settings, **engine.PRELOAD}
    coordinator = env.servers.server(ROLE, settings=preload)
    if not coordinator.managed:
        with coordinator.connect_own() as conn:
            return CitusNodes(coordinator, user_workers=engine.workers_of(conn))
    # each here, or on its host (--place citus_worker=NAME or citus_workerK=NAME)
    workers = [env.servers.server(f"citus_worker{k}", settings=preload, secret=coordinator.password)
               for k in range(1, shape.workers + 1)]
    for node in (coordinator, *workers):
        node.create_database(DB)
    engine.set_up(coordinator, workers, DB)
    return CitusNodes(coordinator, workers)


def ddl(nodes: CitusNodes, shape: Shape) -> list[str]:
    """Schemas and tables of every storage; lineitem and orders distributed and co-located, the others
    reference tables."""
    first = f"{nodes.schema('regular')}.lineitem"
    stmts = [*(FILE_SERVER if "foreign" in shape.storages else ()),
             *([COLUMNAR_AM] if shape.columnar and nodes.managed else ())]
    for st in shape.storages:
        schema = nodes.schema(st)
        stmts.append(f"CREATE SCHEMA {schema}")
        if not nodes.managed:
            stmts.append(f"COMMENT ON SCHEMA {schema} IS {sql.quote(nodes.coordinator.mark(schema))}")
        storage = "USING columnar" if st == COLUMNAR else LOADED_ONCE
        for table in TABLES:
            stmts.append(f"CREATE TABLE {schema}.{table} ({column_list(table)}) {storage}")
        for table in (*PARTITIONED, *(t for t in TABLES if t not in PARTITIONED)):   # lineitem first
            name = f"{schema}.{table}"
            if table not in PARTITIONED:
                stmts.append(f"SELECT create_reference_table('{name}')")
            elif name == first:
                stmts.append(f"SELECT create_distributed_table('{name}', '{PARTITION_KEY[table]}', "
                             f"colocate_with => 'none', shard_count => {shape.partitions})")
            else:
                stmts.append(f"SELECT create_distributed_table('{name}', '{PARTITION_KEY[table]}', "
                             f"colocate_with => '{first}')")
    return stmts


def create_objects(nodes: CitusNodes, shape: Shape) -> None:
    if not nodes.managed:   # recorded before they are made, so that clean finds them
        for st in shape.storages:
            nodes.coordinator.record_schema(nodes.schema(st))
    with nodes.connect() as conn:
        for stmt in ddl(nodes, shape):
            conn.execute(stmt)


def load_tasks(nodes: CitusNodes, files: TpchFiles, shape: Shape) -> tuple[list[Task], list[Task]]:
    """COPY through the coordinator into the regular tables; then their one VACUUM, the columnar
    copies and the foreign shards."""
    ci, sizes = nodes.conninfo(), files.sizes()
    secret = None if nodes.managed else nodes.coordinator.password
    slice_bytes = max(16 << 20, sum(sizes.values()) // (2 * CORES))
    regular = nodes.schema("regular")
    load = [t for table in TABLES for t in copy_tasks("citus", ci, f"{regular}.{table}", files.file(table),
                                                      slice_bytes, secret)]
    analyze = [Task("citus regular", ci, sql=vacuum_once(f"{regular}.{table}"), weight=sizes[table] * 0.3,
                    password=secret) for table in TABLES]
    if shape.columnar:
        analyze += [Task("citus columnar", ci, weight=sizes[table], password=secret,
                         sql=columnar_copy(f"{nodes.schema(COLUMNAR)}.{table}", f"{regular}.{table}"))
                    for table in TABLES]
    if "foreign" in shape.storages:
        analyze += [Task("citus foreign shards", node.conninfo(DB), sql=replace_shard(nodes, shard, path),
                         weight=sizes[shard["table"]] / max(1, shape.partitions), password=tcp_password(node))
                    for shard, node, path in foreign_shards(nodes)]
    return load, analyze


def placements(conn: psycopg.Connection, schemas) -> list[dict]:
    """Every shard placement of the tables in `schemas`: schema, table, shard id, its hash range's
    start, and the node (host, port) holding it."""
    rows = conn.execute(
        "SELECT n.nspname, c.relname, s.shardid, s.shardminvalue, d.nodename, d.nodeport "
        "FROM pg_dist_shard s JOIN pg_class c ON c.oid = s.logicalrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_dist_placement p ON p.shardid = s.shardid JOIN pg_dist_node d ON d.groupid = p.groupid "
        "WHERE n.nspname = ANY(%s) ORDER BY 1, 2, 3, 5, 6", (list(schemas),)).fetchall()
    return [{"schema": a, "table": b, "shard": c, "min": d, "host": e, "port": f} for a, b, c, d, e, f in rows]


def foreign_shards(nodes: CitusNodes) -> list[tuple[dict, Server, str]]:
    """Each placement of the foreign storage, with its regular twin's shard id ("source"), the
    managed node that holds both, and the file its rows go to."""
    with nodes.connect() as conn:
        found = placements(conn, [nodes.schema("regular"), nodes.schema("foreign")])
    twins = {(p["table"], p["min"], p["port"]): p["shard"] for p in found if p["schema"] == nodes.schema("regular")}
    by_node = {(n.tcp_host, n.port): n for n in (nodes.coordinator, *nodes.workers)}
    directories: dict[str, str] = {}   # node -> where it writes its shards' files (COPY TO), on its own disk
    out = []
    for p in found:
        if p["schema"] != nodes.schema("foreign"):
            continue
        node = by_node[(p["host"], p["port"])]
        if node.name not in directories:
            directories[node.name] = node.writable_dir("shards")
        out.append(({**p, "source": twins[(p["table"], p["min"], p["port"])]}, node,
                    f"{directories[node.name]}/{p['table']}_{p['shard']}.tbl"))
    return out


def replace_shard(nodes: CitusNodes, shard: dict, path: str) -> tuple[str, ...]:
    """The statements that make one foreign shard: its twin's rows to a file, the table replaced."""
    regular, foreign = nodes.schema("regular"), nodes.schema("foreign")
    name = f"{foreign}.{shard['table']}_{shard['shard']}"
    return tuple([
        "SET citus.enable_manual_changes_to_shards = on",
        f"COPY {regular}.{shard['table']}_{shard['source']} TO {sql.quote(path)} (FORMAT text, DELIMITER '|')",
        f"DROP TABLE {name}",
        f"CREATE FOREIGN TABLE {name} ({column_list(shard['table'])}) SERVER tpch_files "
        f"OPTIONS (filename {sql.quote(path)}, format 'text', delimiter '|')",
        f"ANALYZE {name}"])


def facts(nodes: CitusNodes, shape: Shape) -> dict:
    """What the report says of the cluster: Citus's version and nodes, how the links between them
    were set up, and how each storage's shards were made (the foreign shards' files and sizes)."""
    t0 = time.monotonic()
    with nodes.connect() as conn:
        out = {**engine.facts(conn), "shards": placements(conn, [nodes.schema(st) for st in shape.storages]),
               "schemas": {st: nodes.schema(st) for st in shape.storages}, "managed": nodes.managed}
    out["made"] = {"regular": "COPY FROM STDIN through the coordinator, then VACUUM (FREEZE, ANALYZE)",
                   **({"columnar": "INSERT ... SELECT from the regular tables (co-located), then ANALYZE"}
                      if shape.columnar else {}),
                   **({"foreign": SHARDS_HOW} if "foreign" in shape.storages else {})}
    if nodes.managed and "foreign" in shape.storages:
        out["shard_files"] = [{"table": s["table"], "shard": s["shard"], "node": node.name, "path": path,
                               "bytes": file_size(node, path)} for s, node, path in foreign_shards(nodes)]
    out["facts_s"] = round(time.monotonic() - t0, 3)
    return out


def file_size(node: Server, path: str) -> int:
    """A file's size on the node's own disk (a placed worker's is on its host), read by the server."""
    with node.connect(DB) as conn:
        return conn.execute("SELECT size FROM pg_stat_file(%s)", (path,)).fetchone()[0]


def file_sizes(facts: dict) -> dict[str, int]:
    """table -> the bytes of its foreign shards' files (on one node each: a reference table's are alike)."""
    sizes: dict[str, int] = {}
    seen = set()
    for f in facts.get("shard_files", []):
        if f["shard"] not in seen:
            seen.add(f["shard"])
            sizes[f["table"]] = sizes.get(f["table"], 0) + f["bytes"]
    return sizes


def links(conn: psycopg.Connection) -> list[dict]:
    """The TLS Citus's connections to the workers use, read on the workers right after a query
    (while the coordinator session keeps them cached)."""
    try:
        return engine.links(conn)
    except psycopg.Error as e:
        return [{"error": " ".join(str(e).split())}]
