"""One server's statistics views at one moment, section by section, and the deltas of two.

Each reader takes an autocommit connection (so every query sees fresh statistics) and raises on
anything it cannot give; the caller records the reason and goes on with the next section.
"""

from __future__ import annotations

from typing import Sequence

import psycopg

# Marks our own queries, so pg_stat_statements' list can leave them out.
MARK_TEXT = "pgpathbench-evidence"
MARK = f"/* {MARK_TEXT} */ "

DATABASE_COLUMNS = ("xact_commit", "xact_rollback", "blks_hit", "blks_read", "tup_returned",
                    "tup_fetched", "tup_inserted", "tup_updated", "tup_deleted",
                    "temp_files", "temp_bytes")   # what queries spilled: a sort or hash past work_mem
IO_COLUMNS = ("reads", "writes", "extends", "hits", "evictions", "fsyncs")
BGWRITER_COLUMNS = ("buffers_checkpoint", "buffers_clean", "buffers_backend", "buffers_alloc")
WAL_COLUMNS = ("wal_records", "wal_fpi", "wal_bytes")
# WAL flushes (pg_stat_wal has them on 14-17; 18 moved them to pg_stat_io), and their time in us
# where track_wal_io_timing is on (it reads 0 otherwise): what a commit's flush costs.
WAL_SYNC, WAL_SYNC_TIME = "wal_sync", "(wal_sync_time * 1000)::bigint AS wal_sync_time_us"
STATEMENTS_LIMIT = 25


class Unavailable(Exception):
    """A section this server cannot give; the message is the reason."""


def server_version_num(conn: psycopg.Connection) -> int:
    return int(conn.execute(MARK + "SHOW server_version_num").fetchone()[0])


def _sums(conn: psycopg.Connection, view: str, columns: Sequence[str], where: str = "",
          params: Sequence = ()) -> dict[str, int]:
    cols = ", ".join(f"coalesce(sum({c}), 0)::bigint" for c in columns)
    row = conn.execute(f"{MARK}SELECT {cols} FROM {view} {where}", params).fetchone()
    return dict(zip(columns, map(int, row)))


def read_database(conn: psycopg.Connection, version: int, databases: Sequence[str]) -> dict:
    return _sums(conn, "pg_stat_database", DATABASE_COLUMNS, "WHERE datname = ANY(%s)", (list(databases),))


def read_io(conn: psycopg.Connection, version: int, databases: Sequence[str]) -> dict:
    # pg_stat_io is 16+; before, pg_stat_bgwriter's buffer counters are the nearest figure
    # (17 moved them out of pg_stat_bgwriter, so the choice must follow the version).
    if version >= 160000:
        return _sums(conn, "pg_stat_io", IO_COLUMNS)
    return _sums(conn, "pg_stat_bgwriter", BGWRITER_COLUMNS)


def read_wal(conn: psycopg.Connection, version: int, databases: Sequence[str]) -> dict:
    if version < 140000:
        raise Unavailable(f"pg_stat_wal needs PostgreSQL 14+ (server_version_num {version})")
    out = _sums(conn, "pg_stat_wal", WAL_COLUMNS + ((WAL_SYNC,) if version < 180000 else ()))
    if version < 180000 and conn.execute(MARK + "SHOW track_wal_io_timing").fetchone()[0] == "on":
        out["wal_sync_time_us"] = int(conn.execute(f"{MARK}SELECT {WAL_SYNC_TIME} FROM pg_stat_wal").fetchone()[0])
    return out


def _statements_schema(conn: psycopg.Connection) -> str:
    row = conn.execute(MARK + "SELECT extnamespace::regnamespace::text FROM pg_extension "
                       "WHERE extname = 'pg_stat_statements'").fetchone()
    if row is None:
        db = conn.info.dbname
        raise Unavailable(f"pg_stat_statements is not installed in database {db} (CREATE EXTENSION there; "
                          "it also needs shared_preload_libraries)")
    return row[0]


