"""What every study's measurements carry beside their figures, tabled and drawn the same way for
all: the latency distribution (percentiles per measurement, their medians over rounds), where the
time went (CPU of the client and of each server, in cores, and the wait events the servers'
backends were sampled in), what each server did (pg_stat_database, WAL, statements), and the
per-second series. Read from the result model (Measurement.metrics, .evidence, .series).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Callable, Iterable

from ..results.model import CaseResult, Measurement, StudyResult
from ..stats import summarise
from . import Plot, Point, Table
from .render import count

PERCENTILES = (("p50", "latency_p50_ms", 50), ("p90", "latency_p90_ms", 90), ("p95", "latency_p95_ms", 95),
               ("p99", "latency_p99_ms", 99), ("max", "latency_max_ms", 100))
DATABASE_COUNTERS = ("xact_commit", "xact_rollback", "blks_hit", "blks_read", "tup_returned", "tup_fetched")
TOP_WAITS = 3
SERIES_CASES = 12        # small multiples of at most this many cases (the slowest first)


def _cell(values: Iterable[float]) -> float | None:
    """The median over rounds (None: no round gave the figure)."""
    xs = [v for v in values if v is not None]
    return statistics.median(xs) if xs else None


def _count(values: Iterable[float]) -> str | None:
    """A counter's median over rounds, printed as a count."""
    return count(_cell(values))


def _ci(values: Iterable[float]) -> str:
    xs = [v for v in values if v is not None]
    return summarise(xs).ci_text if xs else "—"


def _per_round(case: CaseResult, figure: Callable[[Measurement], float | None]) -> list[float]:
    return [v for m in case.ok if (v := figure(m)) is not None]


# -- what the evidence says, per measurement ------------------------------------------------------
def servers(m: Measurement) -> dict:
    return (m.evidence or {}).get("servers", {})


def roles(result: StudyResult) -> list[str]:
    return list(dict.fromkeys(r for c in result.cases for m in c.ok for r in servers(m)))


def wall_ms(m: Measurement) -> float | None:
    return m.duration_s * 1000 if m.duration_s else None


def client_cores(m: Measurement) -> float | None:
    """The measured program's CPU over the measurement's wall time: cores it kept busy."""
    cpu, wall = m.number("cpu_ms"), wall_ms(m)
    return cpu / wall if cpu is not None and wall else None


def server_cores(m: Measurement, role: str) -> float | None:
    cpu, wall = servers(m).get(role, {}).get("cpu_ms"), wall_ms(m)
    return (cpu["user"] + cpu["system"]) / wall if cpu and wall else None


def wait_shares(case: CaseResult, role: str) -> dict[str, float]:
    """The share of each wait event type over every sample of every round (samples pooled)."""
    counts: dict[str, float] = defaultdict(float)
    for m in case.ok:
        waits = servers(m).get(role, {}).get("waits") or {}
        for kind, share in (waits.get("shares") or {}).items():
            counts[kind] += share * waits.get("samples", 0)
    total = sum(counts.values())
    return {k: v / total for k, v in sorted(counts.items(), key=lambda kv: -kv[1])} if total else {}


def sampled_every(cases: Iterable[CaseResult]) -> str:
    """How often the wait events were sampled, from the records ('100 ms' before interval_ms was kept)."""
    found = sorted({(w.get("interval_ms") or 100) for c in cases for m in c.ok for w in
                    (s.get("waits") for s in servers(m).values()) if w})
    return " or ".join(f"{ms:g} ms" for ms in found) or "—"


def database_delta(m: Measurement, role: str, counter: str) -> float | None:
    return servers(m).get(role, {}).get("database", {}).get(counter)


