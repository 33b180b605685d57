"""Each path's roof under load (seed 001's "FDW have a roof"): open-loop rates (pgbench -R) and
the knee of each path's p99 latency.

`--rate` is a dimension whose quiet value `max` is the closed loop (pgbench without -R: what every
run before it measured, so their case ids stay). A rate is a number of transactions per second,
or a share of the path's closed-loop TPS (`0.6x`); `--rate auto` is AUTO_STEPS, whose TPS the
study takes from a closed-loop measurement of each path made once per run and stored with it
(PINNED: a resumed run offers the same rates).

The knee: steps ordered by the rate offered, the low-load p99 is the lowest step's; a path
sustains a step while its p99 stays within KNEE_FACTOR x that. Under -R pgbench counts a
transaction's latency from its scheduled start, so the p99 includes the schedule lag (kept
apart too, schedule_lag_p99_ms): a rate the path cannot keep up with shows as a latency that
grows with the queue, whatever the latency of the transactions themselves.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Callable

from ...errors import UserError
from ...matrix import Case, StudyOptions
from ...report import Plot, Point, Table
from ...results.model import CaseResult, StudyResult
from ...tools import pgbench, pgbench_log
from ..base import StudyEnv
from .report import Cases, cases_of
from .spec import AUTO, AUTO_STEPS, CLOSED_LOOP as CLOSED

PINNED = "rate_closed_tps"     # params key: {major: {closed-loop case id: TPS}}, stored by the first session
KNEE_FACTOR = 2.0
# Rate steps log up to this many transactions a second per pgbench thread (2-4 µs each: under
# 0.4% of the thread), ten times the closed loop's: the p99 is the point of a step.
LOG_LINES_PER_THREAD_S = 1000


def closed_loop_tps(env: StudyEnv, cases: list[Case], closed_tps: Callable[[Case], float]) -> dict:
    """--rate 0.6x (auto): the closed-loop TPS of each path the shares are taken of, measured once
    (closed_tps) by the run's first session and pinned in its options, so that a resumed run offers
    the same rates; what to pin ({} when nothing new was measured)."""
    known = (env.options.params.get(PINNED) or {}).get(env.major) or {}
    stored = dict(known)
    twins = {closed_twin(c).case_id: closed_twin(c) for c in cases if share(c.get("rate", ""))}
    for case_id, twin in twins.items():
        if case_id not in stored:
            stored[case_id] = closed_tps(twin)
            env.log(f"--rate: {case_id} runs {stored[case_id]:,.0f} TPS in a closed loop")
    env.state.closed_tps = stored
    return {PINNED: {env.major: stored}} if stored != known else {}


def measure_rate(env: StudyEnv, case: Case, spec: pgbench.TimedRun) -> dict:
    """A rate step, always with its per-transaction log: sampled for what the step achieved last
    (a rate past the path's roof is offered, not run), else for the rate offered."""
    expected = min(spec.rate, env.state.last_tps.get(case.case_id) or spec.rate)
    plan = pgbench_log.LogPlan(rate=pgbench_log.sampling_rate(expected, spec.threads, LOG_LINES_PER_THREAD_S))
    metrics = pgbench.run(env.bins.path("pgbench"), dataclasses.replace(spec, log=plan))
    env.state.last_tps[case.case_id] = metrics["tps"]
    return {**metrics, "rate_offered_tps": spec.rate}


def refine(options: StudyOptions, given: set[str]) -> StudyOptions:
    """--rate auto -> AUTO_STEPS (alone); --latency-limit only with a rate."""
    rates = options.dims.get("rate", (CLOSED,))
    if AUTO in rates and len(rates) > 1:
        raise UserError("--rate: auto chooses the steps itself; give auto alone or rates only (e.g. 200,400,800)")
    if options.params.get("latency_limit") is not None and rates == (CLOSED,):
        raise UserError("--latency-limit: skips transactions late for pgbench's schedule, which only an offered "
                        "rate has; give --rate TPS1,TPS2,... (or auto) too")
    if rates == (AUTO,):
        return dataclasses.replace(options, dims={**options.dims, "rate": AUTO_STEPS})
    return options


def share(rate: str) -> float | None:
    """0.6 for '0.6x'; None for a rate in TPS or the closed loop ('max' ends in x too)."""
    return float(rate[:-1]) if rate.endswith("x") and rate != CLOSED else None


def closed_twin(case: Case) -> Case:
    """The case at the closed loop: the path and workload whose TPS a share is taken of."""
    return Case(case.study, tuple((n, CLOSED if n == "rate" else v) for n, v in case.dims), case.quiet | {"rate"})


def offered(case: Case, closed_tps: dict[str, float]) -> float | None:
    """The -R of a case (None: closed loop): its rate, or its share of its closed twin's TPS."""
    rate = case.get("rate", CLOSED)
    if rate == CLOSED:
        return None
    part = share(rate)
    if part is None:
        return float(rate)
    return max(1.0, round(part * closed_tps[closed_twin(case).case_id], 1))


# -- the knee ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One rate of one path, medians over its rounds (n: logged transactions behind the p99s)."""
    offered_tps: float
    p99_ms: float | None
    sample_n: int = 0
    rounds: int = 0
    achieved_tps: float | None = None
    p50_ms: float | None = None
    lag_p99_ms: float | None = None
    skipped: float | None = None
    client_cpu_pct: float | None = None
    threads: int | None = None    # pgbench -j


@dataclass(frozen=True)
class Knee:
    """Where a path's p99 first passes KNEE_FACTOR x its lowest step's: between `sustained` and
    `passed` (None: not within the steps)."""
    steps: tuple[Step, ...]
    sustained: Step | None     # the highest step before the knee (None: even the lowest has no p99)
    passed: Step | None        # the first step past it

    @property
    def limit_ms(self) -> float | None:
        low = self.steps[0].p99_ms if self.steps else None
        return KNEE_FACTOR * low if low is not None else None

    def text(self) -> str:
        if len(self.steps) < 2:
            return "one rate step: no knee can be located (give two rates or more)"
        if self.sustained is None:
            return "no p99 at the lowest step: no low-load latency to compare with"
        if self.passed is None:
            return f"no knee up to {self.steps[-1].offered_tps:,.0f} TPS"
        return f"between {self.sustained.offered_tps:,.0f} and {self.passed.offered_tps:,.0f} TPS"


def find_knee(steps: list[Step]) -> Knee:
    """The knee of steps (any order): the first step, by rate offered, whose p99 passes
    KNEE_FACTOR x the lowest step's, or has none (every transaction skipped or failed)."""
    ordered = tuple(sorted(steps, key=lambda s: s.offered_tps))
    if len(ordered) < 2 or ordered[0].p99_ms is None:
        return Knee(ordered, None, None)
    limit = KNEE_FACTOR * ordered[0].p99_ms
    for before, step in zip(ordered, ordered[1:]):
        if step.p99_ms is None or step.p99_ms > limit:
            return Knee(ordered, before, step)
    return Knee(ordered, ordered[-1], None)


def step_of(case: CaseResult) -> Step | None:
    """A rate case's Step (None: closed loop, or no rate recorded)."""
    rate = case.median("rate_offered_tps")
    if rate is None:
        return None
    wall, cpu = case.values("wall_ms"), case.values("cpu_ms")
    busy = [100 * cpu[r] / wall[r] for r in wall.keys() & cpu.keys() if wall[r]]
    return Step(rate, case.median("latency_p99_ms"), int(sum(case.values("latency_sample_n").values())),
                len(case.ok), case.median("tps"), case.median("latency_p50_ms"),
                case.median("schedule_lag_p99_ms"), case.median("skipped"),
                statistics.median(busy) if busy else None, int(case.median("threads") or 1))


def knees(cases: Cases) -> dict[str, tuple[dict[str, str], Knee]]:
    """Per path (every dimension but the rate; named by its bench name): its dimensions and its
    knee over its rate steps."""
    paths: dict[str, tuple[dict[str, str], list[Step]]] = {}
    for k, c in cases:
        step = step_of(c)
        if step is not None:
            dims = {d: v for d, v in c.dims.items() if d != "rate"}
            paths.setdefault(k._replace(rate=CLOSED).bench, (dims, []))[1].append(step)
    return {name: (dims, find_knee(steps)) for name, (dims, steps) in paths.items()}


# -- the report -------------------------------------------------------------------------------------
def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "—" if x is None else format(x, fmt)


def _p99(step: Step | None) -> str:
    """'1.234 (n 5,000)': a p99 with the logged transactions behind it."""
    return "—" if step is None else f"{_num(step.p99_ms, ',.3f')} (n {step.sample_n:,})"


def _cpu(step: Step | None) -> str:
    return "—" if step is None or step.client_cpu_pct is None else \
        f"{step.client_cpu_pct:.1f} (-j {step.threads or 1})"


def tables(result: StudyResult) -> list[Table]:
    found = knees(cases_of(result))
    if not found:
        return []
    rows, detail = [], []
    for name, (dims, knee) in found.items():
        at = knee.sustained
        rows.append([name, dims["pg"], knee.text(), _p99(knee.steps[0]), _p99(at), _p99(knee.passed),
                     f"{_num(at.achieved_tps)} / {_num(at.offered_tps)}" if at else "—",
                     _num(at.skipped if at else None), _cpu(at)])
        detail += [[name, _num(s.offered_tps), _num(s.achieved_tps), _num(s.p50_ms, ",.3f"), _num(s.p99_ms, ",.3f"),
                    f"{s.sample_n:,}", _num(s.lag_p99_ms, ",.3f"), _num(s.skipped), _cpu(s), s.rounds]
                   for s in knee.steps]
    notes = [f"Knee: the first rate step (pgbench -R) whose p99 latency passes {KNEE_FACTOR:g}x the lowest "
             "step's (the low-load p99); the path sustains the step before it. Each p99 is the median over "
             "the rounds of the p99 of pgbench's per-transaction log; n: the logged transactions behind it, "
             "every round's. Under -R a latency counts from the scheduled start, so it includes the schedule "
             "lag, shown apart in the steps' table.",
             "Achieved / offered TPS, skipped transactions (--latency-limit) and pgbench's CPU (user + system "
             "over its wall time; 100% is one core, -j its threads) at the sustained step: a client near 100% "
             "per thread would be the bottleneck, not the path."]
    return [Table("The roof: the highest rate each path sustains", [
                "Path", "PG", "Knee (offered rates)", "Low-load p99, ms", "p99 sustained, ms", "p99 past knee, ms",
                "Achieved / offered TPS", "Skipped", "pgbench CPU, %"], rows, notes, detail=(1,)),
            Table("The roof: every rate step", ["Path", "Offered TPS", "Achieved TPS", "p50, ms", "p99, ms", "n",
                                                "Schedule lag p99, ms", "Skipped", "pgbench CPU, %", "Rounds"],
                  detail, ["Medians over the rounds; n: the logged transactions behind the p99s, every round's "
                           f"(pgbench --sampling-rate above {LOG_LINES_PER_THREAD_S:,} a second per thread)."],
                  detail=(3, 6, 9))]


def findings(result: StudyResult) -> dict:
    """The export's knee per path: {"roof": [...]} (empty without rate steps)."""
    found = knees(cases_of(result))
    if not found:
        return {}
    return {"roof": [{"path": name, "dims": dims,
                      "knee": knee.text(), "knee_factor": KNEE_FACTOR, "low_load_p99_ms": knee.steps[0].p99_ms,
                      "p99_limit_ms": knee.limit_ms,
                      "sustained_tps": knee.sustained.offered_tps if knee.sustained else None,
                      "knee_between_tps": [knee.sustained.offered_tps, knee.passed.offered_tps] if knee.passed
                      and knee.sustained else None,
                      "steps": [dataclasses.asdict(s) for s in knee.steps]}
                     for name, (dims, knee) in found.items()]}


def plots(result: StudyResult) -> list[Plot]:
    """p99 latency against the offered rate, per path, the knee's limit in the notes."""
    found = knees(cases_of(result))
    series = {name: [Point(s.offered_tps, s.p99_ms) for s in knee.steps if s.p99_ms is not None]
              for name, (_, knee) in found.items()}
    if not any(series.values()):
        return []
    return [Plot("The roof: p99 latency against the offered rate", "Offered rate (pgbench -R), TPS",
                 "p99 latency, ms (schedule lag included)", "line", series, log_y=True,
                 notes=[f"{name}: knee {knee.text()}" for name, (_, knee) in found.items()])]
