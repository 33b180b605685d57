"""Per-measurement figures derived from Evidence.data (pure: no server, no clock)."""

from __future__ import annotations


def summary(evidence_data: dict, transactions: int | None = None) -> dict:
    """Figures per role, from the sections each server gave (a missing section gives no figure).

    remote_statements: calls summed over the role's statements (the listed ones: at most 25, so
        a case running more distinct statements is undercounted);
    statements_per_txn: remote_statements / transactions, when transactions is given (> 0);
    rows_per_call: rows / calls over statements starting with FETCH (cursor batches), if any ran;
    server_cpu_ms: user + system CPU of the server's process group.
    """
    out: dict[str, dict] = {"remote_statements": {}, "rows_per_call": {}, "server_cpu_ms": {}}
    if transactions:
        out["statements_per_txn"] = {}
    for role, server in evidence_data.get("servers", {}).items():
        statements = server.get("statements")
        if statements is not None:
            calls = sum(s["calls"] for s in statements)
            out["remote_statements"][role] = calls
            if transactions:
                out["statements_per_txn"][role] = calls / transactions
            fetches = [s for s in statements if s["query"].lstrip().upper().startswith("FETCH")]
            fetch_calls = sum(s["calls"] for s in fetches)
            if fetch_calls:
                out["rows_per_call"][role] = sum(s["rows"] for s in fetches) / fetch_calls
        cpu = server.get("cpu_ms")
        if cpu is not None:
            out["server_cpu_ms"][role] = cpu["user"] + cpu["system"]
    return out
