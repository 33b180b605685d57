"""The result model: built from stored rows or an export, cases in planned order, rounds,
summaries, failures, the measured round trip of each path, and runs of an earlier version."""

from __future__ import annotations

import pytest

from pgpathbench.results.fingerprint import Environment, Fingerprint
from pgpathbench.results.model import RunResult
from pgpathbench.results.upgrade import upgrade_metrics

RUN = {"run_id": "R", "studies": ["s"], "preset": "quick", "status": "finished", "seed": 1,
       "options": {"studies": [{"study": "s", "preset": "quick", "repeat": 3, "params": {}, "dims": {}}],
                   "model_version": 2},
       "environment": {"sessions": [Fingerprint(machine={"cores": 2}, tools={"pgbench": "15.18"}).to_json()]}}
CASES = [{"study": "s", "case_id": "b", "dims": {"x": "b"}, "planned_order": 0},
         {"study": "s", "case_id": "a", "dims": {"x": "a"}, "planned_order": 1},
         {"study": "s", "case_id": "never", "dims": {"x": "n"}, "planned_order": 2}]


def m(case_id, round_no, value=None, error=None, path=None):
    return {"study": "s", "case_id": case_id, "round": round_no, "ok": error is None, "error": error,
            "dims": {}, "metrics": {} if error else {"t_ms": value, "note": "text"}, "path": path}


def probe(link, round_no, phase, rtt):
    return {"link": link, "round": round_no, "phase": phase, "session": 1, "rtt_median_ms": rtt, "round_trips": 100}


def build():
    ms = [m("a", 2, 12.0), m("a", 1, 10.0), m("a", 3, 11.0, path="pg15_source_5ms"), m("b", 1, error="boom"),
          m("b", 2, 5.0), m("b", 3, 500.0), m("b", 4, 5.0), m("b", 5, 5.0)]
    probes = [probe("p", 1, "before", 1.0), probe("p", 1, "after", 3.0), probe("p", 2, "before", 10.0)]
    return RunResult.from_rows(RUN, CASES, ms, probes)


def test_cases_keep_their_planned_order_and_rounds_are_sorted():
    run = build()
    study = run.study
    assert [c.case_id for c in study.cases] == ["b", "a", "never"]
    a = study.case("a")
    assert [x.round for x in a.measurements] == [1, 2, 3] and a.values("t_ms") == {1: 10.0, 2: 12.0, 3: 11.0}
    assert a.raw("note") == {1: "text", 2: "text", 3: "text"} and a.values("note") == {}
    assert a.measurements[2].path == "pg15_source_5ms"
    assert [c.case_id for c in study.measured()] == ["b", "a"] and study.where(x="a") == [a]


def test_summary_failures_and_outliers():
    run = build()
    b = run.study.case("b")
    assert [f.error for f in b.failures] == ["boom"] and len(b.ok) == 4
    s = b.summary("t_ms")
    assert s.n == 4 and s.median == 5.0 and s.outliers == 1 and s.max == 500.0
    assert run.counts() == (7, 1) and run.study.case("never").summary("t_ms") is None


def test_measured_round_trip_of_each_path():
    run = build()
    assert run.rtt() == {"p": 3.0}
    assert run.rtt_by_round() == {("p", 1): 2.0, ("p", 2): 10.0}


def test_fingerprint_sections_and_version_one():
    run = build()
    assert run.environment.last.machine == {"cores": 2} and run.environment.last.tools == {"pgbench": "15.18"}
    old = Environment.from_json({"sessions": [{"cpu_model": "X", "cores": 2, "pgbench": "pgbench 15.18",
                                               "servers": {"pg15_source": {"version": "PostgreSQL 15"}},
                                               "links": {"pg15_source_0ms": {"kind": "direct"}},
                                               "fdw_overhead": {"scale": 1}}]})
    fp = old.last
    assert fp.version == 1 and fp.machine == {"cpu_model": "X", "cores": 2}
    assert fp.tools == {"pgbench": "pgbench 15.18"} and fp.paths == {"pg15_source_0ms": {"kind": "direct"}}
    assert old.setup_of("fdw_overhead") == {"scale": 1} and "pg15_source" in fp.servers


