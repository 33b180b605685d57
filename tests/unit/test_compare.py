"""compare: environment differences that matter, and the per-case table (no servers)."""

import copy
import re

import pytest

from pgpathbench.results.fingerprint import major_minor
from pgpathbench.report.compare import (compare, environment_differences, knob_differences, not_judged,
                                 pair_cases, slower, worse_beyond)
from pgpathbench.errors import UserError
from pgpathbench.matrix import Dimension, Parameter
from pgpathbench.metrics import Metric
from pgpathbench.results.model import RunResult
from pgpathbench.stats import Shift
from pgpathbench.studies import STUDIES
from pgpathbench.studies.base import Vocabulary


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


def test_a_run_on_user_servers_differs_from_one_on_managed_ones_or_other_user_servers():
    params = {"scale": 1, "duration": 1, "isolation": "repeatable-read"}
    mine = run("B", params={**params, "servers": {"source": "host=db1 user=app dbname=app"}})
    assert environment_differences(run(), mine) == [
        "servers: user servers (--server) none: all managed vs source=host=db1 user=app dbname=app"]
    other = run("C", params={**params, "servers": {"source": "host=db2 user=app dbname=app"}})
    assert environment_differences(mine, other) == [
        "servers: user servers (--server) source=host=db1 user=app dbname=app vs source=host=db2 user=app dbname=app"]
    assert environment_differences(mine, copy.deepcopy(mine)) == []


def test_a_server_on_another_host_differs_from_one_here_and_on_another_host():
    from pgpathbench.servers.host_facts import HostFacts
    facts = HostFacts.parse("hostname=h1\nmachine_id=m1\ncpu_model=EPYC\ncores=8\nmemory_kb=1048576\n"
                            "kernel=6.1.0\nclocksource=tsc\npostgres=/usr/bin|postgres (PostgreSQL) 16.4\n")
    assert facts.installations == {16: ("/usr/bin", "postgres (PostgreSQL) 16.4")}

    def placed(**over):
        s = session()
        s["servers"] = copy.deepcopy(s["servers"])
        s["servers"]["source"]["host"] = {**facts.fingerprint(), **over}
        return run("B", sessions=[s])
    assert environment_differences(run(), placed()) == ["server source: host this machine vs h1 (m1)"]
    assert environment_differences(placed(), placed()) == []
    assert environment_differences(placed(), placed(host="h2", machine_id="m2", cores=4, clocksource="hpet")) == [
        "server source: host h1 (m1) vs h2 (m2)", "server source: host cores 8 vs 4",
        "server source: host clock source tsc vs hpet"]


def measurement(case_id, round_no, tps, ok=True):
    return {"study": "fdw-overhead", "case_id": case_id, "round": round_no, "ok": ok,
            "metrics": {"tps": tps} if ok else {}, "dims": dict(zip(("workload", "target", "clients"), case_id.split(":")))}


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
    assert "Not compared, only in A (1: no case of the other run with the same id or differing only in knobs): " \
        "rw:local:1." in t.notes
    assert any(n.startswith("Not compared, only in B (1: ") and n.endswith("): ro:fdw_external:1.") for n in t.notes)
    assert len(plots) == 1 and plots[0].ref_y == 1.0 and len(plots[0].series["tps B / A"]) == 2


def test_client_versions_count_by_major_minor():
    patch = session(pgbench="pgbench (PostgreSQL) 15.18 (Debian 15.18-1)")    # packaging only: same
    assert environment_differences(run(), run("B", sessions=[patch])) == []
    newer = session(pgbench="pgbench (PostgreSQL) 16.4")
    assert environment_differences(run(), run("B", sessions=[newer])) == ["client: pgbench 15.18 vs 16.4"]


# -- the CI gate: compare --fail-if-slower PCT ---------------------------------------------------
TPS = Metric("tps", "tx/s", "higher", "transactions per second")
LATENCY = Metric("latency_ms", "ms", "lower", "latency average")
FACT = Metric("rows", "rows", "none", "rows read")


def shift(low, high, coverage=0.97):
    return Shift(4, 4, (low + high) / 2, low, high, coverage)


@pytest.mark.parametrize("low, high, fails", [(0.38, 0.45, True), (0.80, 0.899, True), (0.80, 0.90, False),
                                              (0.85, 0.95, False), (1.1, 1.3, False)])
def test_higher_is_better_fails_when_the_whole_interval_is_below_the_bound(low, high, fails):
    assert worse_beyond(shift(low, high), TPS, 10) is fails


@pytest.mark.parametrize("low, high, fails", [(1.2, 1.5, True), (1.101, 1.2, True), (1.10, 1.2, False),
                                              (1.05, 1.3, False), (0.5, 0.8, False)])