def read_statements(conn: psycopg.Connection, version: int, databases: Sequence[str],
                    with_text: bool = True) -> dict:
    """queryid:dbid:userid -> [query, calls, rows, exec_ms, database] for statements in `databases`.

    Rows sharing a key (top-level and nested, with pg_stat_statements.track = all) are summed.
    The text is read only when asked: the before-snapshot needs none, and reading it is the
    costly part of the view.
    """
    schema = _statements_schema(conn)
    exec_col = "total_exec_time" if version >= 130000 else "total_time"
    text = "query" if with_text else "NULL::text"
    rows = conn.execute(
        f"{MARK}SELECT queryid, dbid, userid, {text}, calls, rows, {exec_col}, d.datname "
        f"FROM {schema}.pg_stat_statements(%s) s JOIN pg_database d ON d.oid = s.dbid "
        "WHERE queryid IS NOT NULL AND d.datname = ANY(%s)",
        (with_text, list(databases))).fetchall()
    out: dict[str, list] = {}
    for queryid, dbid, userid, query, calls, nrows, ms, datname in rows:
        key = f"{queryid}:{dbid}:{userid}"
        if key in out:
            prev = out[key]
            out[key] = [prev[0] or query, prev[1] + calls, prev[2] + nrows, prev[3] + ms, datname]
        else:
            out[key] = [query, int(calls), int(nrows), float(ms), datname]
    return out


def read_evictions(conn: psycopg.Connection, version: int, databases: Sequence[str]) -> dict:
    """pg_stat_statements' deallocations (14+): an entry evicted between the snapshots took its
    calls with it, so statement totals of a measurement with evictions undercount. PostgreSQL 15
    keeps a DECLARE CURSOR's constants (postgres_fdw sends them inline): one entry per value."""
    if version < 140000:
        raise Unavailable(f"pg_stat_statements_info needs PostgreSQL 14+ (server_version_num {version})")
    schema = _statements_schema(conn)
    return {"dealloc": int(conn.execute(f"{MARK}SELECT dealloc FROM {schema}.pg_stat_statements_info").fetchone()[0])}


def read_settings(conn: psycopg.Connection, names: Sequence[str]) -> dict[str, str]:
    """NAME -> its value as SHOW gives it: server-wide settings (sighup, postmaster) in force."""
    return dict(conn.execute(MARK + "SELECT name, current_setting(name) FROM unnest(%s::text[]) name",
                             (list(names),)).fetchall())


READERS = {"database": read_database, "io": read_io, "wal": read_wal, "statements": read_statements,
           "evictions": read_evictions}


def counter_deltas(before: dict, after: dict) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def statement_deltas(before: dict, after: dict) -> list[dict]:
    """Statements that ran between the snapshots, most calls first, ours left out.

    An entry whose calls went down was evicted or reset meanwhile: its after-values are the
    whole of what ran since.
    """
    out = []
    for key, (query, calls, nrows, ms, database) in after.items():
        if query is None or MARK_TEXT in query:
            continue
        prev = before.get(key)
        if prev is not None and prev[1] <= calls:
            calls, nrows, ms = calls - prev[1], nrows - prev[2], ms - prev[3]
        if calls > 0:
            out.append({"query": query, "calls": calls, "rows": nrows, "exec_ms": round(ms, 3), "database": database})
    out.sort(key=lambda s: (-s["calls"], s["query"]))
    return out


def statement_totals(statements: list[dict]) -> dict[str, dict]:
    """Per database: every statement's calls and rows summed, and the FETCHes' apart (a cursor's batches)."""
    out = {}
    for db in dict.fromkeys(s.get("database") for s in statements):
        of_db = [s for s in statements if s.get("database") == db]
        fetches = [s for s in of_db if s["query"].lstrip().upper().startswith("FETCH")]
        out[db] = {"distinct": len(of_db), "calls": sum(s["calls"] for s in of_db),
                   "rows": sum(s["rows"] for s in of_db), "fetch_calls": sum(s["calls"] for s in fetches),
                   "fetch_rows": sum(s["rows"] for s in fetches)}
    return out
