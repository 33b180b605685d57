"""fdw-overhead's tables and charts, read from the result model.

The seed's two tables (TPS and latency: max, min, mean, plus median and 95% CI) beside the
published figures, the overhead ratio local/target paired by round, the cost of a round trip
when several latencies were measured, serialization failures, and what pgbench itself cost.
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

from ...references import FDW_OVERHEAD_LATENCY_MS, FDW_OVERHEAD_TPS, Published, published_tps_ratio
from ...report import Plot, Point, Table
from ...results.model import CaseResult, StudyResult
from ...servers.paths import DIRECT, NetworkPath, latency_ms
from ...stats import Summary, linear_fit, summarise
from ...matrix import NOT_APPLICABLE
from ...servers.fdw import FAMILY
from ...tools.pgbench import PROTOCOLS
from .spec import BASELINE, CLOSED_LOOP, DEFAULT_PROTOCOL, HOP, REMOTE_TARGETS, SCRIPT_PREFIX, SOURCE_ROLE, \
    TARGET_LABEL, case_path, network_path

PUBLISHED_NOTE = ("Published: seed 000's table (PostgreSQL 9.6.2, scale 100, 10 x 10 s, 1 client; "
                  "FDW_ext_ro from seed 001). Compare ratios, not absolute figures, across machines.")
COVERAGE_NOTE = "An interval followed by (NN%) covers only NN%: too few rounds for 95%."
PATH_COLUMN = "Path to source (measured RTT)"


class Key(NamedTuple):
    """One case of the report, with clients as a number (for sorting)."""
    workload: str
    target: str
    clients: int
    latency: str
    pg: str
    protocol: str = DEFAULT_PROTOCOL
    knobs: tuple[tuple[str, str], ...] = ()    # (fdw.NAME, value), '-' on local
    rate: str = CLOSED_LOOP                    # pgbench -R (roof.py); max: the closed loop
    hops: tuple[str, ...] = ()                  # the poolers on its path (servers/paths.py)
    tls: str = "off"                           # the FDW hop's TLS (off on local, and in runs before --tls)

    @classmethod
    def of(cls, case: CaseResult) -> "Key":
        path = case_path(case)
        return cls(case["workload"], case["target"], int(case["clients"]), case["latency"], case["pg"],
                   case["protocol"],
                   tuple(sorted((n, v) for n, v in case.dims.items() if FAMILY.owns(n))), case.get("rate", CLOSED_LOOP),
                   path.hops if path else (), case.dims.get("tls", "off"))

    @property
    def workload_label(self) -> str:
        """RO, RW, or the script's name (script:NAME)."""
        return self.workload if self.workload.startswith(SCRIPT_PREFIX) else self.workload.upper()

    @property
    def knob_text(self) -> str:
        """'/prepared/fetch_size=1/tls': the knobs that are not at their default, for labels."""
        return ((f"/{self.protocol}" if self.protocol != DEFAULT_PROTOCOL else "")
                + "".join(f"/{FAMILY.knob_name(n)}={v}" for n, v in self.knobs if v != NOT_APPLICABLE)
                + "".join(f"/{h}" for h in self.hops)
                + ("/tls" if self.tls == "on" else ""))

    @property
    def bench(self) -> str:
        """'RO.FDW_local_5@2ms': the seed's bench name, with clients and link when not 1 and direct,
        then the knobs not at their default ('/prepared/fetch_size=100'), then an offered rate (' R800')."""
        return (f"{self.workload_label}.{TARGET_LABEL[self.target]}" + (f"_{self.clients}" if self.clients != 1 else "")
                + (f"@{self.latency}" if self.latency != DIRECT else "") + self.knob_text
                + (f" R{self.rate}" if self.rate != CLOSED_LOOP else ""))

    @property
    def path(self) -> NetworkPath | None:
        base = network_path(self.target, self.latency, self.pg)
        if not self.hops:
            return base
        return NetworkPath(self.pg, SOURCE_ROLE, base.latency if base else DIRECT, self.hops)

    def path_text(self, rtt: dict[str, float]) -> str:
        return "unix socket" if self.path is None else self.path.describe(rtt) + (", TLS" if self.tls == "on" else "")

    def order(self) -> tuple:
        return (self.workload, int(self.pg), self.clients, list(TARGET_LABEL).index(self.target),
                latency_ms(self.latency), PROTOCOLS.index(self.protocol),
                tuple((n, int(v) if v.isdigit() else -1, v) for n, v in self.knobs),
                self.rate != CLOSED_LOOP, float(self.rate.removesuffix("x")) if self.rate != CLOSED_LOOP else 0.0,
                self.hops, self.tls)


