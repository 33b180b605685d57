"""remote-sampling's tables and plots, read from the result model.

Sampling: duration against fraction per method, direct and through postgres_fdw, and per-row
costs fitted from it beside the seed's (0.2 us to read and sample a row, 1.5 us to send one).
ANALYZE: duration per analyze_sampling and statistics target, with the error of the statistics
each sample gave and the sampling clause postgres_fdw sent.
The seed's conclusions as ratios of durations paired by round: through the FDW over direct,
full transfer over sampling on the source, ANALYZE of the foreign table over the local one's.
"""

from __future__ import annotations

import re
from collections import defaultdict

from ...references import SAMPLING_US_PER_ROW
from ...report import Plot, Point, Table
from ...report.render import count
from ...results.model import CaseResult, StudyResult
from ...servers.paths import DIRECT, NetworkPath, latency_ms
from ...stats import Fit, Summary, linear_fit
from .spec import BASELINE, ANALYZE_MODES, FULL_TRANSFER, SAMPLING_METHODS, STATISTICS_ERRORS, row_count

MEDIAN_NOTE = "Median of the rounds, error bars: 95% CI of the median."
TOO_FEW = "too few points"
# What each ratio divides, in the order a case's rows are listed.
FDW_VS_DIRECT, FULL_VS_METHOD, FOREIGN_VS_LOCAL = COMPARISONS = ("fdw / direct", "full / method", "foreign / local")


def study_tables(result: StudyResult) -> list[Table]:
    tables = []
    sampling = _measured(result, "sampling")
    if sampling:
        on_source = direct_ratio_table(sampling)
        tables += [sampling_table(sampling, result.rtt()), *([on_source] if on_source else []),
                   per_row_table(sampling, result.rtt())]
    analyze = _measured(result, "analyze")
    if analyze:
        tables.append(analyze_table(analyze))
    ratios = ratio_table(sampling + analyze, result.rtt())
    return tables + ([ratios] if ratios else [])


def _measured(result: StudyResult, test: str) -> list[CaseResult]:
    """The test's cases with at least one successful round (failures are tabled by the shared code)."""
    return [c for c in result.cases if c["test"] == test and c.ok]


def _link(case: CaseResult, rtt: dict[str, float]) -> str:
    """The path to the source with its measured round trip: 'direct, 0.05 ms', '2ms link, 2.31 ms, TLS'."""
    return NetworkPath(case["pg"], "source", case["latency"]).describe(rtt) + (", TLS" if _tls(case) else "")


def _tls(case: CaseResult) -> bool:
    """Whether the case's FDW hop has TLS (--tls on)."""
    return case.get("tls", "off") == "on"


def _size_order(case: CaseResult) -> tuple:
    return case["pg"], row_count(case["rows"]), latency_ms(case["latency"])


def sampling_table(cases: list[CaseResult], rtt: dict[str, float]) -> Table:
    rows = []
    for c in sorted(cases, key=lambda c: (*_size_order(c), c["method"], float(c["fraction"]), c["access"])):
        s = c.summary("duration_ms")
        link = "—" if c["access"] == "direct" else _link(c, rtt)
        rows.append([c["pg"], c["rows"], link, c["method"], f"{float(c['fraction']):g}", c["access"], s.median,
                     s.ci_text, s.n, count(c.median("rows_transferred"))])
    return Table("Sampling: duration against fraction, per method, direct vs through postgres_fdw",
                 ["PG", "Rows", "Link (measured RTT)", "Method", "Fraction", "Access", "Median ms",
                  "95% CI", "n", "Rows moved"], rows,
                 ["full = transfer every row and sample on arrival (postgres_fdw's ANALYZE before 16); "
                  "system/bernoulli/random = sample where the table is, transfer only the sample."],
                 align_left=6, detail=(8,))


DIRECT_NOTES = [
    "full / method: on the source, the duration of reading every row and sampling on arrival (full) over that "
    "of sampling with the method, at the same rows, fraction and major, divided round by round: the median and "
    "95% CI of those ratios; below 1 = the method costs more than reading everything.",
    "Seed 004, direct: \"the various sampling methods start losing to seqscan fairly soon - 'random' is "
    "consistently slower, 'bernoulli' starts losing at ~30%, 'system' as ~80%\"; on 100M rows (about 21 GB, with "
    "8 GB of RAM) \"the 'system' method ... quickly spikes to ~2x of the 'full' method when sampling ~20% of "
    "the table, and then gradually improves again\" (full / method about 0.5), which the seed puts down to I/O "
    "that readahead cannot help: a table that does not fit in memory.",
]


