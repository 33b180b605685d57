"""pgbench's logs (tools/pgbench_log.py): per-transaction and aggregate lines as pgbench 15-18
writes them, the latency percentiles (nearest rank), the exact minimum, maximum and per-second
series, and which log each run of a case writes."""

import dataclasses
import os
from pathlib import Path

import pytest

from pgpathbench import scratch
from pgpathbench.tools import pgbench
from pgpathbench.tools.pgbench_log import (Interval, LogPlan, TransactionLog, aggregate_figures, latency_figures,
                                           log_files, nearest_rank, next_log, parse_aggregate_log,
                                           parse_transaction_log, read_aggregate_log, read_transaction_log,
                                           sampling_rate, transaction_figures)

EPOCH = 1700000000
# Two threads' files of one run with --max-tries=10 (the trailing field is the retries). Thread 0:
# client 0 starts at EPOCH + 0.1 s; thread 1: client 1, one failed and one skipped transaction.
# Nothing completes in second 2 of the run; the last transaction completes in second 3. Lines of
# both clients interleave in time across the files; a file may hold a blank line.
THREAD0 = f"""0 0 1000 0 {EPOCH} 101000 0
0 1 2000 0 {EPOCH} 103000 0
0 2 500000 0 {EPOCH + 1} 600000 2
0 3 3000 0 {EPOCH + 3} 150000 0
"""
THREAD1 = f"""1 0 4000 0 {EPOCH} 900000 1
1 1 failed 0 {EPOCH + 1} 0 9
1 2 skipped 0 {EPOCH + 1} 5000 0

1 3 6000 0 {EPOCH + 1} 99999 0
"""


def test_parse_keeps_successful_transactions_and_counts_the_others():
    log = parse_transaction_log((THREAD0 + THREAD1).splitlines())
    assert log.latency_us == (1000, 2000, 500000, 3000, 4000, 6000)
    assert log.end_us[0] == EPOCH * 1_000_000 + 101000 and log.end_us[-1] == EPOCH * 1_000_000 + 1_099_999
    assert (log.successful, log.failed, log.skipped) == (6, 1, 1)


def test_parse_reads_15s_plain_lines_and_17s_detailed_failures_and_lag():
    lines = [f"3 7 1234 0 {EPOCH} 5", f"3 8 serialization 0 {EPOCH} 9", f"2 1 deadlock 1 {EPOCH} 10",
             f"4 2 other 0 {EPOCH} 11 3", f"5 9 777 1 {EPOCH} 12 150 4"]   # the last: schedule lag, retries
    log = parse_transaction_log(lines)
    assert log.latency_us == (1234, 777) and log.failed == 3 and log.skipped == 0


@pytest.mark.parametrize("line", ["0 0 1000 0 1700000000", "0 0 fast 0 1700000000 5", "garbage",
                                  "0 0 1000 0 1700000000 5 1 2 3"])
def test_parse_rejects_what_is_not_a_log_line(line):
    with pytest.raises(ValueError, match="not a pgbench per-transaction log line"):
        parse_transaction_log([line])


def test_read_every_threads_file(tmp_path):
    (tmp_path / "tx.4242").write_text(THREAD0)
    (tmp_path / "tx.4242.1").write_text(THREAD1)
    (tmp_path / "other").write_text("not ours\n")
    assert [p.name for p in log_files(tmp_path)] == ["tx.4242", "tx.4242.1"]
    assert read_transaction_log(tmp_path) == parse_transaction_log((THREAD0 + THREAD1).splitlines())


def test_nearest_rank():
    values = list(range(1, 101))              # 1..100: the p-th percentile is p
    assert [nearest_rank(values, p) for p in (1, 50, 90, 95, 99, 100)] == [1, 50, 90, 95, 99, 100]
    assert [nearest_rank([10, 20, 30, 40], p) for p in (25, 26, 50, 51, 75, 100)] == [10, 20, 20, 30, 30, 40]
    assert nearest_rank([7], 50) == 7
    with pytest.raises(ValueError):
        nearest_rank([], 50)


