"""Seed 003's tables (Joe Conway's "Postgres Interface Performance") and its three queries.

t50k: id (primary key) + nine texts of 99 characters; t10m: id + nine texts of 14-57 characters;
column x{i} holds the digit i and then a letter of a, b, c (a, b, c, a, ...) to its width, as the
seed's load scripts wrote them; both generated in the server with generate_series. sql001 reads
the row 4242 of t50k (an index scan: ~0.15 ms per lookup in the seed), sql50k and sql10m read a
whole table. Every session that reads them runs with synchronize_seqscans off (as the clients
and psql do through clients.session_env), so a scan starts at the table's first page.
"""

from __future__ import annotations

from typing import Mapping

from ..errors import UserError

DB = "iftest"                       # the seed's database
SEED_ID = 4242                      # the row sql001 reads
WIDTHS = {"t50k": (99,) * 9, "t10m": (14, 57, 15, 15, 57, 15, 15, 57, 15)}
QUERIES = {"sql001": f"select * from t50k where id = {SEED_ID}", "sql50k": "select * from t50k",
           "sql10m": "select * from t10m"}
QUERY_TABLE = {"sql001": "t50k", "sql50k": "t50k", "sql10m": "t10m"}


def seed_literal(i: int, width: int) -> str:
    """Column x{i} of the seed's tables: '1aaaa...', '2bbbb...', '3cccc...', '4aaaa...' of this width."""
    return str(i) + "abc"[(i - 1) % 3] * (width - 1)


def table_sql(name: str, rows: int) -> list[str]:
    """CREATE and INSERT ... generate_series of one of the seed's tables (t50k has its primary key:
    sql001's 1-row lookups are index scans, not scans of 50k rows)."""
    key = " PRIMARY KEY" if name == "t50k" else ""
    cols = ", ".join(f"x{i} text" for i in range(1, 10))
    values = ", ".join(f"'{seed_literal(i, w)}'" for i, w in enumerate(WIDTHS[name], 1))
    return [f"DROP TABLE IF EXISTS {name}",
            f"CREATE TABLE {name} (id int{key}, {cols})",
            f"INSERT INTO {name} SELECT id, {values} FROM generate_series(1, {rows}) AS t(id)",
            f"VACUUM (FREEZE, ANALYZE) {name}"]


def row_bytes(name: str, rows: int) -> int:
    """COPY text bytes of a seed table: digits of every id, the nine texts, ten separators per row."""
    digits = sum((min(rows, 10 ** d - 1) - 10 ** (d - 1) + 1) * d for d in range(1, len(str(rows)) + 1))
    return digits + rows * (sum(WIDTHS[name]) + 10)


def tables_of(queries) -> list[str]:
    """The tables the given queries read, in a fixed order."""
    return sorted({QUERY_TABLE[q] for q in queries})


def disk_need(sizes: Mapping[str, int], servers: int) -> float:
    """Bytes the tables need: the heap about 1.25x the COPY text, plus WAL, on every server, and one
    copy of the largest result written to a file (an output of p-all:file)."""
    copy_bytes = [row_bytes(t, rows) for t, rows in sizes.items()]
    return sum(copy_bytes) * 2.5 * servers + max(copy_bytes, default=0)


def check_disk(sizes: Mapping[str, int], servers: int, free_bytes: int) -> None:
    need = disk_need(sizes, servers)
    if need > free_bytes:
        raise UserError(f"--t10m-rows: the tables need about {need / 1e9:.1f} GB free in the workspace, "
                        f"{free_bytes / 1e9:.1f} GB are; use smaller --t10m-rows or another --workspace")


def load(cluster, sizes: Mapping[str, int]) -> None:
    """The database and the given tables ({name: rows}) on a server (a user's: in a database of ours
    there, servers/user.py), each read once so that the cache is warm for the first round."""
    cluster.create_database(DB)
    with cluster.connect(DB) as conn:
        conn.execute("SET synchronize_seqscans = off")     # as every session of ours (clients.session_env)
        for table, rows in sizes.items():
            for statement in table_sql(table, rows):
                conn.execute(statement)
            conn.execute(f"SELECT count(*) FROM {table}")