def test_lower_is_better_fails_when_the_whole_interval_is_above_the_bound(low, high, fails):
    assert worse_beyond(shift(low, high), LATENCY, 10) is fails


def test_no_claim_below_95_percent_and_none_without_a_direction():
    assert not worse_beyond(shift(0.1, 0.2, coverage=0.9), TPS, 10)       # 3 + 3 rounds: 90%
    assert worse_beyond(shift(0.1, 0.2, coverage=0.95), TPS, 10)
    assert not worse_beyond(shift(0.1, 0.2), FACT, 10) and not worse_beyond(shift(5, 9), FACT, 10)
    assert not worse_beyond(shift(0.001, 0.002), TPS, 1000)               # -1000%: never reached


def fake_run(run_id, values):
    """A run of the fake study: case id ('workload:protocol') -> TPS per round (None: failed);
    latency_ms is 1000 / TPS."""
    ms = [{"study": "fake", "case_id": case, "round": r, "ok": v is not None,
           "metrics": {} if v is None else {"tps": v, "latency_ms": 1000 / v if v else 0},
           "dims": dict(zip(("workload", "protocol"), case.split(":")))}
          for case, vs in values.items() for r, v in enumerate(vs, 1)]
    return RunResult.from_rows({**run(run_id), "studies": ["fake"]}, [], ms, [])


def registry(primary="tps", knob=True):
    dims = {"workload": Dimension("workload", "w", ("ro", "rw")),
            "protocol": Dimension("protocol", "pgbench -M", ("simple", "prepared", "extended"), knob=knob)}
    params = {"isolation": Parameter("isolation", "i", str, knob=True), "scale": Parameter("scale", "s", int),
              "auth": Parameter("auth", "a", str, "scram-sha-256", knob=True)}
    return {"fake": Vocabulary("fake", "Fake", (), (), dims, params, {}, {"workload": ("ro",), "protocol": ("simple",)},
                               {"tps": TPS, "latency_ms": LATENCY}, primary)}


BASE = [100, 101, 102, 103]


def test_slower_names_each_failing_case_once():
    a = fake_run("A", {"ro:simple": BASE, "rw:simple": BASE})
    b = fake_run("B", {"ro:simple": [40, 41, 42, 43], "rw:simple": [95, 96, 97, 98]})
    (line,) = slower(a, b, registry(), 10)
    assert re.fullmatch(r"ro:simple: tps B/A 0\.4\d* \[0\.\d+, 0\.4\d*\], worse than -10% at 95%", line), line
    assert slower(a, b, registry(), 70) == []
    # the same runs judged by latency (lower is better): B/A about 2.5, worse than +10%
    (line,) = slower(a, b, registry(primary="latency_ms"), 10)
    assert re.fullmatch(r"ro:simple: latency_ms B/A 2\.\d+ \[2\.\d+, 2\.\d+\], worse than \+10% at 95%", line), line


def test_improvement_and_cases_without_values_never_fail():
    a = fake_run("A", {"ro:simple": BASE, "rw:simple": BASE, "ro:prepared": BASE})
    b = fake_run("B", {"ro:simple": [300, 301, 302, 303], "rw:simple": [None] * 4, "ro:prepared": [0, 0, 0, 0]})
    assert slower(a, b, registry(), 1) == []          # better, failed rounds only, values <= 0 (no ratio)
    assert slower(b, a, registry(), 1) == ["ro:simple: tps B/A 0.337 [0.33, 0.343], worse than -1% at 95%"]


def test_same_values_never_fail_at_any_bound():
    a, b = fake_run("A", {"ro:simple": BASE}), fake_run("B", {"ro:simple": BASE})
    assert slower(a, b, registry(), 0.001) == []


# -- pairing across knob dimensions ---------------------------------------------------------------
def test_cases_differing_only_in_a_knob_pair_up():
    a = fake_run("A", {"ro:simple": BASE, "rw:simple": BASE})
    b = fake_run("B", {"ro:prepared": [40, 41, 42, 43], "rw:prepared": BASE})
    pairing = pair_cases(a, b, registry())
    assert [(x.case_id, y.case_id) for x, y in pairing.pairs] == [("ro:simple", "ro:prepared"),
                                                                ("rw:simple", "rw:prepared")]
    assert pairing.knobs == {"protocol": (("simple",), ("prepared",))} and (pairing.only_a, pairing.only_b) == ((), ())
    (t,), _ = compare(a, b, registry())
    assert [r[0] for r in t.rows] == ["ro:simple vs ro:prepared", "rw:simple vs rw:prepared"]
    assert any(n.startswith("Cases paired across knob dimension(s)") and "protocol simple (A) vs prepared (B)" in n
               for n in t.notes)
    assert slower(a, b, registry(), 10)[0].startswith("ro:simple vs ro:prepared: tps B/A 0.4")


