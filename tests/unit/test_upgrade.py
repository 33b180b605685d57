"""results/upgrade.py: each rule for runs stored by older versions, on the smallest stored shape it
reads, through the one way in (upgrade_run, RunResult.from_rows) with the studies' own rules
registered by the study registry."""

from __future__ import annotations

import copy
import json

from pgpathbench.report import export
from pgpathbench.results.fingerprint import Fingerprint
from pgpathbench.results.model import RunResult
from pgpathbench.results.upgrade import upgrade_run
from pgpathbench.studies import STUDIES


def row(study: str, params: dict | None = None, dims: dict | None = None, **run) -> dict:
    return {"run_id": "r", "studies": [study],
            "options": {"studies": [{"study": study, "preset": "quick", "repeat": 1, "params": params or {},
                                     "dims": dims or {}}]}, **run}


def measurement(study: str, case_id: str, dims: dict, **more) -> dict:
    return {"study": study, "case_id": case_id, "round": 1, "ok": True, "metrics": {"tps": 1.0}, "dims": dims, **more}


def test_a_parameter_a_run_stored_before_it_existed_reads_its_default():
    stored = upgrade_run(row("interfaces", {"iterations": 5}))
    assert stored.params["tcp_auth"] == "scram-sha-256" and stored.params["evidence"] == "on"
    assert stored.params["iterations"] == 5                                      # given: kept
    assert upgrade_run(row("interfaces", {"tcp_auth": "md5"})).params["tcp_auth"] == "md5"
    assert set(stored.params) >= set(STUDIES["interfaces"].parameters)


def test_the_given_rows_are_not_changed():
    run, m = row("fdw-overhead", {"scale": 1}), measurement("fdw-overhead", "ro:local:1", {"workload": "ro"})
    before = copy.deepcopy((run, m))
    upgrade_run(run, [], [m], [{"link": "source_0ms"}])
    assert (run, m) == before


def test_fdw_overhead_before_latency_majors_protocol_and_rate():
    """The oldest fdw-overhead shape: no latency, pg, protocol nor rate dimension, paths named without the
    major in probes, measurements and the version-1 fingerprint."""
    dims = {"workload": "ro", "target": "fdw_external", "clients": "1"}
    run = row("fdw-overhead", environment={"sessions": [{"cores": 2, "links": {"source_0ms": {"kind": "direct"}}}]})
    probe = {"link": "source_0ms", "round": 1, "phase": "before", "session": 1, "rtt_median_ms": 0.05,
             "round_trips": 100}
    result = RunResult.from_rows(run, [], [measurement("fdw-overhead", "ro:fdw_external:1", dims, path="source_0ms")],
                                 [probe])
    (case,) = result.cases
    assert case.dims == {**dims, "latency": "0ms", "pg": "15", "protocol": "simple", "rate": "max", "via": "direct",
                         "pool_mode": "-", "fdw_via": "direct"}
    assert case.case_id == "ro:fdw_external:1" and case.stored_dims == dims           # ids as stored
    assert result.rtt() == {"pg15_source_0ms": 0.05} and case.measurements[0].path == "pg15_source_0ms"
    assert list(result.environment.last.paths) == ["pg15_source_0ms"]
    (exported,) = json.loads(export.to_json(result))["measurements"]
    assert exported["dims"] == dims                                                  # the export: as stored


def test_a_path_named_with_its_major_is_kept():
    stored = upgrade_run(row("fdw-overhead"), [], [], [{"link": "pg16_source_5ms+fdw_scan"}])
    assert stored.probes == [{"link": "pg16_source_5ms+fdw_scan"}]


def test_file_fdw_tpch_before_majors():
    dims = {"queries": "q1", "storage": "regular", "layout": "scaleout"}
    stored = upgrade_run(row("file-fdw-tpch"), [{"study": "file-fdw-tpch", "case_id": "q1:regular:scaleout",
                                                 "dims": dims}])
    assert stored.cases[0]["dims"] == {**dims, "pg": "15"}    # the layout keeps its stored name (the reports show it)


def test_interfaces_before_fetch_was_a_dimension():
    """--fetch was a parameter: one size for the cursor method; the other methods have none."""
    cursor = measurement("interfaces", "libpq:cursor:tcp", {"method": "cursor"})
    normal = measurement("interfaces", "libpq:normal:tcp", {"method": "normal"})
    stored = upgrade_run(row("interfaces", {"fetch": 500}, {"method": ["cursor", "normal"]}), [], [cursor, normal])
    assert [m["dims"]["fetch"] for m in stored.measurements] == ["500", "-"]
    assert stored.study_options["dims"]["fetch"] == ["500"]
    unset = upgrade_run(row("interfaces"), [], [cursor])
    assert unset.measurements[0]["dims"]["fetch"] == "1000" and unset.study_options["dims"]["fetch"] == ["1000"]
    today = upgrade_run(row("interfaces", {}, {"fetch": ["10"]}), [], [{**cursor, "dims": {"method": "cursor",
                                                                                              "fetch": "10"}}])
    assert today.measurements[0]["dims"]["fetch"] == "10" and today.study_options["dims"]["fetch"] == ["10"]


def test_a_version_1_fingerprint_files_a_majors_setup_facts_under_it():
    fp = Fingerprint.from_json({"cores": 2, "interfaces_pg15": {"reference": {"sql001": {"rows": 1}}},
                                "file_fdw_tpch_pg16": {"scale": 1}, "file_fdw_tpch_pg16_plans": {"q1": "p"},
                                "fdw_overhead": {"scale": 10}})
    assert fp.setup == {"15": {"interfaces": {"reference": {"sql001": {"rows": 1}}}},
                        "16": {"file-fdw-tpch": {"scale": 1, "plans": {"q1": "p"}}},
                        "": {"fdw_overhead": {"scale": 10}}}
    assert fp.version == 1


def test_metrics_of_model_version_1_in_milliseconds():
    m = {**measurement("remote-sampling", "a", {}), "metrics": {"duration_s": 0.25}}
    (up,) = upgrade_run(row("remote-sampling"), [], [m]).measurements
    assert up["metrics"] == {"duration_ms": 250.0}
    today = row("remote-sampling")
    today["options"]["model_version"] = 3
    assert upgrade_run(today, [], [m]).measurements[0]["metrics"] == {"duration_s": 0.25}


def test_a_study_no_rule_knows_is_read_as_stored():
    stored = upgrade_run({"run_id": "r", "studies": ["x"], "options": {}}, [], [measurement("x", "a", {"d": "1"})])
    assert stored.measurements[0]["dims"] == {"d": "1"} and stored.run["options"] == {"studies": []}
