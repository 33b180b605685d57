"""pgbench as a measuring tool: its command line, its run through the measured spawn, its figures.

`TimedRun` says what one `pgbench -T` run is (database, clients, threads, seconds, protocol,
select-only or TPC-B-like or the user's scripts, --max-tries); `run()` spawns it through tools/spawn.py and
returns every figure pgbench printed (`parse_output`), what its log gives (tools/pgbench_log.py:
the per-transaction log's percentiles, or the aggregate log's exact per-second series) and what
the kernel accounted for it (wall time, CPU, peak RSS: `process_metrics`). METRICS declares each figure as pgbench.c's
StatsData comment defines its counters; a study's catalogue takes them from here.

pgbench always runs with -n: without it pgbench TRUNCATEs pgbench_history, and postgres_fdw
(14+) sends that TRUNCATE through a foreign table to the remote server. A caller that wants
what -n skips (vacuum, truncate) does it on the tables themselves.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import CaseError, ServerRefused
from ..procs import password_env
from ..metrics import Metric
from . import pgbench_log
from .spawn import process_figures, process_metrics, spawn_measured

GRACE_S = 60              # pgbench -T ends on time; past duration + grace it is hung
APPLICATION_NAME = "pgpathbench"

@dataclass(frozen=True)
class Figure:
    """A figure pgbench prints: the metric it becomes and how pgbench 15+ prints it."""
    metric: Metric
    pattern: str         # group 1 is the value
    factor: int = 1      # to the metric's unit (pgbench prints -T in seconds)


FIGURES = (
    Figure(Metric("tps", "tx/s", "higher", "successful transactions per second, the initial connections' time "
                  "excluded; with -C (connect per transaction) every connection's time included"),
           r"tps = ([\d.]+) \((?:without initial connection time|including reconnection times)\)"),
    Figure(Metric("latency_ms", "ms", "lower", "average latency of a successful transaction, its retries "
                  "included (measured per transaction: -P is given)"), r"latency average = ([\d.]+) ms"),
    Figure(Metric("latency_stddev_ms", "ms", "lower", "standard deviation of that latency"),
           r"latency stddev = ([\d.]+) ms"),
    Figure(Metric("initial_connection_ms", "ms", "lower", "time pgbench took to open its clients' connections "
                  "before the first transaction"), r"initial connection time = ([\d.]+) ms"),
    Figure(Metric("connection_ms", "ms", "lower", "with -C (a new connection per transaction): the average time "
                  "a connection took to open"), r"average connection time = ([\d.]+) ms"),
    Figure(Metric("transactions", "tx", "higher", "'cnt': successful transactions, successfully retried ones "
                  "included, failed ones not"), r"number of transactions actually processed: (\d+)"),
    Figure(Metric("failures", "tx", "lower", "'failed': transactions that still met a serialization or deadlock "
                  "error after --max-tries tries"), r"number of failed transactions: (\d+)"),
    Figure(Metric("retried", "tx", "lower", "transactions retried at least once after a serialization or "
                  "deadlock error (successfully retried + failed)"), r"number of transactions retried: (\d+)"),
    Figure(Metric("retries", "1", "lower", "retries in all, over every retried transaction"),
           r"total number of retries: (\d+)"),
    Figure(Metric("clients", "1", "none", "pgbench -c: concurrent client sessions"), r"number of clients: (\d+)"),
    Figure(Metric("threads", "1", "none", "pgbench -j: worker threads"), r"number of threads: (\d+)"),
    Figure(Metric("scale", "1", "none", "scaling factor of the pgbench tables (read from pgbench_branches)"),
           r"scaling factor: (\d+)"),
    Figure(Metric("max_tries", "1", "none", "--max-tries: tries of a transaction that meets a serialization "
                  "error"), r"maximum number of tries: (\d+)"),
    Figure(Metric("duration_ms", "ms", "none", "pgbench -T: the run's planned duration"), r"duration: (\d+) s",
           1000),
    # Open loop (-R) only: transactions start on pgbench's schedule, not when the previous one ends.
    Figure(Metric("skipped", "tx", "lower", "-R with --latency-limit: transactions skipped because they were "
                  "already later than the limit when their scheduled start came"),
           r"number of transactions skipped: (\d+)"),
    Figure(Metric("late", "tx", "lower", "-R with --latency-limit: successful transactions whose latency passed "
                  "the limit"), r"number of transactions above the [\d.]+ ms latency limit: (\d+)/"),
    Figure(Metric("schedule_lag_ms", "ms", "lower", "-R: average schedule lag, from a transaction's scheduled "
                  "start to its actual start (part of its latency under -R)"),
           r"rate limit schedule lag: avg ([\d.]+)"),
)
PROCESS = process_metrics("wall_ms", "pgbench (start-up, connections, the run, its report)", "none")
METRICS = (*(f.metric for f in FIGURES), *pgbench_log.METRICS, *PROCESS)   # every metric run() returns
ESSENTIAL = ("tps", "latency_ms", "transactions")


@dataclass(frozen=True)
class TimedRun:
    """One `pgbench -n -T` run of a builtin script (or the user's) against one database; with
    `transactions`, `-t` instead."""
    dbname: str
    host: str                  # a socket directory or a TCP host
    port: int
    user: str
    clients: int
    duration_s: int            # pgbench -T takes whole seconds
    select_only: bool = False  # -S: the builtin select-only script; otherwise the TPC-B-like one
    max_tries: int = 1
    threads: int = 1           # -j (given only above 1): each thread writes its own log file
    protocol: str = "simple"   # -M: simple, extended or prepared
    log: pgbench_log.LogPlan = pgbench_log.LogPlan()   # which log, when run() keeps one (pgbench_log.next_log)
    scripts: tuple[tuple[str, int], ...] = ()   # -f FILE@WEIGHT: the user's scripts instead of a builtin
    pgoptions: str = ""        # PGOPTIONS of its sessions (`-c NAME=VALUE`: --set's session settings)
    passfile: str | None = None   # PGPASSFILE: a user server's password, never on the command line
    transactions: int | None = None   # -t per client instead of -T (an untimed pass: duration_s bounds it)
    rate: float | None = None  # -R: the offered transactions per second (open loop); None: closed loop
    latency_limit_ms: float | None = None   # --latency-limit (with rate): later transactions skipped, counted
    connect_each: bool = False   # -C: a new connection per transaction (where a pooler matters most)

    @property
    def timeout_s(self) -> int:
        return self.duration_s + GRACE_S

    def command(self, pgbench: Path | str, log_prefix: Path | str | None = None) -> list[str]:
        """The command line; with log_prefix, the log (self.log) goes to log_prefix.PID[.N]. A
        progress interval past the end gives no report, but makes pgbench measure every
        transaction's latency (its average and stddev)."""
        workload = [a for path, weight in self.scripts for a in ("-f", f"{path}@{weight}")] or \
            (["-S"] if self.select_only else [])
        return [str(pgbench), "-n", *workload, *(["-C"] if self.connect_each else []), "-M", self.protocol,
                "-c", str(self.clients),
                *(["-j", str(self.threads)] if self.threads > 1 else []),
                *(["-t", str(self.transactions)] if self.transactions else ["-T", str(self.duration_s)]),
                *(["-R", f"{self.rate:g}"] if self.rate else []),
                *([f"--latency-limit={self.latency_limit_ms:g}"] if self.rate and self.latency_limit_ms else []),
                "-P", str(self.duration_s + 1), *(self.log.options(str(log_prefix)) if log_prefix else []),
                f"--max-tries={self.max_tries}", "-h", self.host, "-p", str(self.port), "-U", self.user, self.dbname]


def run(pgbench: Path | str, spec: TimedRun, log: bool = True) -> dict:
    """Run it, measured; its figures, its log's and its process's, and under "series" (not a
    metric: a list) its successful transactions per second (exact; [] when the log was a sample).
    CaseError if it fails or hangs, or if its log does not agree with the transactions it counted.

    The log goes to a private directory on tmpfs (pgbench_log.make_log_dir), removed whatever
    happens; pgbench is dead by then (spawn_measured kills it on any way out).
    log=False: no log, hence no percentiles and no series (pgbench's printed figures only)."""
    if not log:
        m = _spawn(pgbench, spec, None)
        return {**parse_output(m.stdout), **process_figures(m, "wall_ms")}
    logdir = pgbench_log.make_log_dir()
    try:
        m = _spawn(pgbench, spec, logdir / pgbench_log.FILE_PREFIX)
        figures = parse_output(m.stdout)
        try:
            logged = (pgbench_log.aggregate_figures(pgbench_log.read_aggregate_log(logdir), figures["transactions"])
                      if spec.log.aggregate else
                      pgbench_log.transaction_figures(pgbench_log.read_transaction_log(logdir, lag=bool(spec.rate)),
                                                      spec.log.rate, figures["transactions"]))
        except (OSError, ValueError) as e:
            raise CaseError(f"pgbench's {'aggregate' if spec.log.aggregate else 'per-transaction'} log: {e}") from e
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    return {**figures, **logged, **process_figures(m, "wall_ms")}


def _spawn(pgbench: Path | str, spec: TimedRun, log_prefix: Path | None):
    """pgbench run to its end through the measured spawn; CaseError if it failed or hung."""
    env = {**password_env(spec.passfile), "PGAPPNAME": APPLICATION_NAME,
           **({"PGOPTIONS": spec.pgoptions} if spec.pgoptions else {})}
    m = spawn_measured(spec.command(pgbench, log_prefix), timeout=spec.timeout_s, env=env)
    if m.timed_out:
        raise CaseError(f"pgbench did not finish within {spec.timeout_s} s")
    if m.returncode != 0:
        lines = [" ".join(line.split()) for line in m.stderr.splitlines() if line.strip() and not line.startswith("progress:")]
        # the server's error that aborted a client says why; "Run was aborted" after it does not
        cause = next((line for line in lines if "ERROR:" in line or "FATAL:" in line), lines[-1] if lines else None)
        raise CaseError(f"pgbench exit {m.returncode}: {cause or 'no message'}")
    return m


def parse_output(stdout: str) -> dict:
    """Every figure pgbench printed (15+ format); CaseError if the essential ones are missing."""
    out: dict[str, float | int] = {}
    for figure in FIGURES:
        m = re.search(figure.pattern, stdout)
        if m:
            text = m.group(1)
            out[figure.metric.name] = (float(text) if "." in text else int(text)) * figure.factor
    missing = [k for k in ESSENTIAL if k not in out]
    if missing:
        raise CaseError(f"pgbench printed no {', '.join(missing)}: {stdout.strip()[-200:]!r}")
    for counter in ("failures", "retries", "retried"):   # printed only when --max-tries allows retries
        out.setdefault(counter, 0)
    return out


PROTOCOLS = ("simple", "extended", "prepared")


def initialize(pgbench: Path | str, dbname: str, host: str, port: int, user: str, scale: int,
               passfile: str | None = None) -> None:
    """pgbench -i: the four tables at `scale`, vacuumed, with primary keys (no foreign keys)."""
    res = subprocess.run([str(pgbench), "-i", "-q", "-s", str(scale), "--init-steps=dtGvp",
                          "-h", host, "-p", str(port), "-U", user, dbname], capture_output=True, text=True,
                         env=password_env(passfile))
    if res.returncode != 0:
        raise ServerRefused.of("pgbench -i", res.stderr, res.returncode)


def version(pgbench: Path | str) -> str:
    """'pgbench (PostgreSQL) 15.18 (Debian ...)'."""
    return subprocess.run([str(pgbench), "--version"], capture_output=True, text=True).stdout.strip()