def test_shared_case_ids_pair_by_id_and_the_rest_across_knobs():
    """Issue 42: runs sharing some ids (a case without knobs, local) pair the others across the knob
    (fdw_external at fetch_size 100 vs 10) instead of leaving them out."""
    a = fake_run("A", {"ro:simple": BASE, "rw:simple": BASE})
    b = fake_run("B", {"ro:simple": BASE, "rw:prepared": [40, 41, 42, 43]})
    pairing = pair_cases(a, b, registry())
    assert [(x.case_id, y.case_id) for x, y in pairing.pairs] == [("ro:simple", "ro:simple"),
                                                                ("rw:simple", "rw:prepared")]
    assert pairing.knobs == {"protocol": (("simple",), ("prepared",))} and (pairing.only_a, pairing.only_b) == ((), ())
    (line,) = slower(a, b, registry(), 5)
    assert line.startswith("rw:simple vs rw:prepared: tps B/A 0.4"), line


def test_exact_partners_are_never_taken_by_a_knob_pairing():
    """A case paired by id is not offered again: ro:prepared of A stays alone though ro:simple of B
    differs from it only in the knob, and ro:extended of B, also alone, is its partner."""
    a = fake_run("A", {"ro:simple": BASE, "ro:prepared": BASE})
    b = fake_run("B", {"ro:simple": BASE})
    pairing = pair_cases(a, b, registry())
    assert [(x.case_id, y.case_id) for x, y in pairing.pairs] == [("ro:simple", "ro:simple")]
    assert (pairing.only_a, pairing.only_b, pairing.knobs) == (("ro:prepared",), (), {})
    b = fake_run("B", {"ro:simple": BASE, "ro:extended": BASE})
    assert [(x.case_id, y.case_id) for x, y in pair_cases(a, b, registry()).pairs] == [
        ("ro:simple", "ro:simple"), ("ro:prepared", "ro:extended")]


def test_cases_left_without_a_partner_are_named_on_both_sides():
    a = fake_run("A", {"ro:simple": BASE, "rw:simple": BASE})
    b = fake_run("B", {"ro:simple": BASE, "rw:simple": [None] * 4, "ro:prepared": BASE})
    pairing = pair_cases(a, b, registry())    # rw:simple failed in B: measured, so paired, without values
    assert [(x.case_id, y.case_id) for x, y in pairing.pairs] == [("ro:simple", "ro:simple"), ("rw:simple", "rw:simple")]
    assert (pairing.only_a, pairing.only_b) == ((), ("ro:prepared",))
    lone = pair_cases(a, fake_run("B", {"rw:prepared": BASE}), registry())    # ro:simple has no partner
    assert [(x.case_id, y.case_id) for x, y in lone.pairs] == [("rw:simple", "rw:prepared")]
    assert (lone.only_a, lone.only_b) == (("ro:simple",), ())


def test_not_judged_names_the_cases_the_gate_cannot_fail():
    a = fake_run("A", {"ro:simple": BASE, "rw:simple": BASE, "ro:prepared": BASE[:2], "ro:extended": BASE})
    b = fake_run("B", {"ro:simple": [10, 11, 12, 13], "rw:simple": [None] * 4, "ro:prepared": [10, 11],
                       "ro:extended": [0, 0, 0, 0]})
    assert not_judged(a, b, registry()) == [
        "rw:simple: no values", "ro:prepared: 2 + 2 rounds give a 67% interval, too few for 95% (4 + 4 give 97%)",
        "ro:extended: values <= 0"]
    assert slower(a, b, registry(), 5) == ["ro:simple: tps B/A 0.113 [0.0971, 0.13], worse than -5% at 95%"]
    assert not_judged(a, a, registry()) == ["ro:prepared: 2 + 2 rounds give a 67% interval, too few for 95% (4 + 4 "
                                            "give 97%)"]


@pytest.mark.parametrize("values_a, values_b, one", [
    ({"ro:simple": BASE}, {"ro:prepared": BASE, "ro:extended": BASE}, "case ro:simple of A pairs with 2 cases of B "
                                                                       "(ro:prepared, ro:extended)"),
    ({"ro:prepared": BASE, "ro:extended": BASE}, {"ro:simple": BASE}, "case ro:simple of B pairs with 2 cases of A "
                                                                       "(ro:prepared, ro:extended)"),
])
def test_an_ambiguous_pairing_is_refused_with_one_line(values_a, values_b, one):
    with pytest.raises(UserError) as e:
        pair_cases(fake_run("A", values_a), fake_run("B", values_b), registry())
    message = str(e.value)
    assert "\n" not in message and message.startswith("compare: " + one) and "knob(s) protocol" in message
    assert "; compare runs with one value of each knob" in message


