"""pgbench's per-transaction log (-l): where it is written, how it is read, what it gives.

Each line (PostgreSQL 15-18, "Per-Transaction Logging" in pgbench's documentation, doLog in
pgbench.c) is

    client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

`time` is the transaction's latency in whole microseconds, or a word instead of a number for a
transaction that did not succeed: `failed` (after --max-tries tries; with --failures-detailed,
17+, `serialization`, `deadlock` or `other`) or `skipped` (--rate with --latency-limit).
time_epoch and time_us are when it completed (seconds since the Unix epoch and the microseconds
within that second); schedule_lag is printed with --rate only, retries when --max-tries != 1.
With -j N pgbench writes one file per thread: PREFIX.PID, then PREFIX.PID.1 .. PREFIX.PID.N-1.

The pure functions here read those lines (`parse_transaction_log`), rank the latencies of the
successful transactions (`latency_figures`, METRICS) and count them per second (`per_second`).
The log is written to tmpfs when the machine has one (`log_base`): its writes then stay in
memory, out of the measured path as far as a log can be.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..metrics import Metric

TMPFS = "/dev/shm"
DIR_PREFIX = "pgpathbench-pgbench-log-"   # the private directory of one run's log files
FILE_PREFIX = "tx"                          # --log-prefix inside it
NOT_SUCCESSFUL = {"failed": "failed", "serialization": "failed", "deadlock": "failed", "other": "failed",
                  "skipped": "skipped"}

# The percentiles, each nearest rank: the smallest logged latency that at least p% of the
# successful transactions do not exceed (sorted latencies x_1 <= .. <= x_n: x_ceil(p*n/100)).
PERCENTILES = (50, 90, 95, 99)
METRICS = (
    *(Metric(f"latency_p{p}_ms", "ms", "lower", f"{p}th percentile (nearest rank) of the latency of a successful "
             "transaction, its retries included, over every transaction of pgbench's per-transaction log (-l): "
             f"the smallest logged latency that at least {p}% of them do not exceed") for p in PERCENTILES),
    Metric("latency_max_ms", "ms", "lower", "largest latency of a successful transaction, its retries included, "
           "in pgbench's per-transaction log (-l)"),
)


@dataclass(frozen=True)
class TransactionLog:
    """The successful transactions of a log (latency and completion, µs) and how many were not."""
    latency_us: tuple[int, ...]   # 'time' of every successful transaction, in the order read
    end_us: tuple[int, ...]       # its completion: time_epoch * 10^6 + time_us, same order
    failed: int = 0               # 'failed' lines (and 17+'s detailed failure words)
    skipped: int = 0              # 'skipped' lines

    @property
    def successful(self) -> int:
        return len(self.latency_us)


def log_base() -> str:
    """Where a run's log directory goes: tmpfs (/dev/shm) when it is there and writable."""
    if os.path.isdir(TMPFS) and os.access(TMPFS, os.W_OK | os.X_OK):
        return TMPFS
    return tempfile.gettempdir()


def make_log_dir() -> Path:
    """A fresh private (0700) directory for one run's log files; the caller removes it."""
    return Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=log_base()))


def log_files(directory: Path) -> list[Path]:
    """Every thread's file of the log written with --log-prefix=directory/FILE_PREFIX."""
    return sorted(p for p in directory.iterdir() if p.name.startswith(FILE_PREFIX + "."))


def read_transaction_log(directory: Path) -> TransactionLog:
    """parse_transaction_log over every thread's file in `directory`."""
    def lines() -> Iterable[str]:
        for path in log_files(directory):
            with open(path, encoding="ascii") as f:
                yield from f
    return parse_transaction_log(lines())


def parse_transaction_log(lines: Iterable[str]) -> TransactionLog:
    """The transactions of per-transaction log lines (any thread, any order); blank lines are
    ignored, anything else that is not such a line is a ValueError."""
    latency: list[int] = []
    end: list[int] = []
    counts = {"failed": 0, "skipped": 0}
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        if not 6 <= len(fields) <= 8:
            raise ValueError(f"not a pgbench per-transaction log line: {line.strip()!r}")
        try:
            completed = int(fields[4]) * 1_000_000 + int(fields[5])
            if fields[2] in NOT_SUCCESSFUL:
                counts[NOT_SUCCESSFUL[fields[2]]] += 1
                continue
            latency.append(int(fields[2]))
        except ValueError:
            raise ValueError(f"not a pgbench per-transaction log line: {line.strip()!r}") from None
        end.append(completed)
    return TransactionLog(tuple(latency), tuple(end), **counts)


def nearest_rank(ordered: list[int] | tuple[int, ...], p: int) -> int:
    """The p-th percentile (0 < p <= 100) of ascending values by nearest rank: x_ceil(p*n/100)."""
    if not ordered or not 0 < p <= 100:
        raise ValueError("nearest_rank needs values and 0 < p <= 100")
    return ordered[-(-p * len(ordered) // 100) - 1]


def latency_figures(log: TransactionLog) -> dict[str, float]:
    """METRICS of the successful transactions, in ms; none when there was none."""
    if not log.latency_us:
        return {}
    ordered = sorted(log.latency_us)
    out = {f"latency_p{p}_ms": nearest_rank(ordered, p) / 1000 for p in PERCENTILES}
    out["latency_max_ms"] = ordered[-1] / 1000
    return out


def per_second(log: TransactionLog) -> list[dict]:
    """Successful transactions per second of the run: second t holds those that completed in
    [start + t, start + t + 1) s, start the first transaction's start (the earliest completion
    minus its latency); every second from 0 to the last is there, one without a transaction with
    tps 0 and latency_ms None. The tps sum to log.successful."""
    if not log.latency_us:
        return []
    start = min(e - l for e, l in zip(log.end_us, log.latency_us))
    seconds = (max(log.end_us) - start) // 1_000_000 + 1
    count, total = [0] * seconds, [0] * seconds
    for e, l in zip(log.end_us, log.latency_us):
        t = (e - start) // 1_000_000
        count[t] += 1
        total[t] += l
    return [{"t": t, "tps": n, "latency_ms": round(total[t] / n / 1000, 3) if n else None}
            for t, n in enumerate(count)]