def test_latency_figures_in_ms():
    log = parse_transaction_log((THREAD0 + THREAD1).splitlines())
    # sorted: 1000 2000 3000 4000 6000 500000 (µs); n = 6: p50 -> rank 3, p90/p95/p99 -> rank 6
    assert latency_figures(log) == {"latency_p50_ms": 3.0, "latency_p90_ms": 500.0, "latency_p95_ms": 500.0,
                                    "latency_p99_ms": 500.0, "latency_sample_n": 6, "latency_log_rate": 1.0,
                                    "latency_min_ms": 1.0, "latency_max_ms": 500.0}
    assert latency_figures(TransactionLog((), (), failed=3)) == {}


def test_a_samples_figures_have_its_size_and_no_minimum_or_maximum():
    """A sample's largest latency is not the run's: issue 42 found one below the run's average."""
    log = parse_transaction_log((THREAD0 + THREAD1).splitlines())
    figures = latency_figures(log, 0.01)
    assert figures["latency_sample_n"] == 6 and figures["latency_log_rate"] == 0.01
    assert "latency_max_ms" not in figures and "latency_min_ms" not in figures and figures["latency_p99_ms"] == 500.0


def test_latency_figures_of_many_transactions():
    lines = [f"0 {i} {lat} 0 {EPOCH} {i}" for i, lat in enumerate(range(1000, 0, -1))]   # 1..1000 µs, reversed
    f = latency_figures(parse_transaction_log(lines))
    assert (f["latency_p50_ms"], f["latency_p90_ms"], f["latency_p95_ms"], f["latency_p99_ms"],
            f["latency_max_ms"], f["latency_min_ms"], f["latency_sample_n"]) == (0.5, 0.9, 0.95, 0.99, 1.0, 0.001, 1000)


def test_every_transaction_logged_gives_the_exact_series():
    log = parse_transaction_log((THREAD0 + THREAD1).splitlines())
    figures = transaction_figures(log, 1.0, 6)
    # completed in seconds 0 (1000, 2000, 4000 µs), 1 (500000, 6000), none in 2, 3 (3000)
    assert figures["series"] == [{"t": 0, "tps": 3, "latency_ms": 7 / 3}, {"t": 1, "tps": 2, "latency_ms": 253.0},
                                 {"t": 2, "tps": 0, "latency_ms": None}, {"t": 3, "tps": 1, "latency_ms": 3.0}]
    assert sum(p["tps"] for p in figures["series"]) == 6 and figures["latency_max_ms"] == 500.0
    with pytest.raises(ValueError, match="pgbench counted 7 transactions, its log holds 6 successful ones"):
        transaction_figures(log, 1.0, 7)
    sampled = transaction_figures(log, 0.5, 12)       # a sample: no series, whatever was counted
    assert sampled["series"] == [] and sampled["latency_sample_n"] == 6


# Two threads' aggregate files of a run that counted 31,000 transactions: thread 1 began a second
# later; neither wrote the second it ended in (pgbench 15 does not); second EPOCH + 2 had none in thread 0.
AGG0 = f"""{EPOCH} 9000 900000 91000000 20 9035 0 0 0 0 0 0 0 0 0
{EPOCH + 1} 10000 1000000 101000000 19 5000 0 0 0 0 0 0 0 0 0
{EPOCH + 2} 0 0 0 0 0 0 0 0 0 0 0 0 0 0
"""
AGG1 = f"""{EPOCH + 1} 2000 400000 80000000 25 7000 0 0 0 0 0 88 162 0 0

{EPOCH + 2} 4000 400000 41000000 25 900 0 0 0 0 0 0 0 0 0
"""


def test_aggregate_log_lines_of_every_thread_add_up(tmp_path):
    (tmp_path / "tx.77").write_text(AGG0)
    (tmp_path / "tx.77.1").write_text(AGG1)
    assert read_aggregate_log(tmp_path) == {EPOCH: Interval(9000, 900000.0), EPOCH + 1: Interval(12000, 1400000.0),
                                            EPOCH + 2: Interval(4000, 400000.0)}
    for bad in ["garbage", f"{EPOCH} 10 100 1000 1", f"{EPOCH} ten 100 1000 1 20", "0 0 1000 0 1700000000 5 x"]:
        with pytest.raises(ValueError, match="not a pgbench aggregate log line"):
            parse_aggregate_log([bad])


