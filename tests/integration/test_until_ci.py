"""--until-ci: a case stops being measured once its primary metric's 95% interval is narrow enough.

Checked from what the run stored: a case that stopped before --repeat had converged at exactly
that round (its interval over those rounds within the target, over one round fewer not, or the
minimum reached), a case that did not converge ran every round, and each round measured exactly
the cases still open then.
"""

from __future__ import annotations

from conftest import assert_user_error, pgpathbench, report_json

from pgpathbench.results.convergence import MIN_ROUNDS, half_width_pct
from pgpathbench.stats import summarise

REPEAT = 8


def _within(values: list[float], pct: float) -> bool:
    return len(values) >= MIN_ROUNDS and half_width_pct(summarise(values)) <= pct


def _rounds_by_case(run: dict) -> dict[str, dict[int, float]]:
    by: dict[str, dict[int, float]] = {}
    for m in run["measurements"]:
        assert m["error"] is None, m["error"]
        by.setdefault(m["case_id"], {})[m["round"]] = m["metrics"]["tps"]
    return by


def test_cases_stop_once_their_interval_is_within_the_target(workspace_root):
    ws = workspace_root / "ws-until-ci"
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local,fdw_external",
                      "--repeat", str(REPEAT), "--until-ci", "100", "--evidence", "off", workspace=ws)
    assert res.returncode == 0, res.stderr
    by_case = _rounds_by_case(report_json(ws))
    assert len(by_case) == 2
    for case_id, rounds in by_case.items():
        n = len(rounds)
        assert sorted(rounds) == list(range(1, n + 1)), "a case's rounds are the first n, none skipped"
        values = [rounds[r] for r in sorted(rounds)]
        if n < REPEAT:
            assert _within(values, 100) and (n == MIN_ROUNDS or not _within(values[:-1], 100)), case_id
        else:
            assert not _within(values[:-1], 100), case_id
    # A TPS interval over 6 rounds wider than 100% of its median needs one round at double the median.
    assert any(len(r) < REPEAT for r in by_case.values()), by_case
    table = pgpathbench("report", "latest", "--format", "markdown", workspace=ws).stdout
    assert "Adaptive repetition (--until-ci 100%)" in table


def test_a_target_never_met_measures_every_round(workspace_root):
    ws = workspace_root / "ws-until-ci-never"
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local",
                      "--repeat", str(MIN_ROUNDS), "--until-ci", "0.0001", "--evidence", "off", workspace=ws)
    assert res.returncode == 0, res.stderr
    (rounds,) = _rounds_by_case(report_json(ws)).values()
    assert len(rounds) == MIN_ROUNDS
    table = pgpathbench("report", "latest", "--format", "markdown", workspace=ws).stdout
    assert "0 of 1 cases converged" in table


def test_until_ci_needs_enough_rounds(workspace_root):
    ws = workspace_root / "ws-until-ci-bad"
    assert_user_error(pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "3", "--until-ci", "5",
                                  workspace=ws), "--until-ci: a case stops after 6 rounds at the earliest", untouched=ws)
    assert_user_error(pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "10", "--until-ci", "0",
                                  workspace=ws), "--until-ci: '0' is not more than 0", untouched=ws)
