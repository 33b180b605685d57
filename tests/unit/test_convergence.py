"""--until-ci's rule (results/convergence.py) on fdw-overhead's declarations: an FDW case decided on
its overhead ratio to local paired by round, local held open while a case paired with it is; the
rounds it plans interleaved, and a resumed run planning alike."""

from __future__ import annotations

import random

import pytest

from pgpathbench.matrix import StudyOptions, round_order
from pgpathbench.results.convergence import MIN_ROUNDS, closed_cases, half_width_pct, plan_round, verdicts
from pgpathbench.results.model import RunResult
from pgpathbench.studies import STUDIES

STUDY = STUDIES["fdw-overhead"]
LOCAL, FDW, FDW_EXT = "ro:local:1:0ms:15:simple", "ro:fdw_local:1:0ms:15:simple", "ro:fdw_external:1:0ms:15:simple"
SEED = 7


def cases(targets=("local", "fdw_local", "fdw_external")):
    dims = {**STUDY.default_dims, "workload": ("ro",), "target": targets, "clients": ("1",)}
    return STUDY.cases(StudyOptions(STUDY.name, "quick", 12, {}, dims))


def measurement(case, round_no: int, tps: float | None) -> dict:
    return {"study": STUDY.name, "case_id": case.case_id, "dims": dict(case.dims), "round": round_no,
            "ok": tps is not None, "error": None if tps is not None else "failed", "metrics": {"tps": tps} if tps else {}}


def result(measurements: list[dict]):
    run = {"run_id": "r", "studies": [STUDY.name], "options": {"model_version": 2}}
    return RunResult.from_rows(run, [], measurements, []).study


def by_id(found):
    return {v.case_id: v for v in found}


# A machine whose speed drifts by up to 2x between rounds: each side's own interval is wide, the
# ratio of two cases measured in the same round is not.
DRIFT = [1.0, 0.5, 1.4, 0.7, 1.9, 0.6, 1.2, 0.8, 1.6, 0.9, 1.1, 0.55]


def test_a_case_with_a_baseline_is_decided_on_the_ratio_paired_by_round():
    local, fdw = cases(("local", "fdw_local"))
    ms = [measurement(local, r, 8000 * d) for r, d in enumerate(DRIFT[:MIN_ROUNDS], 1)]
    ms += [measurement(fdw, r, 2000 * d * (1.01 if r % 2 else 0.99)) for r, d in enumerate(DRIFT[:MIN_ROUNDS], 1)]
    v = by_id(verdicts(result(ms), STUDY, 5))
    assert v[FDW].decided_by == "ratio to target=local" and v[FDW].converged
    assert v[FDW].interval.n == MIN_ROUNDS and v[FDW].interval.median == pytest.approx(4.0, rel=0.02)
    assert half_width_pct(v[FDW].interval) < 2
    # local on its own TPS, which drifted 4x: not converged, and nothing holds it any more
    assert v[LOCAL].decided_by == "tps" and not v[LOCAL].converged and v[LOCAL].holds_for == ()
    assert half_width_pct(result(ms).case(FDW).summary("tps")) > 5    # its own TPS would not have stopped


def test_a_round_the_baseline_lacks_is_no_pair():
    local, fdw = cases(("local", "fdw_local"))
    steady = {r: 1.0 for r in range(1, 8)}
    ms = [measurement(local, r, None if r == 3 else 8000.0) for r in steady]       # round 3 failed
    ms += [measurement(fdw, r, 2000.0) for r in range(1, MIN_ROUNDS + 1)]
    v = by_id(verdicts(result(ms), STUDY, 5))
    assert v[FDW].interval.n == MIN_ROUNDS - 1 and not v[FDW].converged     # 6 rounds, 5 pairs
    ms.append(measurement(fdw, 7, 2000.0))
    v = by_id(verdicts(result(ms), STUDY, 5))
    assert v[FDW].interval.n == MIN_ROUNDS and v[FDW].converged and v[LOCAL].converged
    assert closed_cases(result(ms), STUDY, 5) == {LOCAL, FDW}


