"""fdw-overhead's databases of foreign tables: per target and link, and per pool mode of a PgBouncer
on the FDW hop (--fdw-via), each reaching the source's pgbench tables (seed 000, Snippets 1 and 2)."""

from __future__ import annotations

from psycopg import sql

from ...servers import fdw, tls
from ...servers.paths import DIRECT, NetworkPath
from ...servers.topology import Server
from ..base import StudyEnv, tls_values
from . import pooled
from .spec import POOLER, REMOTE_TARGETS, SOURCE_ROLE, TABLES

SERVER = "source_server"    # the foreign server, in every database with foreign tables


def targets(env: StudyEnv, source: Server, external: Server | None, isolation: str,
             tables: tuple[str, ...]) -> dict[tuple[str, str, str], tuple[Server, str]]:
    """(target, latency, FDW hop) -> (cluster, database) pgbench connects to, foreign tables made:
    a database per target and link, and per pool mode of a pooler on the FDW hop (--fdw-via)."""
    bandwidth = env.options.params.get("bandwidth")
    targets = {("local", DIRECT, "direct"): (source, "source")}
    # fdw_local's path to the source is the direct loopback one: probed like every link (from the
    # external's host when it is placed: the path the FDW hop of a 0 ms case takes).
    env.servers.path(NetworkPath(env.major, SOURCE_ROLE, DIRECT), source, client=external)
    for target in env.options.dims["target"]:
        if target == "fdw_local":
            # Inside the source's own network stack: loopback, whatever stack that is.
            foreign_tables(source, "localfdw", (source.self_host, source.port), source, isolation,
                            readonly=False, tables=tables)
            targets[(target, DIRECT, "direct")] = (source, "localfdw")
        elif target in REMOTE_TARGETS:
            base = {"fdw_external": "external", "fdw_external_ro": "external_ro"}[target]
            for latency in env.options.dims["latency"]:
                link = env.servers.path(NetworkPath(env.major, SOURCE_ROLE, latency), source, bandwidth, external)
                db = base if latency == DIRECT else f"{base}_{latency}"
                foreign_tables(external, db, source.reached_at(link), source, isolation,
                                readonly=target == "fdw_external_ro", tables=tables)
                targets[(target, latency, "direct")] = (external, db)
    return {**targets, **pooled_fdw_targets(env, source, external, isolation, tables)}


def set_isolation(server: Server, db: str, isolation: str) -> None:
    """ALTER DATABASE of ours (never of a user's: see servers/user.py)."""
    with server.connect(db) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = {}").format(
            sql.Identifier(server.dbname(db)), sql.Literal(isolation)))


def pooled_fdw_targets(env: StudyEnv, source: Server, external: Server | None, isolation: str,
                        tables: tuple[str, ...]) -> dict[tuple[str, str, str], tuple[Server, str]]:
    """--fdw-via pgbouncer: per FDW target on the direct path and pool mode, a database whose foreign
    server reaches the PgBouncer in front of the source (localfdw_pgb_transaction...): the first TLS
    value's, whose port each case sets to its own's (pooled.fdw_hop_options)."""
    dims, out = env.options.dims, {}
    if POOLER not in dims.get("fdw_via", ()):
        return out
    pooler = env.servers.pooler(source, tls=tls_values(env.options)[0] == tls.ON)
    for mode in dims["pool_mode"]:
        alias = pooler.serve("source", mode, pooled.FDW_POOL)
        for target in (t for t in dims["target"] if t != "local"):
            if target in REMOTE_TARGETS and DIRECT not in dims["latency"]:
                continue
            cluster, base = (source, "localfdw") if target == "fdw_local" else \
                (external, {"fdw_external": "external", "fdw_external_ro": "external_ro"}[target])
            # fdw_local reaches it from inside the source's own stack, the external where it reaches the source
            host = source.self_host if cluster is source else pooler.tcp_host
            foreign_tables(cluster, f"{base}_pgb_{mode}", (host, pooler.port), source, isolation,
                            readonly=target == "fdw_external_ro", tables=tables, remote=(pooler, alias))
            out[(target, DIRECT, mode)] = (cluster, f"{base}_pgb_{mode}")
    return out


def foreign_tables(cluster: Server, db: str, address: tuple[str, int], source: Server, isolation: str,
                    readonly: bool, tables: tuple[str, ...] = TABLES, remote: tuple | None = None) -> None:
    """Database `db` on `cluster` with the four pgbench tables as foreign tables of the source at
    `address`: `tables` of the source's public schema (pgbench's, and with --init or --script-tables
    every one of ours there). remote: (pooler, its alias of the source) when a PgBouncer is on the way."""
    cluster.create_database(db)
    with cluster.connect(db) as conn:
        fdw.reach(conn, SERVER, *(remote or (source, "source")), address)
        fdw.import_schema(conn, SERVER, "public", "public", tables)
    set_isolation(cluster, db, isolation)
    with cluster.connect(db) as conn:
        if readonly:  # seed 000, Snippet 2
            tables = [r[0] for r in conn.execute("SELECT foreign_table_name FROM information_schema.foreign_tables "
                                                 "WHERE foreign_table_schema = 'public' ORDER BY 1")]
            fdw.alter_tables(conn, tables, {"updatable": "false"})