def direct_ratio_table(cases: list[CaseResult]) -> Table | None:
    """Where sampling on the source stops paying: reading everything over each method, paired by round."""
    direct = [c for c in cases if c["access"] == "direct"]
    ratios = FULL_TRANSFER.ratios(direct, "duration_ms")
    rows = []
    for c in sorted(direct, key=_ratio_order):
        if c.case_id in ratios:
            r = ratios[c.case_id][1]
            rows.append([c["pg"], c["rows"], c["method"], f"{float(c['fraction']):g}", r.median, r.ci_text, r.n,
                         r.verdict(1.0)])
    if not rows:
        return None
    return Table("Sampling on the source: reading every row / sampling first, paired by round",
                 ["PG", "Rows", "Method", "Fraction", "full / method", "95% CI", "n", "Differs from 1"], rows,
                 DIRECT_NOTES, align_left=3, detail=(6, 7))


def per_row_table(cases: list[CaseResult], rtt: dict[str, float]) -> Table:
    """Per-row costs fitted from the measurements, beside the seed's 0.2 / 1.5 / 5.5 us."""
    rows = []
    for pg in sorted({c["pg"] for c in cases}):
        ours = [c for c in cases if c["pg"] == pg]
        rows.append([pg, "read and sample a row (direct random())", "—", *_fit_cells(_fit(read_points(ours))),
                     SAMPLING_US_PER_ROW["read_and_sample"]])
        through = defaultdict(list)
        for c in ours:
            if c["access"] == "fdw":
                through[(c["latency"], _tls(c))].append(c)
        for latency, with_tls in sorted(through, key=lambda k: (latency_ms(k[0]), k[1])):
            ref = SAMPLING_US_PER_ROW["send_localhost"] if latency == DIRECT and not with_tls else None
            hop = through[(latency, with_tls)]
            rows.append([pg, "send a row through postgres_fdw", _link(hop[0], rtt),
                         *_fit_cells(_fit(send_points(hop, ours))), ref])
    notes = ["Published: seed 004 — reading+sampling about 0.2 us, sending about 1.5 us on localhost and "
             "5.5 us on a LAN (about 0.1 ms RTT); compare with the link of similar measured RTT."]
    if any(row[4] == TOO_FEW for row in rows):
        notes.append(f"{TOO_FEW}: reading is fitted from direct random() sampling at 2+ table sizes; sending from "
                     "the same samples measured directly and through the FDW, at 2+ sizes or fractions.")
    return Table("Per-row costs fitted from the measurements (least squares, us per row)",
                 ["PG", "Cost", "Link (measured RTT)", "us per row", "95% CI", "Points", "Published us"], rows,
                 notes, align_left=3, detail=(5,))


def read_points(cases: list[CaseResult]) -> list[tuple[float, float]]:
    """(rows in the table, ms) of every round of direct random() sampling: it reads every row."""
    return [(row_count(c["rows"]), ms) for c in cases if c["access"] == "direct" and c["method"] == "random"
            for ms in c.values("duration_ms").values()]


def send_points(fdw_cases: list[CaseResult], cases: list[CaseResult]) -> list[tuple[float, float]]:
    """(rows sent, ms through the FDW minus ms direct in the same round) for the same sample (the
    study's baseline: the same major too)."""
    twins = BASELINE.twins(cases)
    points = []
    for c in fdw_cases:
        base = twins[c.case_id].values("duration_ms") if c.case_id in twins else {}
        n = row_count(c["rows"])
        sent = n if c["method"] == "full" else n * float(c["fraction"])
        points += [(sent, ms - base[r]) for r, ms in c.values("duration_ms").items() if r in base]
    return points


