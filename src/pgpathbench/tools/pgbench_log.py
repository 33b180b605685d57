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
successful transactions (`latency_figures`, METRICS). The log is written to tmpfs when the machine
has one (`scratch.tmpfs_or_tmp`): its writes then stay in memory. They still cost pgbench's thread
an fprintf per logged transaction: about 2 µs on one machine here (-S -c1 against a local
PostgreSQL 15: 12.3 against 10.4 µs of pgbench's CPU per transaction), about 4 µs on another
(through postgres_fdw: 15.1 against 11.1). Logging 500 a second cost that FDW case 1-2% of its TPS,
more than the CPU it adds, and 100 a second nothing measurable (bench/evidence_overhead.py,
--log-lines). So only a random sample of at most LOG_LINES_PER_THREAD_S transactions a second per
thread is logged (--sampling-rate, `sampling_rate`), at the rate the case ran before (its first
run logs every transaction). The per-second series comes from pgbench's own counters instead
(-P 1, `progress_series`), exact whatever is logged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .. import scratch
from ..metrics import Metric

LOG_LINES_PER_THREAD_S = 100    # x 2-4 µs each: under 0.05% of a thread's second
FILE_PREFIX = "tx"                          # --log-prefix inside it
NOT_SUCCESSFUL = {"failed": "failed", "serialization": "failed", "deadlock": "failed", "other": "failed",
                  "skipped": "skipped"}

# The percentiles, each nearest rank: the smallest logged latency that at least p% of the
# successful transactions do not exceed (sorted latencies x_1 <= .. <= x_n: x_ceil(p*n/100)).
PERCENTILES = (50, 90, 95, 99)
METRICS = (
    *(Metric(f"latency_p{p}_ms", "ms", "lower", f"{p}th percentile (nearest rank) of the latency of a successful "
             "transaction, its retries included, over the transactions of pgbench's per-transaction log (-l: "
             f"every one, or a random sample, see latency_log_rate): the smallest logged latency that at least "
             f"{p}% of them do not exceed") for p in PERCENTILES),
    Metric("latency_max_ms", "ms", "lower", "largest latency of a successful transaction, its retries included, "
           "in pgbench's per-transaction log (-l; of the sample when latency_log_rate is below 1)"),
    Metric("latency_log_rate", "1", "none", "share of the transactions pgbench logged (--sampling-rate, drawn at "
           f"random; 1 = every one): below 1 when the case runs above {LOG_LINES_PER_THREAD_S} transactions a "
           "second per pgbench thread (from its second run on)"),
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


def make_log_dir() -> Path:
    """A fresh private (0700) directory for one run's log files, on tmpfs where there is one; the
    caller removes it (scratch.sweep does, should the caller be killed)."""
    return scratch.make_dir("pgbench-log", scratch.tmpfs_or_tmp())


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


def latency_figures(log: TransactionLog, rate: float = 1.0) -> dict[str, float]:
    """METRICS of the successful transactions logged (at --sampling-rate `rate`), in ms; none when
    there was none."""
    if not log.latency_us:
        return {}
    ordered = sorted(log.latency_us)
    out = {f"latency_p{p}_ms": nearest_rank(ordered, p) / 1000 for p in PERCENTILES}
    return {**out, "latency_max_ms": ordered[-1] / 1000, "latency_log_rate": rate}


def sampling_rate(tps: float | None, threads: int) -> float:
    """The share of transactions to log in a run expected at `tps` over `threads` pgbench threads:
    at most LOG_LINES_PER_THREAD_S a second per thread; every one while `tps` is not known."""
    if not tps:   # a small sample of a slow case's first run gives a maximum below its mean
        return 1.0
    return min(1.0, float(f"{LOG_LINES_PER_THREAD_S * threads / tps:.3g}"))


# '-P 1' lines (15+ adds ", N failed"; lat is 0 in a second without a transaction)
_PROGRESS = re.compile(r"^progress: ([\d.]+) s, ([\d.]+) tps, lat ([\d.]+) ms", re.MULTILINE)


def progress_series(stderr: str, transactions: int, duration_s: int) -> list[dict]:
    """Per second of the run, from pgbench's own counters (-P 1, on stderr): point t covers
    [t, t+1) s after its threads started, with "tps" the transactions completed then and
    "latency_ms" their mean (None in a second without any). pgbench often ends before its last
    report: the transactions it counted after that report (more than half a second's worth) are
    a last point, whose mean latency pgbench did not report (None)."""
    series = [{"t": t, "tps": float(tps), "latency_ms": float(lat) if float(tps) else None}
              for t, (_, tps, lat) in enumerate(_PROGRESS.findall(stderr))]
    rest = transactions - sum(p["tps"] for p in series)
    if rest > 0.5 * transactions / max(duration_s, 1):
        series.append({"t": len(series), "tps": round(rest, 1), "latency_ms": None})
    return series
