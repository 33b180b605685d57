"""interfaces-fidelity's tables and chart, read from the result model: each client's wall time
over the reference tool's (paired by round), and what each process cost."""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from ...report import Plot, Point, Table
from ...results.model import CaseResult, StudyResult
from ...stats import Summary
from .spec import (BASELINE, DIAGNOSTIC, LOOP_CPU_TARGET, LOOP_WALL_BOUND, REFERENCE_TOOL, TARGET, TOOLS, TRANSPORTS,
                   WORKLOADS, loop_verdict, verdict)


class Key(NamedTuple):
    pg: str
    workload: str
    transport: str
    tool: str

    @classmethod
    def of(cls, case: CaseResult) -> "Key":
        return cls(case["pg"], case["workload"], case["transport"], case["tool"])

    def order(self) -> tuple:
        return (int(self.pg), WORKLOADS.index(self.workload), TRANSPORTS.index(self.transport),
                TOOLS.index(self.tool))


class Pair(NamedTuple):
    """A client's case beside its reference's, and the ratio of their durations."""
    key: Key
    client: CaseResult
    reference: CaseResult
    ratio: Summary


def measured(result: StudyResult) -> list[tuple[Key, CaseResult]]:
    return sorted(((Key.of(c), c) for c in result.cases if c.ok), key=lambda kc: kc[0].order())


def pairs(result: StudyResult) -> list[Pair]:
    """Every client case whose reference was measured, with its duration ratio paired by round."""
    cases = measured(result)
    found = BASELINE.ratios((c for _, c in cases), "duration_ms")
    return [Pair(key, c, *found[c.case_id]) for key, c in cases if c.case_id in found]


class LoopFigure(NamedTuple):
    """One measure of a client's 1-row loop beside pgbench's: each a query, and their ratio paired by round."""
    key: Key
    measure: str                # "CPU" (user + sys) or "wall"
    reference_us: float | None
    client_us: float | None
    ratio: Summary
    bound: float

    @property
    def verdict(self) -> str:
        return loop_verdict(self.key.tool, self.ratio, self.bound)


LOOP_MEASURES = {"CPU": ("cpu_ms", LOOP_CPU_TARGET), "wall": ("duration_ms", LOOP_WALL_BOUND)}


def loop_figures(result: StudyResult) -> list[LoopFigure]:
    """Every loop pair's CPU (user + sys of the whole process, wait4) and wall time (fork to exit)
    over the same number of queries on both sides: process start and connection count on both, alike
    (about 10M instructions each under callgrind: 0.1 us a query of CPU at 50k)."""
    out = []
    for key, client, ref, _ in pairs(result):
        if key.workload != "loop":
            continue
        for measure, (metric, bound) in LOOP_MEASURES.items():
            r = BASELINE.ratio(client, ref, metric)
            if r is not None:
                out.append(LoopFigure(key, measure, _us_a_query(ref, metric), _us_a_query(client, metric), r, bound))
    return out


def _us_a_query(c: CaseResult, metric: str) -> float | None:
    """The median of `metric` (ms) over the queries: the loop reads one row a query."""
    value, queries = c.median(metric), c.median("rows")
    return value * 1000 / queries if value is not None and queries else None


def _seconds(c: CaseResult, metric: str) -> float | None:
    m = c.median(metric)
    return m / 1000 if m is not None else None


def tables(result: StudyResult) -> list[Table]:
    out = [_ratio_table(pairs(result)), _loop_table(loop_figures(result)), _process_table(measured(result))]
    return [t for t in out if t is not None]


def _ratio_table(found: list[Pair]) -> Table | None:
    rows = []
    for key, client, ref, r in found:
        w = BASELINE.ratio(client, ref, "work_ms") if key.workload == "loop" else None
        rows.append([key.pg, key.workload, key.transport, key.tool, _mode(client), REFERENCE_TOOL[key.workload],
                     _seconds(ref, "duration_ms"), _seconds(client, "duration_ms"), r.median, r.ci_text,
                     w.median if w else None, w.ci_text if w else None, verdict(key.tool, r)])
    if not rows:
        return None
    notes = ["Ratio: the client's wall time over the reference tool's (both from fork to exit, os.wait4), "
             "paired by round. Work only (loop): without connection and process start (the client's total "
             "minus connect; pgbench's transactions / tps).",
             f"Target: libpq at most {TARGET - 1:.0%} slower than the reference (ratio <= {TARGET}); "
             "'met' when the whole 95% interval is at or below it, 'missed' when it is wholly above, "
             "'undecided' when it spans it (more rounds, a quieter machine). Other clients: findings.",
             "copy: ODBC has no COPY, it runs its normal fetch. The clients checksum every byte (their "
             "contract, clients/CONTRACT.md), the reference tools do not: "
             "libpq-nochecksum is pgpb_libpq built without that loop (not a contract client; its rows "
             "and bytes are still checked), so that libpq's ratio splits into the client's driver use "
             "and the checksum's cost."]
    return Table("Fidelity: each client against the reference tool (same server, table, transport, round)",
                 ["PG", "Workload", "Transport", "Client", "Mode", "Reference", "Reference s", "Client s", "Ratio",
                  "95% CI", "Work ratio", "Work 95% CI", "Target"], rows, notes, align_left=6,
                 detail=(0, 4, 5, 6, 7, 10, 11))


