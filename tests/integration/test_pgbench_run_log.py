"""pgbench.run() against a real managed server: the per-transaction log's percentiles and
per-second series agree with what pgbench printed, every thread's file is read, and the log's
temporary directory is gone afterwards, whether pgbench succeeded or failed."""

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


def test_select_only_run_with_two_threads(server, log_dirs, monkeypatch):
    files: list[str] = []
    logs: list[pgbench_log.TransactionLog] = []
    read = pgbench_log.read_transaction_log

    def spying(directory: Path):
        files.extend(p.name for p in pgbench_log.log_files(directory))
        logs.append(read(directory))
        return logs[-1]
    monkeypatch.setattr(pgbench_log, "read_transaction_log", spying)

    spec = pgbench.TimedRun("bench", str(server.sockdir), server.port, SUPERUSER, clients=2, duration_s=3,
                            select_only=True, threads=2)
    out = pgbench.run(server.bins.path("pgbench"), spec)

    assert len(log_dirs) == 1 and log_dirs[0].parent == Path(scratch.tmpfs_or_tmp())
    assert not log_dirs[0].exists()
    assert len(files) == 2 and files[1] == files[0] + ".1"          # tx.PID and tx.PID.1
    assert out["threads"] == 2 and out["clients"] == 2 and out["failures"] == 0

    p50, p90, p95, p99, top = (out[f"latency_{p}_ms"] for p in ("p50", "p90", "p95", "p99", "max"))
    assert 0 < p50 <= p90 <= p95 <= p99 <= top
    assert min(logs[0].latency_us) / 1000 <= out["latency_ms"] <= top   # pgbench's printed mean
    assert out["latency_ms"] / 5 <= p50 <= out["latency_ms"] * 5
    assert logs[0].successful == out["transactions"] and logs[0].failed == logs[0].skipped == 0

    assert out["latency_log_rate"] == 1.0
    series = out.pop("series")                                      # pgbench's -P 1 counters
    assert [p["t"] for p in series] == list(range(len(series))) and len(series) == 3   # -T 3
    assert sum(p["tps"] for p in series) == pytest.approx(out["transactions"], rel=0.01)
    assert all(p["latency_ms"] > 0 for p in series[:-1])            # the last: None if pgbench did not report it
    assert all(isinstance(v, (int, float)) for v in out.values())   # every other key a metric


def test_a_sampled_log_gives_percentiles_of_its_sample(server, log_dirs, monkeypatch):
    spec = pgbench.TimedRun("bench", str(server.sockdir), server.port, SUPERUSER, clients=1, duration_s=2,
                            select_only=True, log_rate=0.1)
    logs: list[pgbench_log.TransactionLog] = []
    read = pgbench_log.read_transaction_log
    monkeypatch.setattr(pgbench_log, "read_transaction_log", lambda d: logs.append(read(d)) or logs[-1])
    out = pgbench.run(server.bins.path("pgbench"), spec)
    assert "--sampling-rate=0.1" in spec.command("pgbench", "x")
    assert 0.05 < logs[0].successful / out["transactions"] < 0.15     # a tenth, drawn at random
    assert out["latency_log_rate"] == 0.1
    assert 0 < out["latency_p50_ms"] <= out["latency_p99_ms"] <= out["latency_max_ms"]
    assert out["latency_ms"] / 5 <= out["latency_p50_ms"] <= out["latency_ms"] * 5
    assert sum(p["tps"] for p in out["series"]) == pytest.approx(out["transactions"], rel=0.01)


def test_failing_pgbench_leaves_no_log_directory(server, log_dirs):
    spec = pgbench.TimedRun("no_such_database", str(server.sockdir), server.port, SUPERUSER, clients=1,
                            duration_s=1, select_only=True)
    with pytest.raises(CaseError, match="pgbench exit"):
        pgbench.run(server.bins.path("pgbench"), spec)
    assert len(log_dirs) == 1 and not log_dirs[0].exists()
