"""Parsing what pgbench 15 prints (output captured from Debian's pgbench 15.18 here), and the metrics a
measurement carries, each declared in fdw-overhead's catalogue."""

from dataclasses import replace

import pytest

from pgpathbench.evidence.pooler import METRICS as POOLER_METRICS
from pgpathbench.studies.fdw_overhead.statements import METRICS as REMOTE_METRICS

from pgpathbench.errors import CaseError
from pgpathbench.references import published_tps_ratio
from pgpathbench.studies import get
from pgpathbench.tools.pgbench import TimedRun, parse_output
from pgpathbench.tools.pgbench_log import latency_figures, parse_transaction_log
from pgpathbench.tools.spawn import process_figures
from pgpathbench.tools.spawn import Measured

OUTPUT = """pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 5
number of threads: 1
maximum number of tries: 10
duration: 2 s
number of transactions actually processed: 3061
number of failed transactions: 752 (19.726%)
number of transactions retried: 2404 (63.064%)
total number of retries: 8240
latency average = 1.164 ms
latency stddev = 0.931 ms
initial connection time = 7.350 ms
tps = 1530.402611 (without initial connection time)
"""


def test_parse_every_figure():
    m = parse_output(OUTPUT)
    assert m == {"transactions": 3061, "failures": 752, "retried": 2404, "retries": 8240,
                 "latency_ms": 1.164, "latency_stddev_ms": 0.931, "initial_connection_ms": 7.35,
                 "tps": 1530.402611, "clients": 5, "threads": 1, "max_tries": 10, "scale": 1,
                 "duration_ms": 2000}


def test_parse_without_retries_defaults_them_to_zero():
    plain = "\n".join(l for l in OUTPUT.splitlines() if "retr" not in l and "failed" not in l)
    m = parse_output(plain)
    assert (m["failures"], m["retries"], m["retried"]) == (0, 0, 0)


def test_parse_rejects_truncated_output():
    with pytest.raises(CaseError, match="printed no tps"):
        parse_output(OUTPUT.split("tps =")[0])


def test_published_ratio_from_seed_000_means():
    assert published_tps_ratio("ro", "fdw_external", 1) == pytest.approx(11512.79 / 1511.04)
    assert published_tps_ratio("rw", "fdw_local", 1) == pytest.approx(209.49 / 139.72)
    assert published_tps_ratio("ro", "fdw_external", 5) is None


def test_every_metric_a_measurement_carries_is_declared():
    measured = Measured(("pgbench",), 0, OUTPUT, "", wall_s=2.05, user_s=0.4, sys_s=0.3, peak_rss_kib=8192)
    log = parse_transaction_log(["0 0 1164 0 1700000000 5000 0", "0 1 failed 0 1700000000 9000 9"])
    rate_log = parse_transaction_log(["0 1 5114 0 1795831724 62267 27 0", "0 2 skipped 0 1795831724 62294 0 0"],
                                     lag=True)
    # -C (--connect each) adds the connections' average
    carried = {**parse_output(OUTPUT + "average connection time = 2.500 ms\n"), **latency_figures(log),
               **process_figures(measured, "wall_ms"), **parse_output(RATE_OUTPUT), **latency_figures(rate_log),
               "rate_offered_tps": 20000}
    study = get("fdw-overhead")
    # run() adds "series" beside them (a list, not a metric); the FDW targets' evidence adds the remote figures,
    # a pooler's counters (evidence/pooler.py) where a case crosses one, and measure() the FDW hop's TLS on a
    # source with TLS (through a pooler, both legs')
    assert set(carried) | {m.name for m in (*REMOTE_METRICS, *POOLER_METRICS)} | {"tls", "pooler_server_tls"} \
        == set(study.metrics)
    for p in ("p50", "p90", "p95", "p99", "max"):
        m = study.metrics[f"latency_{p}_ms"]
        assert (m.unit, m.better) == ("ms", "lower") and "per-transaction log" in m.meaning
    assert study.metrics[study.primary_metric].higher_is_better and study.primary_metric == "tps"
    assert (carried["wall_ms"], carried["cpu_user_ms"], carried["cpu_sys_ms"], carried["peak_rss_mib"]) == \
        (pytest.approx(2050), pytest.approx(400), pytest.approx(300), 8.0)


