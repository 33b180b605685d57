"""pgbench.run() against a real managed server, with each of its logs (every transaction, a
random sample, the aggregate): the figures agree with what pgbench printed and with each other
(min <= average <= max, p99 <= max, a series summing exactly to the count, the sample's size),
every thread's file is read, and the log's temporary directory is gone afterwards, whether
pgbench succeeded or failed. Invariants only: they hold whatever the machine's load."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgpathbench import scratch
from pgpathbench.errors import CaseError
from pgpathbench.procs import OsUser
from pgpathbench.servers.binaries import resolve
from pgpathbench.servers.cluster import SUPERUSER, Cluster
from pgpathbench.tools import pgbench, pgbench_log

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(workspace_root):
    c = Cluster("pgbench-log", workspace_root / "pgbench-log", resolve(15), OsUser.for_servers())
    c.start()
    c.create_database("bench")
    pgbench.initialize(c.bins.path("pgbench"), *c.client_args("bench"), 1)
    yield c
    c.remove()


@pytest.fixture
def log_dirs(monkeypatch) -> list[Path]:
    """Every log directory run() makes, recorded."""
    made: list[Path] = []
    original = pgbench_log.make_log_dir

    def recording() -> Path:
        made.append(original())
        return made[-1]
    monkeypatch.setattr(pgbench_log, "make_log_dir", recording)
    return made


def test_every_transaction_logged_with_two_threads(server, log_dirs, monkeypatch):
    files: list[str] = []
    logs: list[pgbench_log.TransactionLog] = []
    read = pgbench_log.read_transaction_log

    def spying(directory: Path, **kw):
        files.extend(p.name for p in pgbench_log.log_files(directory))
        logs.append(read(directory, **kw))
        return logs[-1]
    monkeypatch.setattr(pgbench_log, "read_transaction_log", spying)

    spec = pgbench.TimedRun("bench", str(server.sockdir), server.port, SUPERUSER, clients=2, duration_s=2,
                            select_only=True, threads=2)
    out = pgbench.run(server.bins.path("pgbench"), spec)

    assert len(log_dirs) == 1 and log_dirs[0].parent == Path(scratch.tmpfs_or_tmp())
    assert not log_dirs[0].exists()
    assert len(files) == 2 and files[1] == files[0] + ".1"          # tx.PID and tx.PID.1
    assert out["threads"] == 2 and out["clients"] == 2 and out["failures"] == 0

    low, p50, p90, p95, p99, top = (out[f"latency_{p}_ms"] for p in ("min", "p50", "p90", "p95", "p99", "max"))
    assert 0 < low <= p50 <= p90 <= p95 <= p99 <= top
    assert low <= out["latency_ms"] <= top                          # pgbench's printed mean, of the same transactions
    assert out["latency_sample_n"] == logs[0].successful == out["transactions"] and out["latency_log_rate"] == 1.0
    series = out.pop("series")
    assert [p["t"] for p in series] == list(range(len(series))) and len(series) in (2, 3)   # -T 2 over epoch seconds
    assert sum(p["tps"] for p in series) == out["transactions"]     # exact: every transaction, by when it ended
    assert all(low <= p["latency_ms"] <= top for p in series if p["tps"])
    assert all(isinstance(v, (int, float)) for v in out.values())   # every other key a metric


def test_the_aggregate_log_gives_the_exact_series_of_two_threads(server, log_dirs):
    spec = pgbench.TimedRun("bench", str(server.sockdir), server.port, SUPERUSER, clients=2, duration_s=2,
                            select_only=True, threads=2, log=pgbench_log.LogPlan(aggregate=True))
    out = pgbench.run(server.bins.path("pgbench"), spec)
    series = out.pop("series")
    assert [p["t"] for p in series] == list(range(len(series))) and len(series) in (2, 3)
    assert sum(p["tps"] for p in series) == out["transactions"] > 0
    assert series[-1]["latency_ms"] is None                         # the second pgbench does not write
    assert all(p["latency_ms"] > 0 for p in series[:-1] if p["tps"])
    assert not any(k.startswith("latency_p") or k in ("latency_max_ms", "latency_min_ms", "latency_log_rate")
                   for k in out)                                     # no distribution from an aggregate
    assert not log_dirs[0].exists()


def test_a_sampled_log_gives_percentiles_of_its_sample_and_no_maximum(server, log_dirs, monkeypatch):
    spec = pgbench.TimedRun("bench", str(server.sockdir), server.port, SUPERUSER, clients=1, duration_s=2,
                            select_only=True, log=pgbench_log.LogPlan(rate=0.1))
    out = pgbench.run(server.bins.path("pgbench"), spec)
    assert "--sampling-rate=0.1" in spec.command("pgbench", "x")
    assert 0.05 < out["latency_sample_n"] / out["transactions"] < 0.15     # a tenth, drawn at random
    assert out["latency_log_rate"] == 0.1 and out["series"] == []
    assert 0 < out["latency_p50_ms"] <= out["latency_p99_ms"] and "latency_max_ms" not in out


def test_failing_pgbench_leaves_no_log_directory(server, log_dirs):
    spec = pgbench.TimedRun("no_such_database", str(server.sockdir), server.port, SUPERUSER, clients=1,
                            duration_s=1, select_only=True)
    with pytest.raises(CaseError, match="pgbench exit"):
        pgbench.run(server.bins.path("pgbench"), spec)
    assert len(log_dirs) == 1 and not log_dirs[0].exists()
