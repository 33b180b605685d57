"""pgbench's per-transaction log (tools/pgbench_log.py): its lines as pgbench 15-18 writes them,
the latency percentiles (nearest rank) and the per-second series."""

import os
from pathlib import Path

import pytest

from pgpathbench import scratch
from pgpathbench.tools import pgbench
from pgpathbench.tools.pgbench_log import (TransactionLog, latency_figures, log_files, nearest_rank,
                                           parse_transaction_log, progress_series, read_transaction_log,
                                           sampling_rate)

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
                                    "latency_p99_ms": 500.0, "latency_max_ms": 500.0, "latency_log_rate": 1.0}
    assert latency_figures(TransactionLog((), (), failed=3)) == {}


def test_latency_figures_of_many_transactions():
    lines = [f"0 {i} {lat} 0 {EPOCH} {i}" for i, lat in enumerate(range(1000, 0, -1))]   # 1..1000 µs, reversed
    f = latency_figures(parse_transaction_log(lines))
    assert (f["latency_p50_ms"], f["latency_p90_ms"], f["latency_p95_ms"], f["latency_p99_ms"],
            f["latency_max_ms"]) == (0.5, 0.9, 0.95, 0.99, 1.0)


PROGRESS = """pgbench (15.18 (Debian 15.18-0+deb12u1))
progress: 1.0 s, 16724.7 tps, lat 0.119 ms stddev 0.389, 0 failed
progress: 2.0 s, 0.0 tps, lat 0.000 ms stddev 0.000, 0 failed
progress: 3.1 s, 12934.1 tps, lat 0.154 ms stddev 0.373, 0 failed
"""


def test_progress_series_from_pgbench_counters():
    series = progress_series(PROGRESS, 29659, 3)
    assert series == [{"t": 0, "tps": 16724.7, "latency_ms": 0.119},
                      {"t": 1, "tps": 0.0, "latency_ms": None},        # a second without a transaction
                      {"t": 2, "tps": 12934.1, "latency_ms": 0.154}]   # 0.2 short of the count: rounding


def test_progress_series_adds_what_pgbench_counted_after_its_last_report():
    series = progress_series(PROGRESS, 39659, 4)      # 10,000.2 more than reported: the 4th second
    assert series[-1] == {"t": 3, "tps": 10000.2, "latency_ms": None}
    assert sum(p["tps"] for p in series) == pytest.approx(39659)
    assert progress_series("", 2084, 1) == [{"t": 0, "tps": 2084, "latency_ms": None}]   # -T 1: no report
    assert progress_series("", 0, 1) == []


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