def analyze_table(cases: list[CaseResult]) -> Table:
    order = {mode: i for i, mode in enumerate(ANALYZE_MODES)}
    rows = []
    for c in sorted(cases, key=lambda c: (*_size_order(c), int(c["stats_target"]), order[c["analyze_sampling"]])):
        s = c.summary("duration_ms")
        remote = [sql for sql in c.raw("remote_sql").values() if sql]
        rows.append([c["pg"], c["rows"], c["latency"], int(c["stats_target"]), c["analyze_sampling"], s.median,
                     s.ci_text, s.n, count(c.median("rows_sampled")), *(c.median(k) for k in STATISTICS_ERRORS),
                     sampling_clause(remote[-1] if remote else None)])
    return Table("ANALYZE: local table vs foreign table per analyze_sampling, with the error of its statistics",
                 ["PG", "Rows", "Link", "Target", "Sampling", "Median ms", "95% CI", "n", "Sample rows",
                  "n_distinct rel. err", "null_frac err", "MCV freq err", "Histogram err", "Remote sampling"],
                 rows,
                 ["Errors against the whole table: n_distinct of column a (relative), null_frac and most common "
                  "values' frequencies of c (absolute), histogram of b (mean relative deviation of bucket shares "
                  "from equal). Remote sampling: what the SQL postgres_fdw sent does (pg_stat_statements). "
                  "In a terminal the error columns need report --wide."],
                 align_left=5, detail=(9, 10, 11, 12))


RATIO_NOTES = [
    "Each ratio divides two cases' durations measured in the same round, round by round: the median and 95% CI "
    "of those ratios, n = rounds measured on both sides (a round missing on either side is no pair).",
    "fdw / direct: the sample (rows, method, fraction, major) taken through postgres_fdw over the same sample "
    "taken on the source, which crosses no link (one direct case serves every link). full / method: through "
    "postgres_fdw, sending every row and sampling on arrival over sampling on the source with the method and "
    "sending the sample, at the same rows, fraction, link and major; above 1 = sampling remotely is cheaper. "
    "foreign / local: ANALYZE of the foreign table with that analyze_sampling over ANALYZE of the table itself "
    "on the source, at the same rows, statistics target and major (one local case serves every link); below 1 = "
    "ANALYZE through postgres_fdw is faster.",
    "Seed 004, sampling through the FDW: \"all the methods clearly win over just transferring everything and only "
    "then doing the sampling\" (full / method above 1). ANALYZE, for 10k and 10M rows: \"We're very close to the "
    "'local' results, because we save a lot on copying only some of the rows\"; and \"if you look at the 10M "
    "result, you may notice that *all* the sampling methods beat ANALYZE on the local table\", bernoulli and random "
    "\"start winning after crossing ~1%\": \"it's about 3x faster to ANALYZE a table through FDW than directly\" "
    "(foreign / local below 1 for system, bernoulli and random on 10M rows, the paper preset; off reads every row).",
]


def paired_ratios(cases: list[CaseResult]) -> list[tuple[CaseResult, str, Summary]]:
    """(case, comparison, its ratio of durations paired by round) for every case measured in the
    same rounds as what it is compared with: its baseline (fdw / direct, foreign / local), and
    through the FDW, the full transfer of the same fraction (full / method)."""
    through = [c for c in cases if c["test"] == "sampling" and c["access"] == "fdw"]
    base, full = BASELINE.ratios(cases, "duration_ms"), FULL_TRANSFER.ratios(through, "duration_ms")
    found = [(c, FDW_VS_DIRECT if c["test"] == "sampling" else FOREIGN_VS_LOCAL, base[c.case_id][1])
             for c in cases if c.case_id in base]
    found += [(c, FULL_VS_METHOD, full[c.case_id][1]) for c in through if c.case_id in full]
    return sorted(found, key=lambda f: (*_ratio_order(f[0]), COMPARISONS.index(f[1])))


def _ratio_order(case: CaseResult) -> tuple:
    """Sampling by method then fraction, ANALYZE by statistics target then mode."""
    if case["test"] == "sampling":
        return *_size_order(case), 0, SAMPLING_METHODS.index(case["method"]), float(case["fraction"])
    return *_size_order(case), 1, int(case["stats_target"]), ANALYZE_MODES.index(case["analyze_sampling"])


