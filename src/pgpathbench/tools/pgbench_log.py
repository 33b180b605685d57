"""pgbench's logs (-l): where they are written, how they are read, what each gives.

pgbench writes one log per run, one file per thread (PREFIX.PID, then PREFIX.PID.1 .. .N-1 with
-j N), of one of two kinds: it refuses --sampling-rate with --aggregate-interval, and -l with
--aggregate-interval writes the aggregate only. So a run gives either

- the per-transaction log (PostgreSQL 15-18, "Per-Transaction Logging" in pgbench's
  documentation, doLog in pgbench.c), every transaction or a random sample (--sampling-rate):

      client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]

  `time` is the latency in whole microseconds, or a word for a transaction that did not succeed:
  `failed` (with --failures-detailed, 17+, `serialization`, `deadlock` or `other`) or `skipped`
  (--rate with --latency-limit); time_epoch and time_us are when it completed. It gives the
  percentiles (of the sample, whose size is stated), and, when every transaction is in it, the
  exact minimum, maximum and per-second series too;
- or the aggregate log (--aggregate-interval=1): per epoch second `interval_start
  num_transactions sum_latency sum_latency_2 min_latency max_latency ...` over every successful
  transaction (µs), then lag, skipped, retry and failure counters. pgbench 15 never writes the
  interval the run ends in (doLog flushes only the intervals that have ended before it is called
  last): that second's count is what pgbench's total counted beyond the logged ones, its mean
  latency unknown. It gives the exact per-second series, not the run's minimum or maximum.

Every logged transaction costs pgbench's thread an fprintf: about 2 µs on one machine here (-S
-c1 against a local PostgreSQL 15: 12.3 against 10.4 µs of pgbench's CPU per transaction), about
4 µs on another (through postgres_fdw: 15.1 against 11.1). Logging 500 a second cost that FDW case
1-2% of its TPS, and 100 a second nothing measurable (bench/evidence_overhead.py, --log-lines).
The aggregate log costs a few additions per transaction and a line a second. So `next_log`
plans each run of a case: every transaction logged when the case runs at most
LOG_LINES_PER_THREAD_S a second per thread; a faster case alternates the aggregate log (its
series) with a random sample of at most that many a second per thread (its percentiles); a
case's first run, whose pace is not known yet, writes the aggregate log. The log is written to
tmpfs when the machine has one (`scratch.tmpfs_or_tmp`): its writes then stay in memory.
"""

from __future__ import annotations

from collections import defaultdict
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
# logged successful transactions do not exceed (sorted latencies x_1 <= .. <= x_n: x_ceil(p*n/100)).
PERCENTILES = (50, 90, 95, 99)
LAG_PERCENTILES = (50, 99)
_EXACT = ("pgbench's per-transaction log of every transaction; not given when the run logged a sample or "
          "its aggregate log only")
METRICS = (
    *(Metric(f"latency_p{p}_ms", "ms", "lower", f"{p}th percentile (nearest rank) of the latency of a successful "
             "transaction, its retries included, over the transactions of pgbench's per-transaction log: every "
             f"one of the run's (latency_log_rate 1) or a random sample of latency_sample_n of them: the smallest "
             f"logged latency that at least {p}% of them do not exceed") for p in PERCENTILES),
    Metric("latency_sample_n", "tx", "none", "successful transactions the percentiles are taken over: every one "
           "of the run's when latency_log_rate is 1, else a random sample (pgbench --sampling-rate)"),
    Metric("latency_min_ms", "ms", "lower", f"smallest latency of a successful transaction of the run, from {_EXACT}"),
    Metric("latency_max_ms", "ms", "lower", "largest latency of a successful transaction of the run, its retries "
           f"included, from {_EXACT}"),
    *(Metric(f"schedule_lag_p{p}_ms", "ms", "lower", f"-R only: {p}th percentile (nearest rank) of the schedule lag "
             "of the same logged transactions (from a transaction's scheduled start to its actual start; under -R "
             "its latency includes it)") for p in LAG_PERCENTILES),
    Metric("latency_log_rate", "1", "none", "share of the transactions pgbench logged one by one (--sampling-rate, "
           f"drawn at random; 1 = every one): below 1 when the case runs above {LOG_LINES_PER_THREAD_S} "
           "transactions a second per pgbench thread; not given when the run wrote pgbench's aggregate log"),
)