Cases = list[tuple[Key, CaseResult]]


def cases_of(result: StudyResult) -> Cases:
    """The measured cases (at least one success), in the report's order."""
    return sorted(((Key.of(c), c) for c in result.cases if c.ok), key=lambda kc: kc[0].order())


# -- tables ---------------------------------------------------------------------------------------
def tables(result: StudyResult) -> list[Table]:
    cases = cases_of(result)
    rtt = result.rtt()
    out = [_aggregate_table("TPS (without initial connection time)", "tps", cases, rtt, FDW_OVERHEAD_TPS),
           _aggregate_table("Latency average, ms", "latency_ms", cases, rtt, FDW_OVERHEAD_LATENCY_MS),
           _ratio_table(cases, rtt)]
    if len({k.latency for k, _ in cases}) > 1:
        out.append(_rtt_cost_table(cases, result))
    return out + [t for t in (_hop_table(rtt), _remote_table(cases), _retries_table(cases), _client_cost_table(cases))
                  if t is not None]


def _hop_table(rtt: dict[str, float]) -> Table | None:
    """The FDW hop per path: a one-row foreign scan from the external server beside the round trip."""
    rows = [[path.removesuffix(HOP), rtt.get(path.removesuffix(HOP)), scan,
             scan / rtt[path.removesuffix(HOP)] if rtt.get(path.removesuffix(HOP)) else None]
            for path, scan in sorted(rtt.items()) if path.endswith(HOP)]
    if not rows:
        return None
    return Table("The FDW hop: a one-row foreign scan from the external server",
                 ["Path", "Round trip from here, ms", "Foreign scan, ms", "Scan / round trip"], rows,
                 ["Medians of the probes before and after every round: SELECT 1 from this machine through the path, "
                  "and on the external server a one-row SELECT of a foreign table (postgres_fdw's transaction and "
                  "cursor round trips over the same path, and its own work)."])


def counted(cases: Cases) -> str:
    """How the run counted its remote statements (before format 3: over the timed run)."""
    if not any("statement_pass" in m.evidence for _, c in cases for m in c.ok):
        return "Counted by pg_stat_statements on the source over each measurement (calls / transactions)."
    return ("Counted by pg_stat_statements on the source in two untimed passes after each measurement (the same "
            "pgbench command, -t 1 and -t N per client; the difference of their calls over the difference of "
            "their transactions), so that tracking statements costs the timed run nothing.")


def _remote_table(cases: Cases) -> Table | None:
    """What postgres_fdw sent to the source per transaction, counted there (pg_stat_statements)."""
    rows = []
    for k, c in cases:
        s = c.summary("remote_statements_per_txn")
        if s is None:
            continue
        rows_per_call = c.summary("remote_rows_per_fetch")
        rows.append([k.bench, k.pg, s.median, s.ci_text, rows_per_call.median if rows_per_call else None,
                     _remote_top(c)])
    if not rows:
        return None
    return Table("Remote statements per transaction (measured on the source)",
                 ["Bench", "PG", "Statements per txn (median)", "95% CI", "Rows per FETCH", "Most called"], rows,
                 [explains(cases)] + [counted(cases) + " The round trips the 'Cost of a round trip' table fits, "
                                      "counted instead of fitted."],
                 detail=(5,))