# -- tables ---------------------------------------------------------------------------------------
def latency_table(result: StudyResult) -> Table | None:
    cases = [c for c in result.cases if c.values("latency_p50_ms")]
    if not cases:
        return None
    rows = [[c.case_id, *(_cell(c.values(metric).values()) for _, metric, _ in PERCENTILES),
             _ci(c.values("latency_p99_ms").values()), len(c.values("latency_p50_ms")),
             _logged(c)] for c in cases]
    return Table("Latency distribution, ms", ["case", *(name for name, _, _ in PERCENTILES), "p99 95% CI", "n",
                                              "logged"], rows,
                 ["Each measurement's percentiles come from its own events (pgbench's per-transaction log; a "
                  "client's histogram of iterations, 6.25% buckets); the table gives their median over the n "
                  "rounds that have them. pgbench logs every transaction of a case slow enough for that to cost "
                  "nothing measurable, a random sample of a faster one (logged: transactions per round, least-most) "
                  "in every other round, the others writing its aggregate log (the exact series per second); max "
                  "is over every transaction, so a sampled case has none."],
                 detail=(6, 8))


def _logged(case: CaseResult) -> str | None:
    """How many transactions the percentiles of a case's rounds are over: '98' or '65-110'."""
    n = sorted(int(v) for v in case.values("latency_sample_n").values())
    return None if not n else f"{n[0]:,}" if n[0] == n[-1] else f"{n[0]:,}-{n[-1]:,}"


def time_table(result: StudyResult) -> Table | None:
    """Where the time went: CPU of the client and each server in cores, the servers' waits."""
    cases = [c for c in result.cases if any(servers(m) for m in c.ok)]
    if not cases:
        return None
    names = roles(result)
    rows = []
    for c in cases:
        row = [c.case_id, _cell(_per_round(c, wall_ms)), _cell(_per_round(c, client_cores))]
        row += [_cell(_per_round(c, lambda m, r=r: server_cores(m, r))) for r in names]
        row.append("; ".join(f"{r}: " + ", ".join(f"{k} {v:.0%}" for k, v in list(wait_shares(c, r).items())[:TOP_WAITS])
                             for r in names if wait_shares(c, r)) or "—")
        rows.append(row)
    return Table("Where the time goes", ["case", "wall, ms", "client CPU, cores", *(f"{r} CPU, cores" for r in names),
                                          "server backends' wait events (sampled)"], rows,
                 [explains(cases, names), "Medians over rounds. CPU from the kernel: the client's (wait4) and each server's process group "
                  "(/proc), over the measurement's wall time. Wait events: the case's client backends in pg_stat_activity, sampled "
                  f"every {sampled_every(cases)}; CPU = active without a wait event, Client = waiting for its client."],
                 detail=(len(names) + 3,))


def explains(cases: list[CaseResult], names: list[str]) -> str:
    """One line from the evidence of the longest case: who kept the cores busy, what its backends waited on."""
    case = max(cases, key=lambda c: _cell(_per_round(c, wall_ms)) or 0.0)
    parts = []
    client = _cell(_per_round(case, client_cores))
    if client is not None:
        parts.append(f"the client kept {client:.2f} cores busy")
    for r in names:
        cores = _cell(_per_round(case, lambda m, r=r: server_cores(m, r)))
        waits = wait_shares(case, r)
        if cores is None:
            continue
        top = next(iter(waits.items()), None)
        parts.append(f"{r} {cores:.2f} cores" + (f", its backends mostly in {top[0]} ({top[1]:.0%} of samples)"
                                                  if top else ""))
    return f"What explains it: in {case.case_id}, the longest case, " + ("; ".join(parts) or "no evidence") + "."