@dataclass(frozen=True)
class LogPlan:
    """How one pgbench run logs: its aggregate log, or its per-transaction one at `rate`."""
    aggregate: bool = False
    rate: float = 1.0          # --sampling-rate (1: every transaction); unused with the aggregate log

    def options(self, prefix: str) -> list[str]:
        if self.aggregate:
            return ["-l", f"--log-prefix={prefix}", "--aggregate-interval=1"]
        return ["-l", f"--log-prefix={prefix}", *([f"--sampling-rate={self.rate}"] if self.rate < 1 else [])]


def next_log(tps: float | None, threads: int, runs_before: int) -> LogPlan:
    """The log of a case's next run, from its last TPS (None: not known) and how many runs of it
    logged before: every transaction when that costs nothing measurable; otherwise the aggregate
    log in its 1st, 3rd... run and a random sample in the others."""
    rate = sampling_rate(tps, threads)
    if tps is None or (rate < 1 and runs_before % 2 == 0):
        return LogPlan(aggregate=True)
    return LogPlan(rate=rate)


@dataclass(frozen=True)
class TransactionLog:
    """The successful transactions of a log (latency and completion, µs) and how many were not."""
    latency_us: tuple[int, ...]   # 'time' of every successful transaction, in the order read
    end_us: tuple[int, ...]       # its completion: time_epoch * 10^6 + time_us, same order
    failed: int = 0               # 'failed' lines (and 17+'s detailed failure words)
    skipped: int = 0              # 'skipped' lines
    lag_us: tuple[int, ...] = ()  # -R: schedule_lag of every successful transaction, same order

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


def _lines(directory: Path) -> Iterable[str]:
    for path in log_files(directory):
        with open(path, encoding="ascii") as f:
            yield from f


def read_transaction_log(directory: Path, lag: bool = False) -> TransactionLog:
    """parse_transaction_log over every thread's file in `directory`."""
    return parse_transaction_log(_lines(directory), lag)


def read_aggregate_log(directory: Path) -> dict[int, Interval]:
    """parse_aggregate_log over every thread's file in `directory`."""
    return parse_aggregate_log(_lines(directory))


def parse_transaction_log(lines: Iterable[str], lag: bool = False) -> TransactionLog:
    """The transactions of per-transaction log lines (any thread, any order); blank lines are
    ignored, anything else that is not such a line is a ValueError. lag: the run had -R, so the
    seventh field is the schedule lag (without -R it is the retries, given --max-tries)."""
    latency: list[int] = []
    end: list[int] = []
    lags: list[int] = []
    counts = {"failed": 0, "skipped": 0}
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        if not 6 + lag <= len(fields) <= 8:
            raise ValueError(f"not a pgbench per-transaction log line: {line.strip()!r}")
        try:
            completed = int(fields[4]) * 1_000_000 + int(fields[5])
            if fields[2] in NOT_SUCCESSFUL:
                counts[NOT_SUCCESSFUL[fields[2]]] += 1
                continue
            latency.append(int(fields[2]))
            if lag:
                lags.append(int(fields[6]))
        except ValueError:
            raise ValueError(f"not a pgbench per-transaction log line: {line.strip()!r}") from None
        end.append(completed)
    return TransactionLog(tuple(latency), tuple(end), **counts, lag_us=tuple(lags))


