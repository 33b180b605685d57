"""What postgres_fdw sends the source per transaction, counted in two short untimed passes.

pg_stat_statements costs a path through postgres_fdw 1-4% of its TPS while it tracks (on 15 each
foreign scan's DECLARE CURSOR keeps its constant: a new entry, and its text written, per
transaction), more than collecting evidence may cost. So the timed runs track nothing
(pg_stat_statements.track = none on every managed server), and after a measurement of an FDW case
the same pgbench command runs twice more, tracked: `-t 1` and `-t N` per client, N the
transactions of PASS_S at the measurement's TPS. The source's calls in the longer pass less the
shorter, over the difference of their transactions, are what one transaction sends; what every
pgbench run sends once (postgres_fdw's session set-up, pgbench's scale check) cancels out and is
kept apart. The passes are stored with the measurement's evidence ("statement_pass"); a pass
that cannot count leaves a reason in evidence.missing and no figure, never a failed measurement.
"""

from __future__ import annotations

import dataclasses

from ...errors import reason
from ...evidence import Watched
from ...evidence.snapshots import MARK, STATEMENTS_LIMIT, read_evictions, read_statements, server_version_num, \
    statement_deltas, statement_totals
from ...metrics import Metric
from ...servers import guc
from ...tools import pgbench

TRACK = "pg_stat_statements.track"
PASS_S = 0.1              # the longer pass, in seconds at the measurement's TPS
MAX_PER_CLIENT = 5000     # its transactions per client at most
PASS_BOUND_S = 1          # a pass's pgbench times out after this plus its grace (pgbench.GRACE_S)

METRICS = (
    Metric("remote_statements_per_txn", "1/tx", "lower", "statements the source ran per pgbench transaction, "
           "counted by its pg_stat_statements in two untimed passes after the measurement (-t 1 and -t N): "
           "the round trips postgres_fdw makes per transaction, counted rather than fitted"),
    Metric("remote_statements_per_run", "1", "lower", "statements the source ran once per pgbench run whatever "
           "its length (postgres_fdw's session set-up, pgbench's scale check): the passes' calls less "
           "remote_statements_per_txn times their transactions"),
    Metric("remote_rows_per_fetch", "rows", "higher", "rows per FETCH the source answered in the passes "
           "(postgres_fdw's cursor batches: fetch_size caps it)"),
)


def count(env, run: pgbench.TimedRun, tps: float, source: Watched, managed: bool) -> tuple[dict | None, str | None]:
    """Both passes of `run`, counted on the source (its one database): (the record, None) or
    (None, why not). Tracking is on (managed servers) only while they run."""
    per_client = max(2, min(MAX_PER_CLIENT, round(tps * PASS_S / run.clients)))
    guc.reload_settings(env, {TRACK: "top"})
    try:
        (dbname,) = source.databases
        with source.connect() as conn:
            version = server_version_num(conn)
            if conn.execute(f"SELECT current_setting('{TRACK}', true)").fetchone()[0] == "none":
                raise RuntimeError(f"{TRACK} is none on the source (its DBA's setting): nothing to count")
            if managed:   # the earlier passes' entries out of the way: none of these may be evicted
                conn.execute(MARK + "SELECT pg_stat_statements_reset()")
            passes = [_one(env, conn, version, dataclasses.replace(run, transactions=n, duration_s=PASS_BOUND_S),
                           dbname) for n in (1, per_client)]
    except Exception as e:   # the measurement stands without its count
        return None, reason(e)
    finally:
        guc.reload_settings(env, {TRACK: "none"})
    return per_transaction(passes)


def _one(env, conn, version: int, run: pgbench.TimedRun, dbname: str) -> dict:
    """One pass: the source's statements in `dbname` before and after pgbench, their totals."""
    before, evicted = read_statements(conn, version, [dbname], with_text=False), read_evictions(conn, version, ())
    figures = pgbench.run(env.bins.path("pgbench"), run, log=False)
    after = read_statements(conn, version, [dbname])
    if read_evictions(conn, version, ())["dealloc"] != evicted["dealloc"]:
        raise RuntimeError("pg_stat_statements evicted entries during the pass (raise pg_stat_statements.max)")
    statements = statement_deltas(before, after)
    totals = statement_totals(statements).get(dbname, {"calls": 0, "fetch_calls": 0, "fetch_rows": 0})
    return {"per_client": run.transactions, "transactions": int(figures["transactions"]), "calls": totals["calls"],
            "fetch_calls": totals["fetch_calls"], "fetch_rows": totals["fetch_rows"],
            "statements": statements[:STATEMENTS_LIMIT]}


def per_transaction(passes: list[dict]) -> tuple[dict | None, str | None]:
    """The record of a short and a long pass: per transaction the difference of their calls over
    the difference of their transactions, per run what is left (pure)."""
    short, long = passes
    txns = long["transactions"] - short["transactions"]
    if txns <= 0:
        return None, f"the passes' transactions do not differ ({short['transactions']}, {long['transactions']})"
    if not long["calls"]:
        return None, "pg_stat_statements counted no statement of the source's database in the pass"
    per_txn = (long["calls"] - short["calls"]) / txns
    record = {"passes": passes, "per_txn": per_txn, "per_run": short["calls"] - per_txn * short["transactions"]}
    fetch_calls = long["fetch_calls"] - short["fetch_calls"]
    if fetch_calls > 0:
        record["rows_per_fetch"] = (long["fetch_rows"] - short["fetch_rows"]) / fetch_calls
    return record, None


def metrics(record: dict) -> dict:
    """METRICS of one measurement from its passes' record."""
    out = {"remote_statements_per_txn": record["per_txn"], "remote_statements_per_run": record["per_run"]}
    if "rows_per_fetch" in record:
        out["remote_rows_per_fetch"] = record["rows_per_fetch"]
    return out