def _remote_top(case: CaseResult) -> str:
    """The statements postgres_fdw sent most in the last round's longer pass, with their calls (runs
    before format 3 counted them over the timed run)."""
    m = case.ok[-1]
    passes = m.evidence.get("statement_pass", {}).get("passes")
    statements = passes[-1]["statements"] if passes else \
        m.evidence.get("servers", {}).get("source", {}).get("statements", [])
    return "; ".join(f"{' '.join(st['query'].split()[:3])} x{st['calls']}" for st in statements[:4]) or "—"


def explains(cases: Cases) -> str:
    """One line computed from the evidence: why the FDW path of the first RO case costs what it costs."""
    twins = BASELINE.twins(c for _, c in cases)
    for k, c in cases:
        local = twins.get(c.case_id)
        statements, latency = c.median("remote_statements_per_txn"), c.median("latency_ms")
        if k.workload != "ro" or local is None or statements is None or latency is None:
            continue
        local_ms = local.median("latency_ms") or 0.0
        return (f"What explains it: {k.bench} sends {statements:.1f} statements to the source per transaction; "
                f"its latency is {latency:.3f} ms against {local_ms:.3f} ms local, "
                f"{(latency - local_ms) / statements * 1000:.0f} µs per remote statement.")
    return "What explains it: no RO case through postgres_fdw with its local twin in this run."


def _aggregate_table(title: str, metric: str, cases: Cases, rtt: dict[str, float],
                     published: dict[tuple, Published]) -> Table:
    rows = []
    for k, c in cases:
        s = c.summary(metric)
        if s is None:
            continue
        ref = published.get((k.workload, k.target, k.clients)) if k.latency == DIRECT and not k.hops else None
        rows.append([k.bench, k.workload_label, TARGET_LABEL[k.target], k.clients, k.pg, k.path_text(rtt),
                     s.max, s.min, s.mean, s.median, s.ci_text, s.n, ref.mean if ref else None])
    return Table(title, ["Bench", "Type", "Target", "Clients", "PG", PATH_COLUMN, "Max", "Min", "Mean", "Median",
                         "95% CI of median", "n", "Published mean"], rows, [PUBLISHED_NOTE, COVERAGE_NOTE],
                 align_left=6, detail=(1, 2, 3, 6, 7, 8))


def _overheads(cases: Cases) -> dict[Key, Summary]:
    """TPS of local / TPS through each FDW target, paired by round (the study's baseline)."""
    found = BASELINE.ratios((c for _, c in cases), "tps")
    return {k: found[c.case_id][1] for k, c in cases if c.case_id in found}


def _ratio_table(cases: Cases, rtt: dict[str, float]) -> Table:
    ratios = _overheads(cases)
    rows = [[k.bench, k.workload_label, k.clients, TARGET_LABEL[k.target], k.pg, k.path_text(rtt), r.median,
             r.ci_text, r.verdict(1.0),
             published_tps_ratio(k.workload, k.target, k.clients) if k.latency == DIRECT else None]
            for k, r in ratios.items()]
    notes = ["Ratio: TPS of local / TPS through the target, paired by round (measured back to back); "
             "above 1 = the FDW path is slower. Published: from the means of seed 000's table."]
    for pg, clients in sorted({(k.pg, k.clients) for k, _ in cases}):
        ro, rw = (ratios.get(Key(w, "fdw_external", clients, DIRECT, pg)) for w in ("ro", "rw"))
        if ro and rw:
            notes.append(f"PG {pg}, {clients} client(s), FDW_external: RO overhead {ro.median:.2f}x "
                         f"{'above' if ro.median > rw.median else 'NOT above'} RW overhead {rw.median:.2f}x "
                         "(seed 000: RO about 6.7x, far above RW).")
    return Table("Overhead: TPS local / TPS target", ["Bench", "Type", "Clients", "Target", "PG", PATH_COLUMN,
                                                     "Ratio (median)", "95% CI", "Differs from 1", "Published ratio"],
                 rows, notes, align_left=6, detail=(1, 2, 3, 5))


