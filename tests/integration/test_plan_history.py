"""The plan's estimate from history: a study that cannot say how long a measurement takes
(interfaces) plans its first run without one, and the same plan again at what the first run
measured on this host. Two small cases (connect per query, and once), two rounds, a workspace of
its own so that no other test's runs are history here."""

from __future__ import annotations

import re

import pytest

from conftest import pgpathbench, report_json

pytestmark = pytest.mark.integration

ROUNDS = 2
RUN = ["run", "interfaces", "--preset", "quick", "--interface", "libpq", "--method", "normal", "--transport", "tcp",
       "--sqlstrat", "sql001:each,sql001:once", "--output", "p-none:null", "--iterations", "400",
       "--t50k-rows", "5000", "--t10m-rows", "1000", "--repeat", str(ROUNDS), "--evidence", "off"]


def plan_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if "plan: " in line)


def seconds(text: str) -> int:
    minutes, secs = re.fullmatch(r"(\d+)m(\d\d)s", text).groups()
    return int(minutes) * 60 + int(secs)


def test_the_same_plan_again_is_estimated_from_what_the_first_run_measured_here(workspace_root):
    ws = workspace_root / "ws-plan-history"
    first = pgpathbench(*RUN, workspace=ws)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "how long: known after the first round" in plan_line(first.stderr)
    measured = report_json(ws)["measurements"]
    assert len(measured) == 2 * ROUNDS and all(m["ok"] for m in measured), measured
    took = sum(m["duration_s"] for m in measured)

    second = pgpathbench(*RUN, workspace=ws)
    assert second.returncode == 0, second.stderr[-3000:]
    line = plan_line(second.stderr)
    found = re.search(r"about (\S+) of measurements \(from earlier runs here: all 2 cases\)", line)
    assert found, line
    # each case at the median of its two rounds (their mean) times two rounds: the first run's
    # measurement time, to the second the plan line rounds to
    assert abs(seconds(found.group(1)) - took) <= 1.0, (line, took)