def test_cases_differing_in_a_dimension_that_is_no_knob_do_not_pair():
    a, b = fake_run("A", {"ro:simple": BASE}), fake_run("B", {"rw:prepared": BASE})
    assert pair_cases(a, b, registry()).pairs == ()
    a, b = fake_run("A", {"ro:simple": BASE}), fake_run("B", {"ro:prepared": BASE})
    assert pair_cases(a, b, registry(knob=False)).pairs == ()                 # protocol not declared a knob
    assert compare(a, b, registry(knob=False)) == ([], [])


def test_a_knob_parameter_is_no_environment_difference():
    base = {"scale": 1, "isolation": "repeatable-read"}
    a = {**run("A", params=base), "options": {"studies": [{"study": "fake", "params": base}]}}
    b = {**run("B"), "options": {"studies": [{"study": "fake", "params": {**base, "isolation": "serializable"}}]}}
    assert environment_differences(a, b) == ["fake parameters: --isolation repeatable-read vs serializable"]
    assert environment_differences(a, b, registry()) == []
    assert knob_differences(a, b, registry()) == ["fake parameters: --isolation repeatable-read vs serializable"]
    c = {**run("C"), "options": {"studies": [{"study": "fake", "params": {**base, "scale": 10}}]}}
    assert environment_differences(a, c, registry()) == ["fake parameters: --scale 1 vs 10"]


def test_a_knob_parameter_a_run_lacks_is_its_default():
    """A run stored before a knob parameter existed ran with its default (results/upgrade.py gives it
    on read): a difference from a run that set it otherwise is named, one with the default is none."""
    def interfaces_run(run_id, **params):
        row = {**run(run_id), "studies": ["interfaces"],
               "options": {"studies": [{"study": "interfaces", "params": params, "dims": {}}]}}
        return RunResult.from_rows(row, [], [], [])
    old, md5, scram = interfaces_run("A"), interfaces_run("B", tcp_auth="md5"), interfaces_run("C", tcp_auth="scram-sha-256")
    assert knob_differences(old, md5, STUDIES) == ["interfaces parameters: --tcp-auth scram-sha-256 vs md5"]
    assert environment_differences(old, md5, STUDIES) == []
    assert knob_differences(old, scram, STUDIES) == [] and knob_differences(old, old, STUDIES) == []


def test_compare_names_both_runs_tool_versions_and_does_not_refuse_them():
    machine = {"cpu_model": "Xeon", "cores": 2, "memory_bytes": 8 * 2 ** 30}
    tools = [{"pgpathbench": "0.1.0", "pgpathbench_commit": "a" * 40, "pgpathbench_dirty": False},
             {"pgpathbench": "0.2.0", "pgpathbench_commit": "b" * 40, "pgpathbench_dirty": True}]
    results = [RunResult.from_rows({**run(run_id, sessions=[{"version": 2, "machine": {**machine, **tool}}]),
                                    "studies": ["fdw-overhead"]}, [],
                                   [measurement("ro:local:1", r, 100 + r) for r in range(1, 5)], [])
               for run_id, tool in zip("AB", tools)]
    assert environment_differences(*results, STUDIES) == []   # a new version is what compare is for
    (table,), _ = compare(*results, STUDIES)
    assert ("pgpathbench: A 0.1.0, commit aaaaaaaaaaaa (clean); B 0.2.0, commit bbbbbbbbbbbb (work tree modified)."
            in table.notes)
    stored_before = RunResult.from_rows({**run("C", sessions=[{"version": 2, "machine": {"pgpathbench": "0.1.0"}}]),
                                         "studies": ["fdw-overhead"]}, [], [], [])
    assert stored_before.environment.tool_versions() == "0.1.0, commit unknown"


def test_docs_quote_the_checked_sections():
    """docs/results.md lists what compare checks: each of fingerprint.CHECKED's sections, as the tuple
    says it, so the page changes with the code."""
    from pathlib import Path

    from pgpathbench.results.fingerprint import CHECKED
    page = (Path(__file__).resolve().parents[2] / "docs" / "results.md").read_text()
    assert all(f"- {words}\n" in page for words, _ in CHECKED)


def test_debians_15_and_the_shipped_15_bundle_are_different_server_versions():
    # version() of each, as their servers report it (the bundle's: io.zonky...:15.19.0)
    zonky = "PostgreSQL 15.19 on x86_64-pc-linux-gnu, compiled by gcc (Ubuntu 7.5.0-3ubuntu1~18.04) 7.5.0, 64-bit"
    s = session()
    s["servers"] = copy.deepcopy(s["servers"])
    s["servers"]["source"]["version"] = zonky
    assert environment_differences(run(), run("B", sessions=[s])) == ["server source: version 15.18 vs 15.19"]
