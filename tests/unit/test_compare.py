"""compare: environment differences that matter, and the per-case table (no servers)."""

import copy

import pytest

from pgpathbench.compare import compare, environment_differences, major_minor
from pgpathbench.results.model import RunResult
from pgpathbench.studies import STUDIES


def session(**over):
    s = {"cpu_model": "Xeon", "cores": 2, "memory_bytes": 8 * 2 ** 30, "load_avg_at_start": [0.5, 0.4, 0.3],
         "pgbench": "pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)",
         "servers": {"source": {"version": "PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu",
                                "settings": {"shared_buffers": "16384", "listen_addresses": "127.0.0.1,169.254.77.6"}}},
         "links": {"source_2ms": {"kind": "proxy", "latency_ms": 2, "jitter_ms": 0, "bandwidth_kbit": None,
                                  "port": 41000, "host": "127.0.0.1"}}}
    s.update(over)
    return s


def run(run_id="A", params=None, sessions=None):
    return {"run_id": run_id, "options": {"studies": [{"study": "fdw-overhead", "preset": "quick", "repeat": 4,
                                                      "params": params or {"scale": 1, "duration": 1,
                                                                           "isolation": "repeatable-read"},
                                                      "dims": {}}]},
            "environment": {"sessions": sessions or [session()]}}


def test_major_minor():
    assert major_minor("PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64") == "15.18"
    assert major_minor("pgbench (PostgreSQL) 16.4") == "16.4"


def test_same_environment_has_no_differences():
    b = run("B", sessions=[session(load_avg_at_start=[3, 3, 3])])
    b["environment"]["sessions"][0]["servers"]["source"]["settings"]["listen_addresses"] = "127.0.0.1,169.254.77.10"
    b["environment"]["sessions"][0]["links"]["source_2ms"]["port"] = 42000
    assert environment_differences(run(), b) == []


def test_every_kind_of_difference_is_named():
    s = session(cpu_model="EPYC", cores=4)
    s["servers"] = copy.deepcopy(s["servers"])
    s["servers"]["source"]["version"] = "PostgreSQL 15.19 (Debian) on x86_64"
    s["servers"]["source"]["settings"] = {"shared_buffers": "32768", "work_mem": "8192"}
    s["links"] = {"source_2ms": {"kind": "proxy", "latency_ms": 2, "jitter_ms": 0, "bandwidth_kbit": 100000}}
    b = run("B", params={"scale": 1, "duration": 1, "isolation": "read-committed"}, sessions=[s])
    diffs = environment_differences(run(), b)
    assert "machine: CPU Xeon vs EPYC" in diffs
    assert "machine: cores 2 vs 4" in diffs
    assert "server source: version 15.18 vs 15.19" in diffs
    assert "server source: shared_buffers 16384 vs 32768" in diffs
    assert "server source: work_mem (default) vs 8192" in diffs
    assert "link source_2ms: bandwidth unlimited vs 100000 kbit/s" in diffs
    assert "fdw-overhead parameters: --isolation repeatable-read vs read-committed" in diffs
    assert len(diffs) == 7


def test_roles_and_links_only_one_run_has_are_not_differences():
    s = session()
    s["servers"] = {**s["servers"], "external": {"version": "PostgreSQL 16.2", "settings": {}}}
    s["links"] = {**s["links"], "source_5ms": {"kind": "proxy", "latency_ms": 5}}
    assert environment_differences(run(), run("B", sessions=[s])) == []


def measurement(case_id, round_no, tps, ok=True):
    return {"study": "fdw-overhead", "case_id": case_id, "round": round_no, "ok": ok,
            "metrics": {"tps": tps} if ok else {}, "dims": {}}


def test_compare_table_rows_and_verdicts():
    ms_a = [measurement("ro:local:1", r, v) for r, v in enumerate([100, 101, 102, 103], 1)]
    ms_a += [measurement("ro:fdw_local:1", r, v) for r, v in enumerate([50, 51, 52, 53], 1)]
    ms_a += [measurement("rw:local:1", 1, 10)]
    ms_b = [measurement("ro:local:1", r, v) for r, v in enumerate([100, 101, 102, 103], 1)]
    ms_b += [measurement("ro:fdw_local:1", r, v) for r, v in enumerate([60, 61, 62, 63], 1)]
    ms_b += [measurement("ro:fdw_external:1", 1, 10)]
    result_a = RunResult.from_rows({**run(), "studies": ["fdw-overhead"]}, [], ms_a, [])
    result_b = RunResult.from_rows({**run("B"), "studies": ["fdw-overhead"]}, [], ms_b, [])
    tables, plots = compare(result_a, result_b, STUDIES)
    (t,) = tables
    rows = {r[0]: r for r in t.rows}
    assert set(rows) == {"ro:local:1", "ro:fdw_local:1"}
    same = rows["ro:local:1"]
    assert same[1:5] == [4, 4, 101.5, 101.5] and same[5] == pytest.approx(1.0) and same[7] == "no"
    faster = rows["ro:fdw_local:1"]
    # every b/a is between 60/53 and 63/50; the HL estimate is the median of the 16 ratios
    assert 60 / 53 <= faster[5] <= 63 / 50 and faster[7] == "yes" and faster[8].startswith("B better (+")
    assert any("1 case(s) only in A, 1 only in B" in n for n in t.notes)
    assert len(plots) == 1 and plots[0].ref_y == 1.0 and len(plots[0].series["tps B / A"]) == 2


def test_client_versions_count_by_major_minor():
    patch = session(pgbench="pgbench (PostgreSQL) 15.18 (Debian 15.18-1)")    # packaging only: same
    assert environment_differences(run(), run("B", sessions=[patch])) == []
    newer = session(pgbench="pgbench (PostgreSQL) 16.4")
    assert environment_differences(run(), run("B", sessions=[newer])) == ["client: pgbench 15.18 vs 16.4"]