def server_table(result: StudyResult) -> Table | None:
    """What each server did per measurement (pg_stat_database, WAL, statements): medians over rounds."""
    names = roles(result)
    rows = []
    for c in result.cases:
        for r in names:
            ms = [m for m in c.ok if r in servers(m)]
            if not ms:
                continue
            cells = [_count(v for m in ms if (v := database_delta(m, r, k)) is not None)
                     for k in DATABASE_COUNTERS]
            wal = _count(v for m in ms if (v := servers(m)[r].get("wal", {}).get("wal_bytes")) is not None)
            calls = _count(sum(s["calls"] for s in servers(m)[r].get("statements", [])) for m in ms
                           if "statements" in servers(m)[r])
            rows.append([c.case_id, r, *cells, wal, calls])
    if not rows:
        return None
    return Table("What the servers did, per measurement", ["case", "server", *DATABASE_COUNTERS, "WAL bytes",
                                                            "statements"], rows,
                 ["Deltas of pg_stat_database (the case's databases), pg_stat_wal and pg_stat_statements (calls) "
                  "from before to after each measurement; median over rounds. Sections a server could not "
                  "give are listed in the export's evidence.missing."], align_left=2, detail=(4, 5, 6, 7))


POOLERS = (("pooler_", "client's"), ("fdw_pooler_", "FDW hop's"))   # evidence/pooler.py's metric prefixes
POOLER_FIGURES = ("transactions", "queries", "server_connections", "xacts_per_server_connection", "wait_ms",
                  "avg_xact_ms", "cl_waiting", "maxwait_ms")
SESSION_EXCLUDED = ("Not measured under transaction pooling, as they need a session (PgBouncer 1.18 keeps no prepared "
                    "statement across transactions): fdw-overhead's --protocol prepared; interfaces' jdbc and "
                    "psycopg, which prepare a repeated query on the server.")


def pooler_table(result: StudyResult) -> Table | None:
    """What each PgBouncer on a case's path did (evidence/pooler.py's figures), median over rounds."""
    rows, transaction = [], False
    for c in result.cases:
        for prefix, which in POOLERS:
            if c.ok and c.summary(prefix + "transactions") is not None:
                rows.append([c.case_id, which, *(c.median(prefix + f) for f in POOLER_FIGURES)])
                transaction |= c.dims.get("pool_mode") == "transaction"
    if not rows:
        return None
    notes = ["PgBouncer's SHOW STATS (deltas over the measurement) and SHOW POOLS (after it), median over rounds: "
             "the server connections it holds against the transactions it passed is how often it reused one."]
    return Table("PgBouncer per measurement (median)",
                 ["case", "pooler", "transactions", "queries", "server connections", "txns per server conn.",
                  "wait, ms", "avg txn, ms", "clients waiting", "max wait, ms"], rows,
                 notes + ([SESSION_EXCLUDED] if transaction else []), align_left=2)


def tls_table(result: StudyResult) -> Table | None:
    """The TLS each case's connections negotiated (the metric `tls` of runs with --tls on), over its rounds;
    through a PgBouncer also its leg to the server (`pooler_server_tls`), a column only where a case has one."""
    def negotiated(seen) -> str:
        return "; ".join(sorted(set(map(str, seen.values()))))
    legs = any(c.raw("pooler_server_tls") for c in result.cases)
    rows = [[c.case_id, c.get("tls", "off"), negotiated(seen),
             *([negotiated(c.raw("pooler_server_tls") or {}) or "-"] if legs else []), len(seen)]
            for c in result.cases if (seen := c.raw("tls"))]
    if not rows:
        return None
    notes = ["As the server logged each connection the case made (log_connections: protocol, cipher, key bits; "
             "the values pg_stat_ssl shows while a connection lives), or for a connection kept across "
             "measurements (remote-sampling's FDW hop) as pg_stat_ssl shows it; off: no TLS. A connection "
             "that was not what the case's tls says fails its measurement."]
    if legs:
        notes.append("Through a PgBouncer, `negotiated` is the client's leg as the pooler logged each login "
                     "(protocol, cipher), and `pooler to server` its server connections' as the server's "
                     "pg_stat_ssl shows them.")
    return Table("TLS the connections negotiated, per case",
                 ["case", "tls", "negotiated", *(["pooler to server"] if legs else []), "rounds"], rows, notes,
                 align_left=4 if legs else 3)


