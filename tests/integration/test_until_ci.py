"""--until-ci: a case stops being measured once the 95% interval that decides it is narrow enough:
fdw_external's overhead ratio to local (TPS local / TPS fdw_external, paired by round), local's own
TPS; local stays open while fdw_external is.

Checked from what the run stored, by replaying the rule here: a case that stopped before --repeat
had converged at exactly that round (over one round fewer not, or the minimum reached), a case
that did not converge ran every round; the run took fewer measurements than the fixed plan, and
every converged case's interval (the RATIO's for fdw_external) lies within the target.
"""

from __future__ import annotations

from conftest import assert_user_error, pgpathbench, pgpathbench_main, report_json

from pgpathbench.results.convergence import MIN_ROUNDS, half_width_pct
from pgpathbench.stats import ratio_summary, summarise

# Open loop (pgbench -R) at a rate both paths sustain even on a loaded machine: each case's TPS is
# then the rate's Poisson count over the measurement (about +-7% at 100 TPS over 2 s), whatever the
# load, where closed-loop TPS on 2 shared cores is sometimes bimodal (7k and 20k in one run) and a
# 60% target went unmet for 12 rounds at load 6-9. So the rule meets its target in this test on any
# machine, and the replay below checks it stopped exactly where its rule says.
REPEAT = 8
PCT = 60
RATE = "100"
LOCAL, FDW_EXT = f"ro:local:1:0ms:15:simple:{RATE}", f"ro:fdw_external:1:0ms:15:simple:{RATE}"


def _within(values: list[float], pct: float) -> bool:
    return len(values) >= MIN_ROUNDS and half_width_pct(summarise(values)) <= pct


def _rounds_by_case(run: dict) -> dict[str, dict[int, float]]:
    by: dict[str, dict[int, float]] = {}
    for m in run["measurements"]:
        assert m["error"] is None, m["error"]
        by.setdefault(m["case_id"], {})[m["round"]] = m["metrics"]["tps"]
    return by


def _stops(converged_after) -> int:
    """The rounds a case runs: up to the first k whose rounds 1..k close it, else every round."""
    return next((k for k in range(MIN_ROUNDS, REPEAT + 1) if converged_after(k)), REPEAT)


def test_cases_stop_once_their_ratio_interval_is_within_the_target(workspace_root):
    ws = workspace_root / "ws-until-ci"
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local,fdw_external",
                      "--rate", RATE, "--duration", "2", "--repeat", str(REPEAT), "--until-ci", str(PCT), "--evidence", "off", workspace=ws)
    assert res.returncode == 0, res.stderr
    by_case = _rounds_by_case(report_json(ws))
    local, fdw = by_case[LOCAL], by_case[FDW_EXT]
    for rounds in (local, fdw):
        assert sorted(rounds) == list(range(1, len(rounds) + 1)), "a case's rounds are the first n, none skipped"

    def ratios(k: int) -> list[float]:
        return [local[r] / fdw[r] for r in range(1, k + 1) if r in local and r in fdw]

    n_fdw = _stops(lambda k: _within(ratios(k), PCT))
    assert len(fdw) == n_fdw, (local, fdw)
    # local: its own TPS within the target, and no longer needed as fdw_external's pair
    assert len(local) == _stops(lambda k: k >= n_fdw and _within([local[r] for r in range(1, k + 1)], PCT))
    assert len(local) + len(fdw) < 2 * REPEAT, f"no fewer measurements than the fixed plan: {by_case}"
    if n_fdw < REPEAT:   # the ratio's interval, not each side's, within the width
        ratio = ratio_summary(local, fdw)
        assert ratio.n == n_fdw and half_width_pct(ratio) <= PCT
    if len(local) < REPEAT:
        assert half_width_pct(summarise(list(local.values()))) <= PCT
    table = pgpathbench_main("report", "latest", "--format", "markdown", workspace=ws).stdout
    assert f"Adaptive repetition (--until-ci {PCT}%)" in table
    row = next(line for line in table.splitlines() if line.startswith(f"| {FDW_EXT} |")
               and "ratio to target=local" in line)
    assert f"| {n_fdw} | ratio to target=local | {n_fdw} |" in row, row


def test_a_target_never_met_measures_every_round(workspace_root):
    ws = workspace_root / "ws-until-ci-never"
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local",
                      "--repeat", str(MIN_ROUNDS), "--until-ci", "0.0001", "--evidence", "off", workspace=ws)
    assert res.returncode == 0, res.stderr
    (rounds,) = _rounds_by_case(report_json(ws)).values()
    assert len(rounds) == MIN_ROUNDS
    table = pgpathbench_main("report", "latest", "--format", "markdown", workspace=ws).stdout
    assert "0 of 1 cases converged" in table


def test_until_ci_needs_enough_rounds(workspace_root):
    ws = workspace_root / "ws-until-ci-bad"
    assert_user_error(pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "3", "--until-ci", "5",
                                  workspace=ws), "--until-ci: a case stops after 6 rounds at the earliest", untouched=ws)
    assert_user_error(pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "10", "--until-ci", "0",
                                  workspace=ws), "--until-ci: '0' is not more than 0", untouched=ws)