def test_runs_of_version_one_read_durations_in_milliseconds():
    assert upgrade_metrics("s", {"connect_s": 0.5, "mb_per_s": 3.0, "latency_ms": 2.0, "ok_s": True}, 1) == \
        {"connect_ms": 500.0, "mb_per_s": 3.0, "latency_ms": 2.0, "ok_s": True}
    v1 = {**RUN, "options": {**RUN["options"], "model_version": 1}}
    run = RunResult.from_rows(v1, [], [{**m("a", 1), "metrics": {"total_s": 1.5}}], [])
    assert run.study.case("a").values("total_ms") == {1: 1500.0}


def test_a_sampled_logs_maximum_of_version_two_is_not_read_as_the_runs():
    """Issue 42: a maximum over a sample of a run's transactions fell below the run's average."""
    sampled = {"latency_ms": 0.074, "latency_p99_ms": 0.045, "latency_max_ms": 0.047, "latency_log_rate": 0.00588}
    every = {**sampled, "latency_max_ms": 0.9, "latency_log_rate": 1.0}
    assert upgrade_metrics("fdw-overhead", sampled, 2) == {k: v for k, v in sampled.items() if k != "latency_max_ms"}
    assert upgrade_metrics("fdw-overhead", every, 2) == every
    assert upgrade_metrics("interfaces", {"latency_max_ms": 3.0}, 2) == {"latency_max_ms": 3.0}   # a client's: exact
    assert upgrade_metrics("fdw-overhead", {**sampled, "latency_log_rate": 0.5}, 3)["latency_max_ms"] == 0.047
    v2 = {**RUN, "options": {**RUN["options"], "model_version": 2}}
    run = RunResult.from_rows(v2, [], [{**m("a", 1), "metrics": sampled}], [])
    assert run.study.case("a").values("latency_max_ms") == {} and run.study.case("a").values("latency_p99_ms")


def test_an_export_rebuilds_the_same_cases():
    run = build()
    from pgpathbench.report import export
    import json
    again = RunResult.from_export(json.loads(export.to_json(run)))
    assert [c.case_id for c in again.cases] == ["b", "a"]
    assert again.study.case("a").values("t_ms") == run.study.case("a").values("t_ms")
    with pytest.raises(KeyError):
        RunResult.from_export({})


def test_failures_and_outlying_rounds_are_tabled_by_the_shared_code():
    from types import SimpleNamespace
    from pgpathbench.report import assemble
    run = build()
    failed = assemble.failures_table(run)
    assert failed.title == "Failed measurements (1)" and failed.rows[0][:3] == ["s", "b", 1]
    outliers = assemble.outliers_table(run, {"s": SimpleNamespace(primary_metric="t_ms")})
    assert outliers.rows == [["s", "b", "t_ms", 1, 4, "5.000", "round 3: 500.0"]]


def test_a_version_1_fingerprint_is_read_into_sections():
    from pgpathbench.results.fingerprint import Fingerprint
    from pgpathbench.results.upgrade import upgrade_fingerprint
    flat = {"host": "h", "cores": 2, "servers": {"source": {"version": "15.18"}}, "links": {"p": {"kind": "proxy"}},
            "pgbench": "pgbench (PostgreSQL) 15.18", "fdw-overhead": {"scale": 10}}
    fp = Fingerprint.from_json(flat)
    assert (fp.machine, fp.servers, fp.paths, fp.version) == ({"host": "h", "cores": 2}, flat["servers"], flat["links"], 1)
    assert (fp.tools, fp.setup) == ({"pgbench": flat["pgbench"]}, {"": {"fdw-overhead": {"scale": 10}}})
    assert upgrade_fingerprint(fp.to_json() | {"version": 2}) == fp.to_json() | {"version": 2}   # version 2 as it is
