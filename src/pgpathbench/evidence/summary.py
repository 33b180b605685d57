"""Per-measurement figures derived from Evidence.data (pure: no server, no clock)."""

from __future__ import annotations


def _totals(server: dict, database: str | None) -> dict | None:
    """The statement totals of one database of a server, or of all it watched (database None);
    None when the server could not count every statement (pg_stat_statements evicted entries)."""
    if "statement_totals" not in server or server.get("evictions", {}).get("dealloc", 1) > 0:
        return None
    by_db = server["statement_totals"]
    if database is not None:
        return by_db.get(database, {"calls": 0, "rows": 0, "fetch_calls": 0, "fetch_rows": 0})
    keys = ("calls", "rows", "fetch_calls", "fetch_rows")
    return {k: sum(t[k] for t in by_db.values()) for k in keys}


def summary(evidence_data: dict, transactions: int | None = None, database: str | None = None) -> dict:
    """Figures per role, from the sections each server gave (a missing section gives no figure).

    remote_statements: calls summed over every statement of the role's databases (or of `database`);
    statements_per_txn: remote_statements / transactions, when transactions is given (> 0);
    rows_per_call: rows / calls over statements starting with FETCH (cursor batches), if any ran;
    server_cpu_ms: user + system CPU of the server's process group.
    """
    out: dict[str, dict] = {"remote_statements": {}, "rows_per_call": {}, "server_cpu_ms": {}}
    if transactions:
        out["statements_per_txn"] = {}
    for role, server in evidence_data.get("servers", {}).items():
        totals = _totals(server, database)
        if totals is not None:
            out["remote_statements"][role] = totals["calls"]
            if transactions:
                out["statements_per_txn"][role] = totals["calls"] / transactions
            if totals["fetch_calls"]:
                out["rows_per_call"][role] = totals["fetch_rows"] / totals["fetch_calls"]
        cpu = server.get("cpu_ms")
        if cpu is not None:
            out["server_cpu_ms"][role] = cpu["user"] + cpu["system"]
    return out


def flush_statistics(conn) -> None:
    """Ask a session we keep open to report its statistics when it next goes idle (15+), so that a
    measurement's evidence holds them rather than the next one's: an idle backend otherwise waits
    up to 10 s (PGSTAT_IDLE_INTERVAL) before it reports."""
    if conn.info.server_version >= 150000:
        conn.execute("SELECT pg_stat_force_next_flush()")