def test_command_keeps_n_and_reads_latency_stddev():
    ro = TimedRun("localfdw", "/sock", 5432, "pgpathbench", clients=5, duration_s=1, select_only=True, max_tries=10)
    assert ro.command("pgbench") == ["pgbench", "-n", "-S", "-M", "simple", "-c", "5", "-T", "1", "-P", "2",
                                     "--max-tries=10", "-h", "/sock", "-p", "5432", "-U", "pgpathbench", "localfdw"]
    rw = replace(ro, select_only=False)
    assert "-S" not in rw.command("pgbench") and rw.command("pgbench")[1] == "-n"
    assert ro.timeout_s == 61


def test_command_with_protocol_and_scripts():
    run = TimedRun("db", "/sock", 5432, "u", clients=1, duration_s=1, select_only=True, protocol="prepared",
                   scripts=(("/tmp/a.sql", 1), ("/tmp/b.sql", 3)))
    cmd = " ".join(run.command("pgbench"))
    assert "-M prepared" in cmd and "-f /tmp/a.sql@1 -f /tmp/b.sql@3" in cmd and "-S" not in cmd


def test_command_with_log_and_threads():
    run = TimedRun("source", "/sock", 5432, "u", clients=4, duration_s=3, select_only=True, threads=2)
    cmd = run.command("pgbench", "/dev/shm/pgpathbench-pgbench-log-x/tx")
    assert cmd[cmd.index("-j") + 1] == "2"
    assert cmd[cmd.index("-l") + 1] == "--log-prefix=/dev/shm/pgpathbench-pgbench-log-x/tx"
    assert cmd[-1] == "source" and "-l" not in run.command("pgbench")


# pgbench 15.18 -S -c 2 -j 2 -T 2 -R 20000 --latency-limit 5 --max-tries=10 against a local 15 (by hand)
RATE_OUTPUT = """\
transaction type: <builtin: select only>
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 2
maximum number of tries: 10
duration: 2 s
number of transactions actually processed: 7937
number of failed transactions: 0 (0.000%)
number of transactions retried: 0 (0.000%)
total number of retries: 0
number of transactions skipped: 31412 (79.829%)
number of transactions above the 5.0 ms latency limit: 1897/7937 (23.901%)
latency average = 4.924 ms
latency stddev = 1.680 ms
rate limit schedule lag: avg 4.429 (max 5.000) ms
initial connection time = 25.242 ms
tps = 3992.637490 (without initial connection time)
"""


def test_parse_open_loop_figures():
    m = parse_output(RATE_OUTPUT)
    assert (m["skipped"], m["late"], m["schedule_lag_ms"], m["transactions"]) == (31412, 1897, 4.429, 7937)
    assert "skipped" not in parse_output(OUTPUT)   # closed loop: no schedule, nothing skipped


def test_open_loop_log_keeps_the_lag_apart_from_the_latency():
    # under -R the seventh field is the schedule lag, the eighth the retries; skipped lines are counted
    log = parse_transaction_log(["0 1 5114 0 1795831724 62267 27 0", "1 2 6255 0 1795831724 65336 1382 0",
                                 "0 2 skipped 0 1795831724 62294 0 0"], lag=True)
    assert (log.latency_us, log.lag_us, log.skipped) == ((5114, 6255), (27, 1382), 1)
    figures = latency_figures(log)
    assert (figures["latency_p99_ms"], figures["schedule_lag_p99_ms"], figures["latency_sample_n"]) == (6.255, 1.382, 2)
    with pytest.raises(ValueError):   # a closed-loop line where a lag is due
        parse_transaction_log(["0 1 5114 0 1795831724 62267"], lag=True)
