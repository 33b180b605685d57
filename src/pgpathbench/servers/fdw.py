"""postgres_fdw objects, made one way: the extension, a foreign server, the user mapping, imports.

Every study that reaches a server through postgres_fdw builds its objects here, so that options
(fetch_size, async_capable, use_remote_estimate...) and credentials are handled in one place.
The password goes into the user mapping (that is where postgres_fdw reads it), never into a log.
Before each measurement a study puts its case's options in force on its foreign servers in one
call (set_case_options): the --fdw-option knobs, and the --set session settings as libpq's
`options`, the only way a setting reaches the sessions postgres_fdw opens on the remote server
(PGOPTIONS and SET reach our own sessions only).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Sequence

import psycopg
from psycopg import sql

from ..matrix import Case, KnobFamily, positive_int
from . import guc


def _boolean(v: str) -> str:
    if v.lower() not in ("true", "false", "on", "off"):
        raise ValueError(f"'{v}' is not a boolean; write true or false")
    return "true" if v.lower() in ("true", "on") else "false"


def _cost(v: str) -> str:
    try:
        number = float(v)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise ValueError(f"'{v}' is not a cost (a number >= 0)")
    return v


def _extensions(v: str) -> str:
    """Extension names joined by '+' (the comma separates the dimension's values): postgres_fdw's
    list, 'pg_trgm+cube' -> 'pg_trgm,cube' when set."""
    names = v.split("+")
    if not all(re.fullmatch(r"[a-z_][a-z0-9_]*", n) for n in names):
        raise ValueError(f"'{v}' is not a list of extension names; join names with '+': pg_trgm+cube")
    return v


# The postgres_fdw options that decide a path's cost, each valid on a foreign server (fetch_size,
# batch_size, use_remote_estimate, async_capable also on a table, where they override the
# server's): name -> parser of one value. Checked before anything is written; the server would
# only refuse them during prepare.
OPTIONS: dict[str, Callable[[str], str]] = {
    "fetch_size": positive_int("rows per FETCH"),
    "batch_size": positive_int("rows per remote INSERT"),
    "use_remote_estimate": _boolean,
    "async_capable": _boolean,
    "parallel_commit": _boolean,
    "keep_connections": _boolean,
    "fdw_startup_cost": _cost,
    "fdw_tuple_cost": _cost,
    "extensions": _extensions,
}

FAMILY = KnobFamily("fdw", "--fdw-option", "a postgres_fdw option on the foreign server, as a knob dimension: "
                    "NAME=V1,V2 (extensions: names joined by '+')", OPTIONS)


def option_value(name: str, value: str) -> str:
    """A dimension's value as postgres_fdw takes it."""
    return value.replace("+", ",") if name == "extensions" else value


def set_server_options(conn: psycopg.Connection, server: str, options: Mapping[str, str]) -> None:
    """ALTER SERVER ... OPTIONS (SET or ADD each): these options in force for new sessions."""
    if not options:
        return
    present = conn.execute("SELECT coalesce(srvoptions, '{}') FROM pg_foreign_server WHERE srvname = %s",
                           (server,)).fetchone()[0]
    have = {o.split("=", 1)[0] for o in present}
    conn.execute(sql.SQL("ALTER SERVER {} OPTIONS ({})").format(sql.Identifier(server), sql.SQL(", ").join(
        sql.SQL("{} {} {}").format(sql.SQL("SET" if k in have else "ADD"), sql.Identifier(k),
                                   sql.Literal(option_value(k, v))) for k, v in options.items())))


def case_options(env, case: Case) -> dict[str, str]:
    """What a case wants on its foreign servers: its --fdw-option knobs, and its --set session
    settings as libpq's `options` (`-c NAME=VALUE ...`; postgres_fdw accepts every libpq keyword
    but user, password and a few it sets itself). postgres_fdw then SETs search_path, TimeZone,
    DateStyle, IntervalStyle and extra_float_digits in every remote session: --set cannot vary
    those there."""
    settings = guc.session(env, case)
    return {**case.knobs(FAMILY), **({"options": guc.pgoptions(settings)} if settings else {})}


def set_case_options(env, case: Case, cluster, db: str, servers: Sequence[str],
                     kept: Sequence[psycopg.Connection] = (), hop: Mapping[str, str] | None = None) -> None:
    """case_options() on each foreign server of `cluster`'s database `db` whose options in force
    differ (ALTER SERVER): new sessions (pgbench's) connect with them. Then `kept`, every session
    a study keeps in `db` that uses `servers`, is primed: postgres_fdw drops a session's remote
    connection to a changed server at its next transaction, and a session made anew (after a
    restart) has none, so connecting would otherwise fall in the next measurement's timing. `hop`: the
    case's options of the connection itself (its TLS: servers/tls.py)."""
    wanted = {**case_options(env, case), **(hop or {})}
    in_force = env.knobs.fdw_options_in_force
    changed = [s for s in servers if wanted and in_force.get((cluster.name, db, s)) != wanted]
    if changed:
        with cluster.connect(db) as conn:
            for server in changed:
                set_server_options(conn, server, wanted)
                in_force[(cluster.name, db, server)] = wanted
    for conn in kept:
        prime(conn, servers)


def prime(conn: psycopg.Connection, servers: Sequence[str]) -> None:
    """The session's remote connection to each of `servers` it has none of, or an invalidated one,
    made now: one row of one of the server's foreign tables."""
    schema = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension "
                          "WHERE extname = 'postgres_fdw'").fetchone()[0]
    # Its transaction takes in other sessions' ALTER SERVER first: a changed server's is not valid.
    live = {r[0] for r in conn.execute(sql.SQL("SELECT server_name FROM {}.postgres_fdw_get_connections() "
                                               "WHERE valid").format(sql.SQL(schema)))}
    for server in (s for s in servers if s not in live):
        row = conn.execute("SELECT ft.ftrelid::regclass::text FROM pg_foreign_table ft JOIN pg_foreign_server s "
                           "ON s.oid = ft.ftserver WHERE s.srvname = %s LIMIT 1", (server,)).fetchone()
        if row is not None:   # regclass's text: a name quoted as SQL needs it
            conn.execute(sql.SQL("SELECT FROM {} LIMIT 1").format(sql.SQL(row[0])))


