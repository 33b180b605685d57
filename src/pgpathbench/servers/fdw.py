"""postgres_fdw objects, made one way: the extension, a foreign server, the user mapping, imports.

Every study that reaches a server through postgres_fdw builds its objects here, so that options
(fetch_size, async_capable, use_remote_estimate...) and credentials are handled in one place.
The password goes into the user mapping (that is where postgres_fdw reads it), never into a log.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import psycopg
from psycopg import sql


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
    conn.execute(sql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS ({})").format(
        sql.Identifier(name), _options({"user": user, "password": password})))


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