def ratio_table(cases: list[CaseResult], rtt: dict[str, float]) -> Table | None:
    """The seed's conclusions, each a ratio of durations within this run, paired by round."""
    rows = []
    for c, comparison, r in paired_ratios(cases):
        sampling = c["test"] == "sampling"
        rows.append([c["pg"], c["rows"], _link(c, rtt), c["method"] if sampling else c["analyze_sampling"],
                     f"{float(c['fraction']):g}" if sampling else f"target {c['stats_target']}", comparison,
                     r.median, r.ci_text, r.n, r.verdict(1.0)])
    if not rows:
        return None
    return Table("Ratios paired by round: through postgres_fdw / direct, full transfer / remote sampling, "
                 "foreign / local ANALYZE",
                 ["PG", "Rows", "Link (measured RTT)", "Sampling", "Fraction/target", "Ratio",
                  "Median", "95% CI", "n", "Differs from 1"], rows, RATIO_NOTES, align_left=6, detail=(8, 9))


def sampling_clause(remote_sql: str | None) -> str:
    if not remote_sql:
        return "—"
    m = re.search(r"TABLESAMPLE \w+|random\(\) <|WHERE[^)]*random", remote_sql, re.I)
    return m.group(0) if m else "none (every row)"


def _fit(points: list[tuple[float, float]]) -> Fit | None:
    try:
        return linear_fit([x for x, _ in points], [y for _, y in points])
    except ValueError:
        return None


def _fit_cells(fit: Fit | None) -> list:
    if fit is None:
        return [None, TOO_FEW, 0]
    # ms per row -> us per row
    return [fit.slope * 1000, f"[{fit.slope_low * 1000:.3f}, {fit.slope_high * 1000:.3f}]", fit.n]


# -- plots ------------------------------------------------------------------------------------
def study_plots(result: StudyResult) -> list[Plot]:
    """The seed's curves: duration against fraction per method, direct and through the FDW
    (one chart per table size and path); ANALYZE duration and statistics error per mode."""
    rtt = result.rtt()
    return sampling_plots(_measured(result, "sampling"), rtt) + analyze_plots(_measured(result, "analyze"), rtt)


def sampling_plots(cases: list[CaseResult], rtt: dict[str, float]) -> list[Plot]:
    charts: dict[tuple, list[CaseResult]] = defaultdict(list)
    for c in sorted(cases, key=lambda c: (*_size_order(c), c["access"])):
        charts[(c["pg"], c["rows"], c["access"], c["latency"], _tls(c))].append(c)
    plots = []
    for (pg, size, access, *_), chart in charts.items():
        where = "directly on the source" if access == "direct" else f"through postgres_fdw ({_link(chart[0], rtt)})"
        series = {method: [_median_point(float(c["fraction"]), c) for c in
                           sorted(chart, key=lambda c: float(c["fraction"])) if c["method"] == method]
                  for method in SAMPLING_METHODS}
        plots.append(Plot(f"Sampling {size} rows {where}, PostgreSQL {pg}", "Fraction of the table sampled",
                          "Duration, ms", "line", {k: v for k, v in series.items() if v},
                          notes=[f"{MEDIAN_NOTE} full = every row read (and, through the FDW, sent) then "
                                 "sampled; the others sample first."]))
    return plots


def analyze_plots(cases: list[CaseResult], rtt: dict[str, float]) -> list[Plot]:
    charts: dict[tuple, list[CaseResult]] = defaultdict(list)
    for c in sorted(cases, key=_size_order):
        charts[(c["pg"], c["rows"], c["latency"])].append(c)
    plots = []
    for (pg, size, latency), chart in charts.items():
        link = NetworkPath(pg, "source", latency).describe(rtt)
        targets = sorted({c["stats_target"] for c in chart}, key=int)
        by = {(c["analyze_sampling"], c["stats_target"]): c for c in chart}
        for title, metric, label in (("ANALYZE duration", "duration_ms", "Duration, ms"),
                                     ("Histogram error after ANALYZE", "histogram_error",
                                      "Mean relative deviation of bucket shares")):
            series = {f"target {t}": [_median_point(mode, by[(mode, t)], metric) for mode in ANALYZE_MODES
                                      if (mode, t) in by and by[(mode, t)].values(metric)] for t in targets}
            if any(series.values()):
                plots.append(Plot(f"{title}, {size} rows, PostgreSQL {pg} ({link})",
                                  "ANALYZE of the local table, or of the foreign table with analyze_sampling",
                                  label, "bar", series, notes=[MEDIAN_NOTE]))
    return plots


def _median_point(x: str | float, case: CaseResult, metric: str = "duration_ms") -> Point:
    s = case.summary(metric)
    return Point(x, s.median, s.ci_low, s.ci_high)
