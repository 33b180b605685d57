"""Tables of a user's database copied into one of ours (`--script-tables`): read, never written.

The user's tables are read in a read-only session of the DSN's own database (columns, primary
key, rows by binary COPY) and made anew in our database on the same server; the user's script
then runs against our copy, so that nothing of theirs is written, locked for long or vacuumed.
"""

from __future__ import annotations

import re

import psycopg
from psycopg import sql

from ..errors import UserError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?")


def table_names(text: str) -> tuple[str, ...]:
    """'accounts,app.orders' -> the names, each [schema.]table (unquoted identifiers)."""
    names = tuple(n.strip().lower() for n in text.split(",") if n.strip())   # unquoted: folded, as SQL does
    bad = [n for n in names if not _NAME.fullmatch(n)]
    if not names or bad:
        raise ValueError(f"'{text}' is not a list of tables; give [schema.]name,... (unquoted identifiers)")
    return names


def check_readable(conn: psycopg.Connection, names: tuple[str, ...], option: str) -> None:
    """Each table exists and our login may SELECT it; UserError naming the option otherwise."""
    for name in names:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL AND has_table_privilege(to_regclass(%s), 'SELECT')",
                           (name, name)).fetchone()
        if not row[0]:
            raise UserError(f"{option}: no table {name} that this login may read in the DSN's database; "
                            "name tables of that database (schema.name), readable by the login")


def _definition(conn: psycopg.Connection, name: str) -> tuple[list[tuple[str, str]], str | None]:
    columns = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = to_regclass(%s) "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (name,)).fetchall()
    key = conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = to_regclass(%s) "
                       "AND contype = 'p'", (name,)).fetchone()
    return columns, key[0] if key else None


def copy_tables(source: psycopg.Connection, target: psycopg.Connection, names: tuple[str, ...]) -> dict[str, int]:
    """Each table of `source` (read-only) as public.<table> in `target`, rows and primary key
    included, analyzed; {table: rows}."""
    copied = {}
    for name in names:
        table = name.rsplit(".", 1)[-1]
        columns, key = _definition(source, name)
        target.execute(sql.SQL("CREATE TABLE public.{} ({}{})").format(
            sql.Identifier(table),
            sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in columns),
            sql.SQL(", " + key) if key else sql.SQL("")))
        parts = [sql.Identifier(p) for p in name.split(".")]
        with source.cursor().copy(sql.SQL("COPY {} TO STDOUT (FORMAT binary)").format(sql.SQL(".").join(parts))) as out, \
                target.cursor().copy(sql.SQL("COPY public.{} FROM STDIN (FORMAT binary)").format(
                    sql.Identifier(table))) as into:
            for block in out:
                into.write(block)
        target.execute(sql.SQL("ANALYZE public.{}").format(sql.Identifier(table)))
        copied[table] = target.execute(sql.SQL("SELECT count(*) FROM public.{}").format(
            sql.Identifier(table))).fetchone()[0]
    return copied
