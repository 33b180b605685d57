"""What a PgBouncer did during one measurement: its SHOW STATS and SHOW POOLS rows of the pooled
database read before and after (servers/pgbouncer.Pooler.counters), as deltas and figures.

SHOW STATS holds running totals per database (transactions, queries, microseconds in them and
waiting for a server); its avg_* columns are rates over PgBouncer's last 15 s stats period, not over
the measurement, so the averages here are the totals' deltas over the deltas of their counts.
SHOW POOLS holds the pool's state now: the server connections it holds after the measurement
(sv_active + sv_idle + sv_used + sv_tested + sv_login: with no lifetime or idle limit, every one it
opened) against the transactions it passed is how much it reused them.
"""

from __future__ import annotations

from typing import Mapping

from ..metrics import Metric

TOTALS = ("total_xact_count", "total_query_count", "total_xact_time", "total_query_time", "total_wait_time",
          "total_received", "total_sent")
SERVER_STATES = ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login")
POOL_STATE = (*SERVER_STATES, "cl_active", "cl_waiting", "maxwait", "maxwait_us")


def _metrics(prefix: str, where: str) -> tuple[Metric, ...]:
    return (
        Metric(f"{prefix}transactions", "tx", "none", f"transactions {where} passed during the measurement "
               "(SHOW STATS total_xact_count, delta)"),
        Metric(f"{prefix}queries", "1", "none", f"queries {where} passed (total_query_count, delta)"),
        Metric(f"{prefix}server_connections", "1", "lower", f"server connections {where} holds after the "
               "measurement (sv_active+sv_idle+sv_used+sv_tested+sv_login): every one it opened, none closing"),
        Metric(f"{prefix}xacts_per_server_connection", "tx", "higher", f"{where}'s transactions per server "
               "connection it holds: how often it reused one"),
        Metric(f"{prefix}wait_ms", "ms", "lower", f"time clients waited for a server connection of {where}, "
               "summed (total_wait_time, delta)"),
        Metric(f"{prefix}avg_xact_ms", "ms", "lower", f"{where}'s average transaction time (total_xact_time "
               "over total_xact_count, deltas)"),
        Metric(f"{prefix}avg_query_ms", "ms", "lower", f"{where}'s average query time (deltas)"),
        Metric(f"{prefix}cl_waiting", "1", "lower", f"clients waiting for a server of {where} at the end"),
        Metric(f"{prefix}maxwait_ms", "ms", "lower", f"the oldest waiting client's wait at {where} at the end"),
    )


# --tls on through a pooler: its leg to the server (the client's leg is the study's metric `tls`)
SERVER_LEG_TLS = Metric("pooler_server_tls", "text", "none", "through a PgBouncer with --tls: the TLS its "
                        "server connections negotiated (protocol, cipher, bits; off: none), from the server's "
                        "pg_stat_ssl of the backends SHOW SERVERS names")
CLIENT_PREFIX, FDW_PREFIX = "pooler_", "fdw_pooler_"
CLIENT_METRICS = _metrics(CLIENT_PREFIX, "the client's PgBouncer")
METRICS = (*CLIENT_METRICS, *_metrics(FDW_PREFIX, "the PgBouncer in front of the FDW hop's source"))


def plain(counters: Mapping) -> dict:
    """SHOW STATS / SHOW POOLS rows with numbers as int (the console's numeric is a Decimal)."""
    return {part: {k: (int(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, bool) else v)
                   for k, v in (row or {}).items()} for part, row in counters.items()}


def record(before: Mapping, after: Mapping) -> dict:
    """The stored evidence of one pooler: its totals' deltas and its pools' state after."""
    b, a = plain(before), plain(after)
    return {"stats_delta": {k: a["stats"].get(k, 0) - b["stats"].get(k, 0) for k in TOTALS},
            "pools_after": {k: a["pools"].get(k) for k in POOL_STATE}, "pool_mode": a["pools"].get("pool_mode")}


def figures(rec: Mapping, prefix: str) -> dict:
    """The metrics of one pooler's record (record()), named with `prefix`."""
    d, pools = rec["stats_delta"], rec["pools_after"]
    xacts, queries = d["total_xact_count"], d["total_query_count"]
    servers = sum(pools.get(k) or 0 for k in SERVER_STATES)
    out = {"transactions": xacts, "queries": queries, "server_connections": servers,
           "wait_ms": d["total_wait_time"] / 1000, "cl_waiting": pools.get("cl_waiting") or 0,
           "maxwait_ms": (pools.get("maxwait") or 0) * 1000 + (pools.get("maxwait_us") or 0) / 1000}
    if servers:
        out["xacts_per_server_connection"] = xacts / servers
    if xacts:
        out["avg_xact_ms"] = d["total_xact_time"] / xacts / 1000
    if queries:
        out["avg_query_ms"] = d["total_query_time"] / queries / 1000
    return {prefix + k: v for k, v in out.items()}


def snapshot(poolers: Mapping[str, tuple]) -> dict:
    """The counters of each pooler a case crosses ({prefix: (Pooler, alias)}), before its measurement."""
    return {prefix: pooler.counters(alias) for prefix, (pooler, alias) in poolers.items()}


def collect(poolers: Mapping[str, tuple], before: Mapping, evidence: dict) -> dict:
    """The deltas since snapshot(), kept in the evidence ("pgbouncer", by prefix) and as metrics."""
    out, kept = {}, {}
    for prefix, (pooler, alias) in poolers.items():
        rec = record(before.get(prefix, {}), pooler.counters(alias))
        kept[prefix.rstrip("_")] = {"pooler": pooler.name, "database": alias, **rec}
        out.update(figures(rec, prefix))
    if kept:
        evidence["pgbouncer"] = kept
    return out