def test_the_aggregate_series_sums_exactly_to_the_count():
    intervals = parse_aggregate_log((AGG0 + AGG1).splitlines())
    series = aggregate_figures(intervals, 31000)["series"]
    assert series == [{"t": 0, "tps": 9000, "latency_ms": 0.1}, {"t": 1, "tps": 12000, "latency_ms": 1400 / 12000},
                      {"t": 2, "tps": 4000, "latency_ms": 0.1},
                      {"t": 3, "tps": 6000, "latency_ms": None}]     # the unwritten last second: 31000 - 25000
    assert sum(p["tps"] for p in series) == 31000
    assert aggregate_figures(intervals, 25000)["series"][-1]["t"] == 2          # it ended on a second's edge
    assert aggregate_figures({}, 2084) == {"series": [{"t": 0, "tps": 2084, "latency_ms": None}]}   # under 1 s
    assert aggregate_figures({}, 0) == {"series": []}
    with pytest.raises(ValueError, match="pgbench counted 24999 transactions, its aggregate log 25000"):
        aggregate_figures(intervals, 24999)


def test_which_log_each_run_of_a_case_writes():
    assert next_log(None, 1, 0) == LogPlan(aggregate=True)          # pace unknown: the aggregate log
    assert next_log(90, 1, 1) == next_log(90, 1, 2) == LogPlan(rate=1.0)   # slow: every transaction, always
    fast = [next_log(18000, 1, k) for k in range(1, 5)]               # fast: a sample, then the aggregate...
    assert fast == [LogPlan(rate=0.00556), LogPlan(aggregate=True), LogPlan(rate=0.00556), LogPlan(aggregate=True)]
    assert next_log(18000, 2, 1) == LogPlan(rate=0.0111)


def test_each_plans_command_line():
    spec = pgbench.TimedRun("db", "/sock", 5432, "u", clients=1, duration_s=3, select_only=True)
    assert spec.command("pgbench")[spec.command("pgbench").index("-P") + 1] == "4"   # no report, latency measured
    assert "-l" not in spec.command("pgbench")
    every = spec.command("pgbench", "/d/tx")
    assert "--log-prefix=/d/tx" in every and not any(a.startswith(("--sampling", "--aggregate")) for a in every)
    sample = dataclasses.replace(spec, log=LogPlan(rate=0.01)).command("pgbench", "/d/tx")
    assert "--sampling-rate=0.01" in sample and "-l" in sample
    aggregate = dataclasses.replace(spec, log=LogPlan(aggregate=True)).command("pgbench", "/d/tx")
    assert "--aggregate-interval=1" in aggregate and not any(a.startswith("--sampling") for a in aggregate)


def test_sampling_rate_keeps_logged_lines_per_thread_bounded():
    assert sampling_rate(None, 1) == 1.0                           # not known yet: every transaction
    assert sampling_rate(90, 1) == 1.0
    assert sampling_rate(18000, 1) == pytest.approx(100 / 18000, rel=1e-3)
    assert sampling_rate(18000, 2) == pytest.approx(200 / 18000, rel=1e-3)
    assert sampling_rate(1e9, 1) > 0


def test_log_dir_is_private_on_tmpfs_and_removed_when_the_run_is_interrupted(monkeypatch):
    seen = []

    def interrupted(args, timeout, env=None):
        prefix = next(a for a in args if a.startswith("--log-prefix="))[len("--log-prefix="):]
        directory = Path(prefix).parent
        seen.append(directory)
        assert directory.is_dir() and directory.stat().st_mode & 0o777 == 0o700
        (directory / "tx.1").write_text("0 0 10 0 1700000000 0\n")
        raise KeyboardInterrupt
    monkeypatch.setattr(pgbench, "spawn_measured", interrupted)
    spec = pgbench.TimedRun("db", "/sock", 5432, "u", clients=1, duration_s=1)
    with pytest.raises(KeyboardInterrupt):
        pgbench.run("pgbench", spec)
    assert len(seen) == 1 and str(seen[0].parent) == scratch.tmpfs_or_tmp() and not seen[0].exists()
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        assert scratch.tmpfs_or_tmp() == "/dev/shm"