def _rtt_cost_table(cases: Cases, result: StudyResult) -> Table:
    """Latency per transaction against the round trip measured in the same round."""
    round_rtt = result.rtt_by_round()
    points: dict[tuple, tuple[list[float], list[float]]] = {}
    counted: dict[tuple, list[float]] = {}
    for k, c in cases:
        if k.target not in REMOTE_TARGETS:
            continue
        group = (k.workload_label + k.knob_text, k.target, k.clients, k.pg)
        counted.setdefault(group, []).extend(c.values("remote_statements_per_txn").values())
        xs, ys = points.setdefault(group, ([], []))
        for round_no, latency in c.values("latency_ms").items():
            x = round_rtt.get((k.path.id, round_no))
            if x is not None:
                xs.append(x)
                ys.append(latency)
    rows = []
    for (workload, target, clients, pg), (xs, ys) in sorted(points.items()):
        try:
            fit = linear_fit(xs, ys)
        except ValueError:
            continue
        statements = counted.get((workload, target, clients, pg))
        rows.append([workload, clients, TARGET_LABEL[target], pg, fit.n, fit.slope,
                     f"[{fit.slope_low:.2f}, {fit.slope_high:.2f}]", fit.intercept, fit.r2,
                     statistics.median(statements) if statements else None])
    return Table("Cost of a round trip: latency per transaction against measured RTT",
                 ["Type", "Clients", "Target", "PG", "Points", "ms per ms of RTT", "95% CI",
                  "Latency at 0 RTT, ms", "R²", "Remote statements per txn (counted)"], rows,
                 ["Slope of pgbench's latency average against the link's round trip measured in the same round: "
                  "about the number of network round trips each transaction makes through postgres_fdw; beside "
                  "it, the statements the source counted per transaction (pg_stat_statements), one round trip "
                  "each."],
                 align_left=4)


def _retries_table(cases: Cases) -> Table | None:
    rows = [[k.bench, c.median("failures"), c.median("retries"), c.median("initial_connection_ms")]
            for k, c in cases if any(max(c.values(x).values(), default=0) > 0 for x in ("failures", "retries"))]
    if not rows:
        return None
    return Table("Serialization failures and retries per measurement (median)",
                 ["Bench", "Failed txns", "Retries", "Init. conn. ms"], rows,
                 ["Failed: still failing after --max-tries; retried transactions are counted in TPS."])


def _client_cost_table(cases: Cases) -> Table | None:
    """What the pgbench process cost: is the client the bottleneck on this machine?"""
    rows = []
    for k, c in cases:
        wall, user, system = c.values("wall_ms"), c.values("cpu_user_ms"), c.values("cpu_sys_ms")
        busy = [100 * (user[r] + system[r]) / wall[r] for r in wall.keys() & user.keys() & system.keys() if wall[r]]
        if not busy:
            continue
        rows.append([k.bench, k.pg, c.median("wall_ms"), c.median("cpu_user_ms"), c.median("cpu_sys_ms"),
                     summarise(busy).median, c.median("peak_rss_mib"), len(busy)])
    if not rows:
        return None
    return Table("pgbench's own cost per measurement (median)",
                 ["Bench", "PG", "Wall, ms", "CPU user, ms", "CPU sys, ms", "CPU, % of wall", "Peak RSS, MiB", "n"],
                 rows, ["From the kernel's accounting of the pgbench process (wait4): near 100% of one core per "
                        "pgbench thread, the client and not the path would set the pace."])


# -- charts (report --html) -----------------------------------------------------------------------
def plots(result: StudyResult) -> list[Plot]:
    """TPS and latency by target (grouped bars per workload and clients, with the 95% CI of the
    median as error bars); with several latencies, TPS and latency against the path's measured
    round trip (x = median of its probes)."""
    cases = cases_of(result)
    if not cases:
        return []
    # The major names a category only when the run has several (Key.order() sorts by it).
    several_majors = len({k.pg for k, _ in cases}) > 1
    extra = {k: f" · PG {k.pg}" if several_majors else "" for k, _ in cases}
    out = [_target_bars(cases, extra, "tps", "Throughput by target (TPS, without initial connection time)",
                        "Throughput, transactions/s"),
           _target_bars(cases, extra, "latency_ms", "Latency by target (pgbench latency average)",
                        "Latency per transaction, ms")]
    if len({k.latency for k, _ in cases}) > 1:
        rtt = result.rtt()
        out += [_rtt_lines(cases, extra, rtt, "tps", "Throughput against measured round-trip time",
                           "Throughput, transactions/s", log_y=True),
                _rtt_lines(cases, extra, rtt, "latency_ms", "Latency per transaction against measured round-trip time",
                           "Latency per transaction, ms", log_y=False,
                           extra_note="The slope is about the number of network round trips per transaction "
                                      "(fitted in the table 'Cost of a round trip').")]
    out.append(_remote_bars(cases))
    return [p for p in out if p is not None and any(p.series.values())]