def tables(result: StudyResult) -> list[Table]:
    return [t for t in (latency_table(result), time_table(result), server_table(result), pooler_table(result),
                        tls_table(result))
            if t is not None]


# -- plots ----------------------------------------------------------------------------------------
def quantile_plot(result: StudyResult) -> Plot | None:
    cases = [c for c in result.cases if c.values("latency_p50_ms")]
    if not cases:
        return None
    series = {}
    for c in cases:
        points = []
        for name, metric, _ in PERCENTILES:
            values = list(c.values(metric).values())
            if values:   # no max where only a sample was logged
                s = summarise(values)
                points.append(Point(name, s.median, s.ci_low, s.ci_high))
        series[c.case_id] = points
    return Plot("Latency distribution per case", "Percentile of the measurement's transactions (or iterations)",
                "Latency, ms", "scatter", series, log_y=True,
                notes=["Median over rounds of each measurement's percentile; error bars: 95% CI."])


def series_plots(result: StudyResult) -> list[Plot]:
    """Small multiples: transactions per second and their latency over time, two charts per case, a
    line per round."""
    cases = [c for c in result.cases if any(m.series for m in c.ok)]
    cases.sort(key=lambda c: -(c.median("latency_ms") or 0))
    plots = []
    for c in cases[:SERIES_CASES]:
        tps = {f"round {m.round}": [Point(float(p["t"]), float(p["tps"])) for p in m.series] for m in c.ok if m.series}
        latency = {f"round {m.round}": [Point(float(p["t"]), float(p["latency_ms"])) for p in m.series
                                        if p.get("latency_ms") is not None] for m in c.ok if m.series}
        plots.append(Plot(f"TPS over time: {c.case_id}", "Seconds since the first transaction",
                          "Transactions completed in that second", "line", tps))
        plots.append(Plot(f"Latency over time: {c.case_id}", "Seconds since the first transaction",
                          "Mean latency of that second's transactions, ms", "line", latency))
    return plots


def time_plot(result: StudyResult) -> Plot | None:
    """Where the time went, per case: cores kept busy by the client and by each server."""
    table_cases = [c for c in result.cases if any(servers(m) for m in c.ok)]
    if not table_cases:
        return None
    series: dict[str, list[Point]] = {"client": []}
    for r in roles(result):
        series[r] = []
    for c in table_cases:
        series["client"].append(Point(c.case_id, statistics.median(_per_round(c, client_cores) or [0.0])))
        for r in roles(result):
            series[r].append(Point(c.case_id, statistics.median(_per_round(c, lambda m, r=r: server_cores(m, r)) or [0.0])))
    return Plot("Where the time goes: CPU per case", "Case", "Cores kept busy (CPU time / wall time)", "stacked",
                series, notes=["Median over rounds; the rest of each wall second was spent waiting (see the "
                               "wait events in the table)."])


def waits_plot(result: StudyResult) -> Plot | None:
    """What the servers' backends were doing, per case and server: shares of the wait event types."""
    categories = [(c, r) for c in result.cases for r in roles(result) if wait_shares(c, r)]
    if not categories:
        return None
    series: dict[str, list[Point]] = {}
    for c, r in categories:
        for kind, share in wait_shares(c, r).items():
            series.setdefault(kind, []).append(Point(f"{c.case_id} · {r}", share))
    return Plot("Where the time goes: server backends' wait events", "Case · server", "Share of samples",
                "stacked", series, notes=[f"pg_stat_activity of the case's client backends, sampled every "
                                          f"{sampled_every(c for c, _ in categories)} over every round: CPU = active "
                                          "without a wait event, Client = waiting for its client (a round trip, or "
                                          "the client's own work)."])


def plots(result: StudyResult) -> list[Plot]:
    fixed = (quantile_plot(result), time_plot(result), waits_plot(result))
    return [p for p in fixed if p is not None] + series_plots(result)
