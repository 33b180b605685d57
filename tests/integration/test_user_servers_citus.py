"""file-fdw-tpch's citus layout on a user's Citus cluster (--server coordinator=DSN): a coordinator
and a worker, each a host of a test LAN (tests/user_citus.py), the tool's login a non-superuser
(app: LOGIN CREATEDB, CREATE on the database, its password in pg_dist_authinfo).

Three runs at SF 0.01: one stopped by SIGTERM, one killed by SIGKILL (what it left dropped by
`clean`), and that one resumed to the end. After each the cluster is as found on both nodes: the
user's rows and catalog, Citus's metadata (no distributed table, shard or colocation group of
ours), no schema of ours, an empty ledger. The resumed run measured the regular and columnar
storages on the user's two nodes, in the DSN's own database, with DuckDB's answers.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest

from pgpathbench.servers.network import available_link_kinds

from conftest import our_processes, pgpathbench, pgpathbench_main, report_json, spawn_pgpathbench
from user_citus import citus_cluster
from user_server import APP, DBA, USERDB, assert_no_secret, use_passfile

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")]

QUERIES = ("q1", "q6", "q12")
ROUNDS = 1
CASES = len(QUERIES) * 2 * ROUNDS


@pytest.fixture(scope="module")
def cluster(workspace_root):
    with citus_cluster(workspace_root / "user-citus") as nodes:
        yield nodes


def args(coordinator) -> list[str]:
    return ["run", "file-fdw-tpch", "--preset", "quick", "--queries", ",".join(QUERIES), "--repeat", str(ROUNDS),
            "--storage", "regular,columnar", "--server", f"coordinator={coordinator.dsn()}"]


def found(nodes) -> dict:
    return {n.dsn(): (n.user_data_fingerprint(), n.known_objects(), n.citus_metadata()) for n in nodes}


def stopped(proc, sig: int, measurements: int = 1) -> None:
    deadline, seen = time.monotonic() + 300, 0
    while seen < measurements:
        assert time.monotonic() < deadline, "run made no progress"
        line = proc.stderr.readline()
        assert line, f"run ended early: {proc.wait()}"
        seen += line.startswith("[") and "round" in line
    proc.send_signal(sig)
    proc.wait(timeout=120)


def assert_as_found(nodes, before: dict, ws) -> None:
    assert found(nodes) == before
    for n in nodes:
        with n.connect(DBA, USERDB) as c:
            assert c.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'pgpathbench%'").fetchall() == []
    assert json.loads((ws / "user-objects.json").read_text()) == []
    assert our_processes(ws) == []


def test_a_users_citus_cluster_measured_and_left_as_found(cluster, workspace_root, monkeypatch):
    coordinator, worker = cluster
    nodes = (coordinator, worker)
    ws = workspace_root / "ws-user-citus"
    use_passfile(monkeypatch, workspace_root / "pgpass-citus", coordinator)
    before = found(nodes)
    t0 = time.monotonic()

    proc = spawn_pgpathbench(*args(coordinator), workspace=ws)
    stopped(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM
    assert_as_found(nodes, before, ws)

    proc = spawn_pgpathbench(*args(coordinator), workspace=ws)
    stopped(proc, signal.SIGKILL)
    killed = json.loads(pgpathbench_main("runs", "--format", "json", workspace=ws).stdout)[-1]
    assert killed["status"] == "killed"
    ledger = json.loads((ws / "user-objects.json").read_text())
    assert {e["schema"] for e in ledger} == {f"pgpathbench_{killed['run_id'][-4:]}_citus_{st}"
                                              for st in ("regular", "columnar")}
    cleaned = pgpathbench("clean", workspace=ws)
    assert cleaned.returncode == 0 and cleaned.stdout.count("dropped schema pgpathbench_") == 2, cleaned.stdout
    assert_as_found(nodes, before, ws)

    res = pgpathbench("run", "--resume", killed["run_id"], workspace=ws)
    assert res.returncode == 0, res.stderr[-3000:]
    print(f"\nthree citus runs on a user's cluster: {time.monotonic() - t0:.0f} s")
    assert "coordinator is your Citus cluster" in res.stderr
    assert_as_found(nodes, before, ws)
    rep = report_json(ws, killed["run_id"])
    ms = rep["measurements"]
    assert all(m["ok"] for m in ms) and Counter(m["case_id"] for m in ms) == {
        f"{q}:{st}:citus:15": ROUNDS for q in QUERIES for st in ("regular", "columnar")}
    fp = rep["run"]["environment"]["sessions"][-1]["setup"]["15"]["file-fdw-tpch"]
    assert all(a["duckdb"] == "agrees" and len(a["agreeing"]) == 2 for a in fp["answers"].values()), fp["answers"]
    assert [(n["host"], n["port"], n["group"]) for n in fp["citus"]["nodes"]] == [
        (coordinator.address, 5432, 0), (worker.address, 5432, 1)]
    assert not fp["citus"]["managed"] and "foreign" not in fp["citus"]["made"]
    tasks = fp["plans"]["q1:regular:citus"]["tasks"]
    assert {t["node"] for t in tasks} == {f"{worker.address}:5432"} and len(tasks) == 2   # the partitions here
    assert fp["reads"]["q6:columnar:citus"]["buffer_bytes"] < fp["reads"]["q6:regular:citus"]["buffer_bytes"]
    assert set(rep["run"]["environment"]["sessions"][-1]["servers"]) == {"user_coordinator"}
    # each node's activity, by SQL (its processes are not visible from here)
    for m in ms:
        assert set(m["evidence"]["servers"]) == {"coordinator", "worker1"}, m["evidence"]
        assert m["evidence"]["missing"]["worker1.cpu_ms"] == "host processes not visible"
        assert "waits" in m["evidence"]["servers"]["worker1"], m["evidence"]["missing"]
    text = json.dumps(rep)
    assert_no_secret([coordinator.password(APP), coordinator.password(DBA)],
                     {"stdout": res.stdout, "stderr": res.stderr, "json": text})