def nearest_rank(ordered: list[int] | tuple[int, ...], p: int) -> int:
    """The p-th percentile (0 < p <= 100) of ascending values by nearest rank: x_ceil(p*n/100)."""
    if not ordered or not 0 < p <= 100:
        raise ValueError("nearest_rank needs values and 0 < p <= 100")
    return ordered[-(-p * len(ordered) // 100) - 1]


def latency_figures(log: TransactionLog, rate: float = 1.0) -> dict[str, float]:
    """METRICS of the successful transactions logged (at --sampling-rate `rate`), in ms: the
    percentiles and the sample's size; the minimum and maximum only when every one was logged.
    None when there was none."""
    if not log.latency_us:
        return {}
    ordered = sorted(log.latency_us)
    out = {f"latency_p{p}_ms": nearest_rank(ordered, p) / 1000 for p in PERCENTILES}
    if log.lag_us:
        lags = sorted(log.lag_us)
        out.update({f"schedule_lag_p{p}_ms": nearest_rank(lags, p) / 1000 for p in LAG_PERCENTILES})
    out.update(latency_sample_n=len(ordered), latency_log_rate=rate)
    if rate >= 1:
        out.update(latency_min_ms=ordered[0] / 1000, latency_max_ms=ordered[-1] / 1000)
    return out


def transaction_figures(log: TransactionLog, rate: float, transactions: int) -> dict:
    """What a per-transaction log gives a run that counted `transactions`: latency_figures, and the
    series when every transaction was logged. ValueError when it should hold them all and does not."""
    if rate < 1:
        return {**latency_figures(log, rate), "series": []}
    if log.successful != transactions:
        raise ValueError(f"pgbench counted {transactions} transactions, its log holds {log.successful} "
                         "successful ones")
    seconds: dict[int, list[int]] = defaultdict(list)
    for latency, end in zip(log.latency_us, log.end_us):
        seconds[end // 1_000_000].append(latency)
    return {**latency_figures(log, rate),
            "series": _series({s: Interval(len(v), sum(v)) for s, v in seconds.items()}, 0)}


def sampling_rate(tps: float | None, threads: int, lines_per_thread_s: int = LOG_LINES_PER_THREAD_S) -> float:
    """The share of transactions to log in a run expected at `tps` over `threads` pgbench threads:
    at most `lines_per_thread_s` a second per thread; every one while `tps` is not known."""
    if not tps:
        return 1.0
    return min(1.0, float(f"{lines_per_thread_s * threads / tps:.3g}"))


@dataclass(frozen=True)
class Interval:
    """One second of the aggregate log, every thread's added: successful transactions, their summed latency (µs)."""
    transactions: int
    latency_sum_us: float


def parse_aggregate_log(lines: Iterable[str]) -> dict[int, Interval]:
    """Aggregate log lines of every thread -> per interval start (epoch second) the threads' sum;
    blank lines are ignored, anything else that is not such a line is a ValueError."""
    out: dict[int, Interval] = {}
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        try:
            if len(fields) < 6 or not all(float(f) >= 0 for f in fields):
                raise ValueError
            start, count, latency_sum = int(fields[0]), int(fields[1]), float(fields[2])
        except ValueError:
            raise ValueError(f"not a pgbench aggregate log line: {line.strip()!r}") from None
        before = out.get(start, Interval(0, 0.0))
        out[start] = Interval(before.transactions + count, before.latency_sum_us + latency_sum)
    return out


def aggregate_figures(intervals: dict[int, Interval], transactions: int) -> dict:
    """The series of an aggregate log of a run that counted `transactions`: the seconds logged, and
    a last one with what pgbench counted beyond them (the second it ended in, which pgbench 15 does
    not write; with several threads, what each did in its own unwritten second). ValueError when
    the log holds more than the run counted."""
    rest = transactions - sum(i.transactions for i in intervals.values())
    if rest < 0:
        raise ValueError(f"pgbench counted {transactions} transactions, its aggregate log {transactions - rest}")
    return {"series": _series(intervals, rest)}


def _series(seconds: dict[int, Interval], rest: int) -> list[dict]:
    """Per second from the first, with every second between: "t" (seconds since the first), "tps"
    (successful transactions completed in it) and "latency_ms" (their mean; None without any);
    then `rest` transactions in the second after the last, mean unknown."""
    if not seconds:
        return [{"t": 0, "tps": rest, "latency_ms": None}] if rest else []
    first, last = min(seconds), max(seconds)
    series = []
    for s in range(first, last + 1):
        i = seconds.get(s, Interval(0, 0.0))
        series.append({"t": s - first, "tps": i.transactions,
                       "latency_ms": i.latency_sum_us / i.transactions / 1000 if i.transactions else None})
    if rest:
        series.append({"t": last + 1 - first, "tps": rest, "latency_ms": None})
    return series
