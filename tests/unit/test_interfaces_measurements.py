"""interfaces (seed 003): the seed's analysis of its measurements, the metric catalogues, the
published figures, the clients' JSON and the measured spawn."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pgpathbench.tools import clients
from pgpathbench.tools.clients import ClientOutputError, parse_client_json, repeated_checksum, spawn_measured
from pgpathbench.errors import CaseError
from pgpathbench.references import (INTERFACES_CANDIDATE_RANKING, INTERFACES_LOCCOMM_DURATION,
                                    INTERFACES_LOCATION_RANKING, INTERFACES_STRATEGY_AVG_DURATION,
                                    INTERFACES_TESTCASE_DURATION)
from pgpathbench.datasets.seed003 import QUERIES
from pgpathbench.results.model import RunResult
from pgpathbench.studies import STUDIES
from pgpathbench.studies.base import StudyEnv
from pgpathbench.matrix import StudyOptions
from pgpathbench.studies.interfaces import study as interfaces_study
from pgpathbench.studies.interfaces.report import candidate_ranking, location_ranking, normalised, seed_groups
from pgpathbench.tools.psql_copy import Reference
from pgpathbench.tools.spawn import Measured
from test_interfaces_study import STUDY, options

# -- the seed's analysis -------------------------------------------------------------------------
def measurement(interface, method, transport, sqlstrat, round_no, duration_s, iterations=1, output="p-all:file",
                latency="0ms", pg="15", study="interfaces", ok=True):
    dims = {"interface": interface, "method": method, "transport": transport, "sqlstrat": sqlstrat,
            "output": output, "latency": latency, "pg": pg}
    return {"study": study, "ok": ok, "round": round_no, "dims": dims, "case_id": ":".join(dims.values()),
            "metrics": {"duration_ms": duration_s * 1000, "iterations": iterations}}


def result_of(measurements):
    """The result model of a run holding these measurements (model version 2: milliseconds)."""
    run = {"run_id": "r", "studies": ["interfaces"], "options": {"model_version": 2}}
    return RunResult.from_rows(run, [], measurements, []).study


def test_groups_carry_the_seeds_labels():
    (g,) = seed_groups(result_of([measurement("odbc", "normal", "unix", "sql001:each", 3, 2.5, 50_000,
                                              "p-all:null")]))
    # the seed's first testcase, ODBC:lcl:ipc:sql001:0:50k:acc-n:p-all:null, as its views take it apart
    assert (g.candidate, g.location, g.ifmeth_testcase, g.loccomm_testcase) == \
        ("ODBC:acc-n", "lcl:ipc", "sql001:50k:lcl:ipc:0:p-all:null", "ODBC:acc-n:sql001:50k:0:p-all:null")
    assert (g.grpsz, g.duration, g.drange) == (1, 2.5, 0.0)
    assert g.key.seed_testcase() == "sql001:50k:lcl:ipc:0:p-all:null"


def test_normalised_duration_and_ranking_by_hand():
    # one testcase (sql50k once over lcl:tcp), three candidates, two rounds each
    ms = [measurement("libpq", "copy", "tcp", "sql50k:once", 1, 1.0), measurement("libpq", "copy", "tcp", "sql50k:once", 2, 1.2),
          measurement("odbc", "normal", "tcp", "sql50k:once", 1, 2.0), measurement("odbc", "normal", "tcp", "sql50k:once", 2, 2.0),
          measurement("jdbc", "normal", "tcp", "sql50k:once", 1, 4.0), measurement("jdbc", "normal", "tcp", "sql50k:once", 2, 5.0)]
    groups = seed_groups(result_of(ms))
    by = {g.candidate: (g, nd, nr) for g, nd, nr in normalised(groups, "ifmeth_testcase")}
    # averages 1.1, 2.0, 4.5 -> (x - 1.1) / 3.4; ranges 0.2, 0, 1 -> x / 1
    assert by["libpq:acc-y"][1:] == (0.0, 0.2)
    assert by["ODBC:acc-n"][1] == round(0.9 / 3.4, 5) and by["ODBC:acc-n"][2] == 0.0
    assert by["JDBC:acc-n"][1:] == (1.0, 1.0)
    assert by["JDBC:acc-n"][0].grpsz == 2 and by["JDBC:acc-n"][0].drange == 1.0
    ranking = candidate_ranking(groups)["15"]
    assert [r.candidate for r in ranking] == ["libpq:acc-y", "ODBC:acc-n", "JDBC:acc-n"]
    assert ranking[1][:5] == ("ODBC:acc-n", 2.0, round(0.9 / 3.4, 3), 0.0, 1)


def test_a_testcase_with_one_candidate_normalises_to_zero_not_a_division_by_zero():
    ms = [measurement("libpq", "copy", "unix", "sql10m:once", r, 1.0 + r) for r in (1, 2)]
    (row,) = candidate_ranking(seed_groups(result_of(ms)))["15"]
    assert (row.avg_nml_dur, row.avg_nml_drng) == (0.0, 0.0)


def test_location_ranking_partitions_by_interface_and_method():
    ms = []
    for rnd in (1, 2):
        for transport, d in (("unix", 1.0), ("tcp", 2.0), ("remote", 3.0)):
            ms.append(measurement("libpq", "normal", transport, "sql50k:once", rnd, d))
            ms.append(measurement("odbc", "normal", transport, "sql50k:once", rnd, d * 10))
    ranking = location_ranking(seed_groups(result_of(ms)))["15"]
    assert [(r.candidate, r.avg_nml_dur, r.testcases) for r in ranking] == \
        [("lcl:ipc", 0.0, 2), ("lcl:tcp", 0.5, 2), ("rmt:tcp", 1.0, 2)]


def test_failed_and_other_studies_measurements_are_left_out():
    ms = [measurement("libpq", "copy", "unix", "sql10m:once", 1, 1.0),
          measurement("libpq", "copy", "unix", "sql10m:once", 2, 9.0, ok=False)]
    (g,) = seed_groups(result_of(ms))
    assert (g.grpsz, g.duration) == (1, 1.0)
    # A run holds one study: another study's measurement never reaches the analysis.
    with pytest.raises(ValueError, match="holds a measurement of fdw-overhead"):
        result_of(ms + [measurement("libpq", "copy", "unix", "sql10m:once", 3, 9.0, study="fdw-overhead")])


# -- the metric catalogues -----------------------------------------------------------------------
def fake_client(rows, size, checksum):
    """run_native_client's stand-in: a client run that read these rows, with the contract's times."""
    def run(client, conninfo, sql, *, mode="normal", iterations=1, dest="/dev/null", **kw):
        if dest != "/dev/null":
            Path(dest).write_bytes(b"x" * size * iterations)
        out = {**GOOD, "client": client, "mode": mode, "iterations": iterations, "rows": rows * iterations,
               "bytes": size * iterations, "checksum": f"{repeated_checksum(int(checksum, 16), iterations):016x}"}
        return clients.ClientRun(out, 0.25, 0.1, 0.05, 20480)
    return run


@pytest.mark.parametrize("sqlstrat, output", [("sql001:each", "p-all:file"), ("sql10m:once", "p-none:null")])
def test_every_metric_a_measurement_carries_is_declared(monkeypatch, tmp_path, sqlstrat, output):
    ref = Reference(3, 300, "00000000000000ff")
    monkeypatch.setattr(interfaces_study, "run_native_client", fake_client(3, 300, ref.checksum))
    (case,) = STUDY.cases(options(interface=("libpq",), method=("copy",), transport=("tcp",),
                                  sqlstrat=(sqlstrat,), output=(output,)))
    opts = StudyOptions(STUDY.name, "quick", 6, {"iterations": 20, "timeout": 60}, STUDY.default_dims)
    target = interfaces_study.Target("host=x", SimpleNamespace(client_env=lambda base: {**base, "PGPASSFILE": "pf"},
                                                                 tls=None))
    env = StudyEnv(opts, "15", None, None, lambda line: None,
                   interfaces_study.InterfacesState(dict(QUERIES), {"local": target.server},
                                                    {("tcp", "0ms", "direct"): target},
                                                    {"sql001": ref, "sql10m": ref}, [], str(tmp_path / "out")))
    metrics = STUDY.measure(env, case)
    assert set(metrics) <= set(STUDY.metrics), set(metrics) - set(STUDY.metrics)
    assert metrics["duration_ms"] == 250 and metrics["connect_ms"] == pytest.approx(1.0)
    assert metrics["startup_ms"] == pytest.approx(250 - 6) and metrics["cpu_ms"] == pytest.approx(150)
    assert STUDY.metrics[STUDY.primary_metric].better == "lower"


PGBENCH_LOOP = ("number of transactions actually processed: 2000/2000\n"
                "initial connection time = 3.500 ms\ntps = 8000.0 (without initial connection time)\n")


@pytest.mark.parametrize("workload, tool", [("copy", "reference"), ("loop", "reference"), ("copy", "libpq"),
                                            ("loop", "jdbc"), ("copy", "libpq-nochecksum")])
def test_every_fidelity_metric_is_declared(monkeypatch, workload, tool):
    from pgpathbench.studies.interfaces_fidelity import study as fidelity_study
    study = STUDIES["interfaces-fidelity"]
    ref = Reference(3, 300, "00000000000000ff")
    monkeypatch.setattr(fidelity_study, "run_native_client", fake_client(3 if workload == "copy" else 1, 300,
                                                                         ref.checksum))
    monkeypatch.setattr(fidelity_study, "spawn_measured", lambda args, timeout, env=None, stdout=None: Measured(
        tuple(args), 0, PGBENCH_LOOP if "pgbench" in args[0] else "", "", 0.5, 0.2, 0.1, 4096))
    (case,) = [c for c in study.cases(StudyOptions(study.name, "quick", 6, {}, study.default_dims))
               if (c["workload"], c["tool"], c["transport"]) == (workload, tool, "tcp")]
    opts = StudyOptions(study.name, "quick", 6, {"iterations": 2000, "timeout": 60}, study.default_dims)
    env = StudyEnv(opts, "15", SimpleNamespace(path=lambda tool: tool), None, lambda line: None,
                   fidelity_study.InterfacesFidelityState({"tcp": interfaces_study.Target("host=x", None)}, "loop.sql",
                                                          ref, {"PGPASSFILE": "pf"}, []))
    metrics = study.measure(env, case)
    assert set(metrics) <= set(study.metrics), set(metrics) - set(study.metrics)
    assert metrics["duration_ms"] > 0 and study.metrics[study.primary_metric].unit == "ms"
    if (workload, tool) == ("loop", "reference"):
        assert metrics["work_ms"] == pytest.approx(2000 / 8000 * 1000) and metrics["connect_ms"] == 3.5


# -- the published figures -----------------------------------------------------------------------
def test_published_rankings_are_the_slides():
    assert list(INTERFACES_CANDIDATE_RANKING) == ["libpq:acc-a", "libpq:acc-n", "libpq:acc-y", "JDBC:acc-y",
                                                  "ODBC:acc-n", "JDBC:acc-n"]
    assert [v[1] for v in INTERFACES_CANDIDATE_RANKING.values()] == sorted(
        v[1] for v in INTERFACES_CANDIDATE_RANKING.values())
    assert INTERFACES_LOCATION_RANKING["rmt:tcp"] == (9.0, 1.0, 0.538)
    assert len(INTERFACES_STRATEGY_AVG_DURATION) == 12
    # The slides agree with each other: libpq normal, sql50k once over rmt:tcp, on two slides
    assert INTERFACES_TESTCASE_DURATION[("sql50k:001:rmt:tcp:1:p-all:file", "libpq:acc-n")] == \
        INTERFACES_LOCCOMM_DURATION[("libpq:acc-n:sql50k:001:1:p-all:file", "rmt:tcp")] == 0.60207
    # and the strategy summary is the mean of a testcase's candidates
    tc = "sql001:50k:lcl:tcp:1:p-all:file"
    mean = statistics.fmean(v for (t, _), v in INTERFACES_TESTCASE_DURATION.items() if t == tc)
    assert round(mean, 3) == INTERFACES_STRATEGY_AVG_DURATION[tc]


# -- the clients' JSON ---------------------------------------------------------------------------
GOOD = {"client": "libpq", "version": "libpq 15.18", "mode": "copy", "iterations": 2, "rows": 4, "bytes": 100,
        "checksum": "0123456789abcdef", "connect_s": 0.001, "exec_s": 0.002, "fetch_s": 0.003, "total_s": 0.006,
        "iteration_us": {"min": 2900, "max": 2950, "hist": [[2816, 1], [2944, 1]]}}


ONE_ITERATION = {"min": 5000, "max": 5000, "hist": [[4864, 1]]}


def line(**changes) -> str:
    return json.dumps({**GOOD, **changes}) + "\n"


def test_valid_json_is_returned():
    assert parse_client_json(line(), "libpq", "copy", 2) == GOOD


@pytest.mark.parametrize("stdout, message", [
    ("", "expected one JSON line on stdout, got 0"),
    (line() + line(), "got 2"),
    ("not json\n", "stdout is not JSON"),
    ("[1, 2]\n", "expected a JSON object"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "bytes"}), "JSON keys"),
    (json.dumps(dict(reversed(list(GOOD.items())))), "in that order"),
    (json.dumps({**GOOD, "extra": 1}), "JSON keys"),
    (line(client="odbc"), "client is 'odbc', expected 'libpq'"),
    (line(version="libpq"), "version names no driver version"),
    (line(mode="normal"), "mode is 'normal', expected 'copy'"),
    (line(iterations=3), "iterations is 3, expected 2"),
    (line(rows=-1), "rows is not a whole number"),
    (line(rows=True), "rows is not a whole number"),
    (line(bytes=1.5), "bytes is not a whole number"),
    (line(checksum="0123456789ABCDEF"), "checksum is not 16 lower-case hex digits"),
    (line(checksum="0123"), "checksum is not 16"),
    (line(fetch_s=-0.1), "fetch_s is not a number of seconds"),
    (line(exec_s="0.1"), "exec_s is not a number of seconds"),
    (line(total_s=0.005), "exceed total_s"),
])
def test_invalid_json_fails_the_measurement(stdout, message):
    with pytest.raises(ClientOutputError, match=message) as e:
        parse_client_json(stdout, "libpq", "copy", 2)
    assert isinstance(e.value, CaseError)


def test_rounding_slack_of_six_decimals():
    assert parse_client_json(line(total_s=0.005997), "libpq", "copy", 2)["total_s"] == 0.005997


# -- the measured spawn ----------------------------------------------------------------------------
needs_measure = pytest.mark.skipif(not clients.MEASURE.is_file(), reason="scripts/build-clients not run")


@needs_measure
def test_peak_rss_is_the_childs_own_not_the_parents():
    ballast = bytearray(200 << 20)     # this process is large: a forked child must not inherit that
    ballast[::4096] = b"x" * len(ballast[::4096])
    small = spawn_measured(["true"], 10)
    big = spawn_measured([sys.executable, "-c", "b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096])"],
                         30)
    del ballast
    assert small.returncode == 0 and small.peak_rss_kib < 10 * 1024, small
    assert big.returncode == 0 and big.peak_rss_kib > 300 * 1024, big


@needs_measure
def test_cpu_time_and_wall_time_and_output():
    m = spawn_measured([sys.executable, "-c", "import time, sys\nt = time.process_time()\n"
                        "while time.process_time() - t < 0.3: pass\nprint('out'); print('err', file=sys.stderr)"], 30)
    assert m.returncode == 0 and m.stdout == "out\n" and m.stderr == "err\n"
    assert 0.25 < m.user_s + m.sys_s < m.wall_s + 0.05 and m.wall_s < 10


@needs_measure
def test_exit_codes_signals_and_timeouts():
    assert spawn_measured(["sh", "-c", "exit 3"], 10).returncode == 3
    assert spawn_measured(["sh", "-c", "kill -9 $$"], 10).returncode == -9
    missing = spawn_measured(["/nonexistent/program"], 10)
    assert missing.returncode == 127 and "cannot run" in missing.stderr
    slow = spawn_measured(["sleep", "30"], 0.5)
    assert slow.timed_out and slow.wall_s < 5


@needs_measure
def test_run_native_client_maps_failures_to_case_errors(tmp_path, monkeypatch):
    fake = tmp_path / "pgpb_libpq"
    fake.write_text("#!/bin/sh\n"
                    "case \"$2\" in\n"
                    "  usage) echo 'pgpb_libpq: -k: bad' >&2; exit 2 ;;\n"
                    "  server) echo 'pgpb_libpq: query failed: ERROR: boom' >&2; exit 3 ;;\n"
                    "  garbage) echo 'hello'; exit 0 ;;\n"
                    f"  *) echo '{json.dumps({**GOOD, 'mode': 'normal', 'iterations': 1, 'iteration_us': ONE_ITERATION})}' ;;\n"
                    "esac\n")
    fake.chmod(0o755)
    monkeypatch.setattr(clients, "TOOLS", tmp_path)
    ok = clients.run_native_client("libpq", "ok", "select 1")
    assert ok.output["rows"] == 4 and ok.peak_rss_kib > 0 and ok.wall_s > 0
    for conninfo, message in (("usage", "usage error: pgpb_libpq: -k: bad"),
                              ("server", "server or connection error: pgpb_libpq: query failed: ERROR: boom"),
                              ("garbage", "stdout is not JSON")):
        with pytest.raises(CaseError, match=message):
            clients.run_native_client("libpq", conninfo, "select 1")