def test_the_baseline_is_held_open_while_a_case_paired_with_it_is_open():
    local, fdw, ext = cases()
    ms = [measurement(local, r, 8000.0) for r in range(1, 7)]                       # steady: converged
    ms += [measurement(fdw, r, 2000.0) for r in range(1, 7)]                        # steady ratio: converged
    ms += [measurement(ext, r, 1000.0 * DRIFT[r]) for r in range(1, 7)]             # its ratio swings: open
    v = by_id(verdicts(result(ms), STUDY, 5))
    assert v[LOCAL].converged and v[LOCAL].holds_for == (FDW_EXT,) and not v[LOCAL].closed
    assert v[FDW].closed and not v[FDW_EXT].converged
    assert closed_cases(result(ms), STUDY, 5) == {FDW}


def test_without_its_baseline_in_the_run_a_case_is_decided_on_its_own_metric():
    (ext,) = cases(("fdw_external",))
    ms = [measurement(ext, r, 1000.0) for r in range(1, 7)]
    (v,) = verdicts(result(ms), STUDY, 5)
    assert v.decided_by == "tps" and v.converged and v.interval.n == 6


def tps(case_id: str, round_no: int) -> float:
    """A run's figures: the machine's speed drifts by round (shared by the cases of a round); each
    case's own noise on top. local/fdw_local's ratio is steady, local/fdw_external's less so."""
    drift = random.Random(round_no).uniform(0.96, 1.04)
    noise = {LOCAL: 0.005, FDW: 0.005, FDW_EXT: 0.04}[case_id]
    own = random.Random(f"{case_id}:{round_no}").uniform(1 - noise, 1 + noise)
    return 8000 / {LOCAL: 1, FDW: 4, FDW_EXT: 8}[case_id] * drift * own


def simulate(repeat: int, pct: float, stop_after: int | None = None, stored: list | None = None):
    """The runner's loop over plan_round, measuring with tps(): every (case, round) measured, in
    order, and each round's plan; stops after `stop_after` measurements (an interrupt)."""
    ms, plans = list(stored or []), []
    for round_no in range(1, repeat + 1):
        done = {(STUDY.name, m["case_id"], m["round"]) for m in ms if m["ok"]}
        todo, closed = plan_round(STUDY, cases(), SEED, round_no, done, lambda: result(ms), pct)
        plans.append((round_no, [c.case_id for c in todo], closed))
        for c in todo:
            if stop_after is not None and len(ms) == stop_after:
                return ms, plans
            ms.append(measurement(c, round_no, tps(c.case_id, round_no)))
    return ms, plans


def test_rounds_stay_interleaved_over_the_open_cases():
    ms, plans = simulate(repeat=14, pct=3)
    held = []
    for round_no, todo, closed in plans:
        order = [c.case_id for c in round_order(cases(), SEED, round_no)]
        assert todo == [c for c in order if c not in closed]     # the round's own order, open cases only
        if any(c != LOCAL for c in todo):
            assert LOCAL in todo                                 # every pair has its baseline
        before = by_id(verdicts(result([m for m in ms if m["round"] < round_no]), STUDY, 3)).get(LOCAL)
        if LOCAL in todo and before is not None and before.converged:
            held.append((round_no, before.holds_for))
    rounds = {c: [m["round"] for m in ms if m["case_id"] == c] for c in (LOCAL, FDW, FDW_EXT)}
    assert all(r == list(range(1, len(r) + 1)) for r in rounds.values())   # the first n rounds, none skipped
    # fdw_local's ratio is steady: 6 rounds; fdw_external's needs 12, and holds local open for them
    assert (len(rounds[FDW]), len(rounds[FDW_EXT]), len(rounds[LOCAL])) == (MIN_ROUNDS, 12, 12)
    assert held == [(12, (FDW_EXT,))]
    assert all(v.converged for v in verdicts(result(ms), STUDY, 3))


@pytest.mark.parametrize("stop_after", [1, 5, 13, 17, 20, 24, 26])
def test_a_resumed_run_measures_what_the_uninterrupted_run_measures(stop_after):
    whole, _ = simulate(repeat=14, pct=3)
    interrupted, _ = simulate(repeat=14, pct=3, stop_after=stop_after)
    resumed, _ = simulate(repeat=14, pct=3, stored=interrupted)
    assert sorted((m["case_id"], m["round"]) for m in resumed) == sorted((m["case_id"], m["round"]) for m in whole)
