#!/usr/bin/env python3
"""Benchmark: where each round's wall time goes, measured, to see what the ETA must count.

Runs `pgpathbench run RUN ARGS` in this process with timers around the runner's parts, then
prints per round: measurements, wall time (from the end of the previous round's probes), and
the sum of each part: settings applied and the study's before_measure (setup), the evidence
snapshots before and after each measurement (ev_before, ev_after; settle, within ev_after:
waiting for the case's backends to exit), the measurement itself (measure), the store's write
(store), the probes and link checks between rounds (probes), the rest (other). Then what round 1
costs beyond the later rounds, part by part (each case's round 1 against the median of its
later rounds): first-use costs show there, the machine's drift shows in every part alike.

    .venv/bin/python bench/round_costs.py [--workspace DIR] [-- RUN ARGS...]
    default run: remote-sampling --preset quick --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections import defaultdict

from pgpathbench import cli, progress, runner as runner_module
from pgpathbench.store import ResultsStore
from pgpathbench.studies import STUDIES

DEFAULT = ["remote-sampling", "--preset", "quick", "--repeat", "3"]
PARTS = ("setup", "ev_before", "ev_after", "measure", "store", "probes")
# (round, case or None between measurements) -> part -> seconds; "eta": the measurement's own
# time, as the ETA counts it
cost: dict[tuple[int, str | None], dict[str, float]] = defaultdict(lambda: defaultdict(float))
walls: dict[int, list[float]] = defaultdict(list)
now = {"round": 0, "case": None}


def add(part: str, seconds: float) -> None:
    cost[(now["round"], now["case"])][part] += seconds


def timed(part: str, fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            add(part, time.perf_counter() - t0)
    return wrapper


def evidence_timed(collected):
    @contextlib.contextmanager
    def wrapper(watched):
        t0 = time.perf_counter()
        with collected(watched) as ev:
            add("ev_before", time.perf_counter() - t0)
            yield ev
            t1 = time.perf_counter()
        add("ev_after", time.perf_counter() - t1)
        add("settle", sum((t.get("settle_ms") or 0) for t in ev.timings.values()) / 1000)
    return wrapper


def instrument(study_name: str) -> None:
    R = runner_module.Runner
    between, finish, one = R._between_rounds, R._finish, R._measure_one
    measured = progress.ProgressReporter.measured
    last = {"end": None}

    def between_rounds(self, servers, study, envs, run_id, round_no, phase, session):
        now.update(round=round_no, case=None)
        if phase == "before":
            walls[round_no].append(last["end"] or time.perf_counter())
        try:
            return timed("probes", between)(self, servers, study, envs, run_id, round_no, phase, session)
        finally:
            last["end"] = time.perf_counter()
            walls[round_no].append(last["end"])

    def measure_one(self, study, env, servers, run_id, round_no, case, *rest):
        now.update(round=round_no, case=case.case_id)
        try:
            return one(self, study, env, servers, run_id, round_no, case, *rest)
        finally:
            now["case"] = None

    def finished(self, *args):
        now.update(round=0, case=None)     # what the run does after its last round is no round's
        return finish(self, *args)

    def measured_timed(self, case_id, round_no, headline, seconds):
        measured(self, case_id, round_no, headline, seconds)
        cost[(round_no, case_id)]["eta"] = seconds

    R._between_rounds, R._finish, R._measure_one = between_rounds, finished, measure_one
    progress.ProgressReporter.measured = measured_timed
    runner_module.guc.apply_server_settings = timed("setup", runner_module.guc.apply_server_settings)
    runner_module.guc.watch_settings = timed("setup", runner_module.guc.watch_settings)
    runner_module.collected = evidence_timed(runner_module.collected)
    ResultsStore.add_measurement = timed("store", ResultsStore.add_measurement)
    cls = type(STUDIES[study_name])
    cls.before_measure = timed("setup", cls.before_measure)
    cls.measure = timed("measure", cls.measure)


def print_rounds() -> None:
    print(f"{'round':>5} {'n':>4} {'wall s':>8} " + " ".join(f"{p:>9}" for p in (*PARTS, "settle")) + f" {'other':>8}")
    for r in sorted(r for r in walls if r):
        mine = [v for (rr, case), v in cost.items() if rr == r]
        part = {p: sum(v[p] for v in mine) for p in (*PARTS, "settle")}
        wall = walls[r][-1] - walls[r][0]
        n = sum(1 for (rr, case) in cost if rr == r and case)
        print(f"{r:>5} {n:4d} {wall:8.2f} " + " ".join(f"{part[p]:9.2f}" for p in (*PARTS, "settle"))
              + f" {wall - sum(part[p] for p in PARTS):8.2f}")


def print_first_round() -> None:
    """Per part: round 1's sum over the cases against the same cases at their later rounds' median."""
    cases = {case for (_, case) in cost if case}
    rounds = {case: sorted(r for (r, c) in cost if c == case) for case in cases}
    cases = [c for c in cases if len(rounds[c]) > 1 and rounds[c][0] == 1]
    if not cases:
        return
    print(f"round 1 against the later rounds' median, summed over its {len(cases)} cases (s):")
    for p in (*(p for p in PARTS if p != "probes"), "settle", "eta"):    # probes are the round's, no case's
        first = sum(cost[(1, c)][p] for c in cases)
        later = sum(statistics.median(cost[(r, c)][p] for r in rounds[c][1:]) for c in cases)
        print(f"  {p:>9}: round 1 {first:7.2f}  later {later:7.2f}  excess {first - later:+7.2f}")
    worst = sorted(cases, key=lambda c: cost[(1, c)]["eta"] - statistics.median(
        cost[(r, c)]["eta"] for r in rounds[c][1:]), reverse=True)[:5]
    for c in worst:
        later = statistics.median(cost[(r, c)]["eta"] for r in rounds[c][1:])
        print(f"  {c}: round 1 {cost[(1, c)]['eta'] * 1000:.0f} ms, later median {later * 1000:.0f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace")
    ap.add_argument("run", nargs="*", help="the run's arguments (after --)")
    args = ap.parse_args()
    instrument((args.run or DEFAULT)[0])
    with contextlib.redirect_stdout(sys.stderr):    # the run's report: not ours to print
        code = cli.main(["run", *(args.run or DEFAULT),
                         *(["--workspace", args.workspace] if args.workspace else [])])
    print_rounds()
    print_first_round()
    return code


if __name__ == "__main__":
    sys.exit(main())