def _options(options: Mapping[str, object]) -> sql.Composable:
    return sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(k), sql.Literal(str(v)))
                              for k, v in options.items())


def create_server(conn: psycopg.Connection, name: str, host: str, port: int, dbname: str, user: str,
                  password: str, options: Mapping[str, object] | None = None) -> None:
    """CREATE EXTENSION postgres_fdw (if missing), SERVER `name` with its connection and options,
    and the current user's mapping to `user`/`password`."""
    server_options = {"host": host, "port": port, "dbname": dbname, **(options or {})}
    conn.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    conn.execute(sql.SQL("CREATE SERVER {} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ({})").format(
        sql.Identifier(name), _options(server_options)))
    if logs_statements(conn) and conn.info.parameter_status("is_superuser") == "on":
        conn.execute("SET log_statement = 'none'")   # the mapping's password stays out of the server's log
    conn.execute(sql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS ({})").format(
        sql.Identifier(name), _options({"user": user, "password": password})))


def reach(conn: psycopg.Connection, name: str, remote, db: str, address: tuple[str, int]) -> None:
    """create_server() `name` in conn's database, reaching the database a study calls `db` on
    `remote` (a managed server or the user's) at `address`: remote.fdw_target() gives its real
    name, the login, its password and the DSN's TLS options."""
    options, user, password = remote.fdw_target(db)
    create_server(conn, name, *address, options.pop("dbname"), user, password, options)


def warn_logged_password(log: Callable[[str], None], server) -> None:
    """A user's server that logs DDL, where we may not turn that off, logs the remote password with
    CREATE USER MAPPING (postgres_fdw keeps it there): said before it happens."""
    with server.connect() as conn:
        if logs_statements(conn) and conn.info.parameter_status("is_superuser") != "on":
            log(f"warning: the {server.name} server logs statements (log_statement or log_min_duration_statement) "
                f"and {conn.info.user} may not turn that off: its log will hold the password of the server it "
                "reaches, sent by CREATE USER MAPPING (postgres_fdw keeps it there)")


def logs_statements(conn: psycopg.Connection) -> bool:
    """Whether the server writes this session's DDL to its log (a user mapping's password with it)."""
    return conn.execute("SELECT current_setting('log_statement') IN ('ddl', 'all') "
                        "OR current_setting('log_min_duration_statement') = '0'").fetchone()[0]


def own_relations(conn: psycopg.Connection) -> tuple[str, ...]:
    """The tables and views of the public schema that no extension owns (template1 may have put
    an extension's there, e.g. pg_stat_statements: importing them would clash on the other side)."""
    return tuple(r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' "
        "AND c.relkind IN ('r', 'v', 'm', 'p', 'f') AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = "
        "'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e') ORDER BY 1"))


def import_schema(conn: psycopg.Connection, server: str, remote_schema: str = "public", into: str = "public",
                  tables: Sequence[str] | None = None) -> None:
    """IMPORT FOREIGN SCHEMA, all of it or LIMIT TO `tables`."""
    limit = sql.SQL(" LIMIT TO ({})").format(sql.SQL(", ").join(map(sql.Identifier, tables))) if tables else sql.SQL("")
    conn.execute(sql.SQL("IMPORT FOREIGN SCHEMA {}{} FROM SERVER {} INTO {}").format(
        sql.Identifier(remote_schema), limit, sql.Identifier(server), sql.Identifier(into)))


def alter_tables(conn: psycopg.Connection, tables: Sequence[str], options: Mapping[str, object]) -> None:
    """ALTER FOREIGN TABLE ... OPTIONS (ADD ...) on each table (e.g. updatable 'false')."""
    for t in tables:
        conn.execute(sql.SQL("ALTER FOREIGN TABLE {} OPTIONS ({})").format(sql.Identifier(t), _options(options)))