def _loop_table(found: list[LoopFigure]) -> Table | None:
    rows = [[f.key.pg, f.key.transport, f.key.tool, f.measure, f.reference_us, f.client_us, f.ratio.median,
             f.ratio.ci_text, f.bound, f.verdict, f.ratio.n] for f in found]
    if not rows:
        return None
    notes = ["A query's CPU (user + sys of each process, wait4) and wall time (fork to exit: the first table's "
             "ratio), in us: the process's over its queries, process start and connection included; ratios paired by round.",
             f"Bound: libpq's CPU a query at most {LOOP_CPU_TARGET - 1:.0%} above pgbench's, its wall time "
             f"within {LOOP_WALL_BOUND - 1:.0%}; 'met' when the whole 95% interval is at or below it, "
             "'undecided' when the interval spans it (more rounds, a quieter machine).",
             "Both send one query and read its row before the next (pgbench: PQsendQuery and PQgetResult; the "
             "client: PQexec). The client also renders and checksums every row (its contract); "
             f"libpq-nochecksum is the client without the checksum{_checksum_cost(found)}."]
    return Table("Fidelity: the 1-row loop against pgbench, CPU and wall time a query",
                 ["PG", "Transport", "Client", "Measure", "pgbench us", "Client us", "Ratio", "95% CI", "Bound",
                  "Verdict", "n"], rows, notes, align_left=4, detail=(0, 8, 10))


def _checksum_cost(found: list[LoopFigure]) -> str:
    """What the checksum cost a query, as measured: libpq's CPU a query minus libpq-nochecksum's."""
    cpu = {(f.key.pg, f.key.transport, f.key.tool): f.client_us for f in found
           if f.measure == "CPU" and f.client_us is not None}
    costs = [f"{cpu[pg, transport, 'libpq'] - us:.2f} us (PG {pg}, {transport})"
             for (pg, transport, tool), us in cpu.items()
             if tool == DIAGNOSTIC and (pg, transport, "libpq") in cpu]
    return f": libpq's CPU a query minus its, median against median, {', '.join(costs)}" if costs else ""


def _mode(c: CaseResult) -> str:
    return next(iter(c.raw("mode").values()), "")


def _process_table(cases: list[tuple[Key, CaseResult]]) -> Table | None:
    twins = BASELINE.twins(c for _, c in cases)
    rows = []
    for key, c in cases:
        ref = twins.get(c.case_id)
        extra = None
        if key.workload == "copy" and key.tool != "reference" and ref and c.median("bytes") and ref.median("cpu_ms"):
            extra = (c.median("cpu_ms") - ref.median("cpu_ms")) / 1000 / c.median("bytes") * 1e9
        rows.append([key.pg, key.workload, key.transport,
                     key.tool if key.tool != "reference" else REFERENCE_TOOL[key.workload], _mode(c),
                     _seconds(c, "duration_ms"), _seconds(c, "cpu_user_ms"), _seconds(c, "cpu_sys_ms"), extra,
                     c.median("peak_rss_mib"), len(c.values("duration_ms"))])
    if not rows:
        return None
    return Table("Fidelity: wall time, CPU and peak memory of each process (medians)",
                 ["PG", "Workload", "Transport", "Tool", "Mode", "Wall s", "CPU user s", "CPU sys s",
                  "Extra CPU ns/byte", "Peak RSS MiB", "n"], rows,
                 ["Extra CPU: the client's CPU time beyond the reference tool's, per byte "
                  "of row data it received; for libpq's COPY it is the contract's checksum, the one "
                  "piece of work psql does not do. On an idle machine it "
                  "overlaps with the server's work on the other core; on a busy one it adds to the "
                  "wall time."], align_left=5, detail=(0, 4, 10))


def plots(result: StudyResult) -> list[Plot]:
    points: dict[str, list[Point]] = defaultdict(list)
    for key, _, _, r in pairs(result):
        points[f"{key.workload} · {key.transport}"].append(Point(key.tool, r.median, r.ci_low, r.ci_high))
    if not points:
        return []
    return [Plot("Client wall time over the reference tool's (psql COPY, pgbench)", "Client",
                 "Ratio client / reference", "bar", dict(points), ref_y=1.0,
                 notes=[f"Target for libpq: at most {TARGET}. Error bars: 95% CI of the paired ratio."])]

