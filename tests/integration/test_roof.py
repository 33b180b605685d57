"""fdw-overhead's roof against real servers and real pgbench: --rate steps (pgbench -R) with
--latency-limit on local and fdw_external, and --rate auto (steps from each path's closed loop,
pinned in the run so that a resume offers the same). Structure only: a knee named between two
steps, the samples behind each p99, the client's CPU; never a timing or a TPS."""

from __future__ import annotations

import pytest

from conftest import pgpathbench, pgpathbench_main, report_json

from pgpathbench.studies.fdw_overhead.spec import AUTO_STEPS

pytestmark = pytest.mark.integration

# 50 TPS: sustained by any path here; 100,000: by none through one pgbench client on 2 cores.
LOW, HIGH = 50, 100_000
ROUNDS = 3


@pytest.fixture(scope="module")
def rate_run(workspace_root):
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", str(ROUNDS), "--workload", "ro",
                      "--target", "local,fdw_external", "--rate", f"max,{LOW},{HIGH}", "--latency-limit", "500",
                      workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    return report_json(workspace_root)


def test_every_rate_step_measured_with_its_latencies_and_lag_apart(rate_run):
    ms = rate_run["measurements"]
    assert len(ms) == 2 * 3 * ROUNDS and all(m["ok"] for m in ms), [m["error"] for m in ms if not m["ok"]]
    closed = [m for m in ms if m["dims"]["rate"] == "max"]   # the closed loop beside the steps: no -R, id as before
    assert len(closed) == 2 * ROUNDS and all(m["case_id"].endswith(":simple") for m in closed)
    assert not any("rate_offered_tps" in m["metrics"] or "skipped" in m["metrics"] for m in closed)
    for m in (m for m in ms if m not in closed):
        mt = m["metrics"]
        assert m["case_id"].endswith(f":{m['dims']['rate']}") and mt["rate_offered_tps"] == int(m["dims"]["rate"])
        assert mt["latency_sample_n"] > 0 and mt["latency_p99_ms"] >= mt["latency_p50_ms"] > 0
        assert 0 <= mt["schedule_lag_p50_ms"] <= mt["schedule_lag_p99_ms"]
        assert mt["skipped"] >= 0 and mt["late"] >= 0 and mt["cpu_ms"] > 0   # --latency-limit's counters


def test_the_report_names_a_knee_between_two_steps_for_each_path(rate_run, workspace_root):
    roof = {k["path"]: k for k in rate_run["findings"]["roof"]}
    assert set(roof) == {"RO.local", "RO.FDW_external"}
    for knee in roof.values():
        assert knee["knee_between_tps"] == [LOW, HIGH] and knee["knee"] == f"between {LOW} and {HIGH:,} TPS"
        assert knee["p99_limit_ms"] == 2 * knee["low_load_p99_ms"]
        for step in knee["steps"]:
            assert step["rounds"] == ROUNDS and step["sample_n"] > 0 and step["client_cpu_pct"] > 0
            assert step["achieved_tps"] > 0 and step["skipped"] is not None
    text = pgpathbench_main("report", "latest", "--format", "markdown", workspace=workspace_root)
    assert text.returncode == 0, text.stderr
    assert "The roof: the highest rate each path sustains" in text.stdout
    assert text.stdout.count(f"between {LOW} and {HIGH:,} TPS") >= 2 and "(n " in text.stdout


@pytest.fixture(scope="module")
def auto_run(workspace_root):
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "1", "--workload", "ro",
                      "--target", "local", "--rate", "auto", workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    first = report_json(workspace_root)
    resumed = pgpathbench("run", "--resume", first["run"]["run_id"], "--repeat", "2", workspace=workspace_root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return res.stderr, resumed.stderr, report_json(workspace_root, first["run"]["run_id"])


def test_rate_auto_offers_shares_of_the_closed_loop_pinned_for_a_resume(auto_run):
    said, said_resumed, rep = auto_run
    (study,) = rep["run"]["options"]["studies"]
    (closed,) = study["params"]["rate_closed_tps"]["15"].values()
    assert closed > 0 and study["dims"]["rate"] == list(AUTO_STEPS)
    assert "runs" in said and "in a closed loop" in said and "in a closed loop" not in said_resumed
    ms = rep["measurements"]
    assert len(ms) == 2 * len(AUTO_STEPS) and all(m["ok"] for m in ms)
    for m in ms:   # both rounds, the second a resume's, offer the same share of the same closed loop
        share = float(m["dims"]["rate"].removesuffix("x"))
        assert m["metrics"]["rate_offered_tps"] == max(1.0, round(share * closed, 1))
    (knee,) = rep["findings"]["roof"]
    assert knee["knee"].startswith(("between", "no knee up to")) and len(knee["steps"]) == len(AUTO_STEPS)