def _remote_bars(cases: Cases) -> Plot | None:
    """Remote statements per transaction and rows per FETCH, per FDW case (counted on the source)."""
    series: dict[str, list[Point]] = {"statements per transaction": [], "rows per FETCH": []}
    for k, c in cases:
        for name, metric in (("statements per transaction", "remote_statements_per_txn"),
                             ("rows per FETCH", "remote_rows_per_fetch")):
            s = c.summary(metric)
            if s is not None:
                series[name].append(Point(k.bench, s.median, s.ci_low, s.ci_high))
    if not series["statements per transaction"]:
        return None
    return Plot("What postgres_fdw sent to the source", "Bench", "Per transaction / per FETCH", "bar", series,
                notes=[counted(cases) + " Median over rounds, error bars: 95% CI of the median."])


def _coverage_note(summaries: list[Summary]) -> str:
    n_min = min(s.n for s in summaries)
    worst = min(s.coverage for s in summaries)
    text = ("Bars and points: median of the rounds; error bars: 95% confidence interval of the median "
            "(order statistics, no assumption about the distribution)")
    if worst < 0.95:
        text += (f". With {n_min} rounds the widest interval, min to max, covers only {worst:.0%}: "
                 "run more rounds (6 or more) for 95%")
    return text + "."


def _clients_text(clients: int) -> str:
    return f"{clients} client{'s' if clients != 1 else ''}"


def _target_bars(cases: Cases, extra: dict[Key, str], metric: str, title: str, y_label: str) -> Plot | None:
    points: dict[str, list[Point]] = {}
    summaries = []
    for k, c in cases:
        s = c.summary(metric)
        if s is None:
            continue
        summaries.append(s)
        name = TARGET_LABEL[k.target] + (f" over {k.latency} link" if k.latency != DIRECT else "")
        category = f"{k.workload_label} · {_clients_text(k.clients)}{extra[k]}{k.knob_text}"
        points.setdefault(name, []).append(Point(category, s.median, s.ci_low, s.ci_high))
    if not summaries:
        return None
    medians = [s.median for s in summaries]
    log_y = min(medians) > 0 and max(medians) / min(medians) > 20
    notes = [_coverage_note(summaries)]
    if log_y:
        notes.append("Logarithmic axis: the values span more than a factor of 20; equal steps are equal ratios.")
    return Plot(title, "pgbench workload (RO: select only, RW: TPC-B-like) · concurrent clients", y_label, "bar",
                points, log_y=log_y, notes=notes)


def _rtt_lines(cases: Cases, extra: dict[Key, str], rtt: dict[str, float], metric: str, title: str, y_label: str,
               log_y: bool, extra_note: str | None = None) -> Plot | None:
    points: dict[str, list[Point]] = {}
    summaries = []
    for k, c in cases:
        s = c.summary(metric)
        x = rtt.get(k.path.id) if k.target in REMOTE_TARGETS else None
        if s is None or x is None:
            continue
        summaries.append(s)
        name = f"{k.workload_label} · {_clients_text(k.clients)} · {TARGET_LABEL[k.target]}{extra[k]}{k.knob_text}"
        points.setdefault(name, []).append(Point(x, s.median, s.ci_low, s.ci_high))
    if not summaries:
        return None
    notes = [_coverage_note(summaries),
             "x: the round trip of the link to the source, median of its probes before and after every round."]
    if extra_note:
        notes.append(extra_note)
    return Plot(title, "Measured round-trip time to the source, ms", y_label, "line", points, log_y=log_y,
                notes=notes)
