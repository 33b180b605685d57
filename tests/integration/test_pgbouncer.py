"""PgBouncer as a hop (--via, --pool-mode, --fdw-via) against real managed servers and Debian's
pgbouncer: fdw-overhead connecting per transaction (pgbench -C), every pooled case measured with
the pooler's own counters, and nothing left after a run, a SIGKILL + clean, or a resume.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from conftest import cmdlines, our_processes, pgpathbench, pgpathbench_main, report_json, spawn_pgpathbench

from pgpathbench.servers.cluster import socket_dir

pytestmark = pytest.mark.integration

ROUNDS = 2
POOLED = ["--connect", "each", "--via", "direct,pgbouncer", "--pool-mode", "transaction",
          "--target", "local,fdw_external", "--workload", "ro", "--clients", "1", "--repeat", str(ROUNDS)]
RUN = ["run", "fdw-overhead", "--preset", "quick", *POOLED, "--fdw-via", "direct,pgbouncer",
       "--protocol", "simple,prepared"]
# Direct cases keep the ids runs stored before --via had; prepared under transaction pooling is excluded.
CASES = {"ro:local:1:0ms:15:simple", "ro:local:1:0ms:15:prepared", "ro:local:1:0ms:15:simple:pgbouncer:transaction",
         "ro:fdw_external:1:0ms:15:simple", "ro:fdw_external:1:0ms:15:prepared",
         "ro:fdw_external:1:0ms:15:simple:pgbouncer:transaction",
         "ro:fdw_external:1:0ms:15:simple:transaction:pgbouncer",
         "ro:fdw_external:1:0ms:15:simple:pgbouncer:transaction:pgbouncer"}


def pooler_leftovers(root: Path, run_id: str) -> list[str]:
    """PgBouncer processes, files and socket directories a run of this workspace left."""
    servers = root / "servers" / run_id
    found = [f"{pid}: {cmd}" for pid, cmd in cmdlines().items() if "pgbouncer" in cmd and str(root) in cmd]
    for name in ("pg15_source_pgbouncer", "pg15_external_pgbouncer", "pg15_local_pgbouncer"):
        found += [str(p) for p in (servers / name, socket_dir(servers / name)) if p.exists()]
    return found


@pytest.fixture(scope="module")
def pooled_run(workspace_root):
    res = pgpathbench(*RUN, workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    exported = pgpathbench_main("export", "latest", "--format", "json", workspace=workspace_root)
    assert exported.returncode == 0, exported.stderr
    return json.loads(exported.stdout), workspace_root


def test_every_case_measured_and_prepared_excluded_under_transaction(pooled_run):
    export, _ = pooled_run
    ms = export["measurements"]
    assert all(m["ok"] for m in ms), [m["error"] for m in ms if not m["ok"]]
    assert {m["case_id"] for m in ms} == CASES and len(ms) == len(CASES) * ROUNDS
    for m in ms:
        assert m["metrics"]["connection_ms"] > 0, "pgbench -C reports its connections' average"


def test_pooler_reuses_server_connections(pooled_run):
    export, _ = pooled_run
    for m in export["measurements"]:
        mt, d = m["metrics"], m["dims"]
        for prefix, crossed in (("pooler_", d["via"] == "pgbouncer"), ("fdw_pooler_", d["fdw_via"] == "pgbouncer")):
            if not crossed:
                assert prefix + "transactions" not in mt, m["case_id"]
                continue
            # a new client connection per transaction, served by a server connection or two
            assert mt[prefix + "transactions"] >= 20, m["case_id"]
            assert 1 <= mt[prefix + "server_connections"] <= 2, m["case_id"]
            assert mt[prefix + "transactions"] >= 10 * mt[prefix + "server_connections"], m["case_id"]
            stored = m["evidence"]["pgbouncer"][prefix.rstrip("_")]
            assert stored["pool_mode"] == "transaction"
            assert stored["stats_delta"]["total_xact_count"] == mt[prefix + "transactions"]
        if d["via"] == "pgbouncer":
            # the client pooler passed pgbench's transactions, and its scale check (the statement passes come
            # after the counters are read)
            assert mt["pooler_transactions"] == pytest.approx(mt["transactions"], abs=3), m["case_id"]


def test_hops_in_path_ids_and_the_report(pooled_run):
    export, root = pooled_run
    paths = {m["case_id"]: m["path"] for m in export["measurements"]}
    assert paths["ro:local:1:0ms:15:simple"] is None
    assert paths["ro:local:1:0ms:15:simple:pgbouncer:transaction"] == "pg15_source_0ms_pgbouncer-transaction"
    assert paths["ro:fdw_external:1:0ms:15:simple:transaction:pgbouncer"] == "pg15_source_0ms_fdw-pgbouncer-transaction"
    probed = {p["link"] for p in export["link_probes"]}
    assert "pg15_source_0ms_pgbouncer-transaction" in probed            # SELECT 1 through the pooler
    assert "pg15_source_0ms_fdw-pgbouncer-transaction+fdw_scan" in probed  # the FDW hop through it
    md = pgpathbench_main("report", "latest", "--format", "markdown", workspace=root)
    assert md.returncode == 0, md.stderr
    assert "PgBouncer per measurement" in md.stdout and "transaction pooling" in md.stdout
    assert "RO.local/pgbouncer-transaction" in md.stdout


def test_nothing_left_after_the_run(pooled_run):
    export, root = pooled_run
    assert pooler_leftovers(root, export["run"]["run_id"]) == []
    assert our_processes(root) == []


def test_sigkill_then_clean_then_resume(workspace_root):
    """A killed run's pooler dies with it or is stopped by clean; a resume makes it again and measures."""
    args = ["run", "fdw-overhead", "--preset", "quick", *POOLED, "--target", "local"]
    proc = spawn_pgpathbench(*args, workspace=workspace_root)
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, "no measurement"
        line = proc.stderr.readline()
        assert line, f"run ended early: {proc.wait()}"
        if line.startswith("[") and "round" in line:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_id = report_json(workspace_root)["run"]["run_id"]
    clean = pgpathbench("clean", workspace=workspace_root)
    assert clean.returncode == 0, clean.stderr
    assert pooler_leftovers(workspace_root, run_id) == [] and our_processes(workspace_root) == []
    resumed = pgpathbench("run", "--resume", run_id, workspace=workspace_root)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    ms = report_json(workspace_root, run_id)["measurements"]
    assert {m["case_id"] for m in ms} == {"ro:local:1:0ms:15:simple", "ro:local:1:0ms:15:simple:pgbouncer:transaction"}
    assert len(ms) == 2 * ROUNDS and all(m["ok"] for m in ms)
    assert pooler_leftovers(workspace_root, run_id) == [] and our_processes(workspace_root) == []


def test_interfaces_through_the_pooler(workspace_root):
    """libpq and psycopg through PgBouncer over its unix socket and TCP, at the quick preset's tiny size:
    the clients' checksums agree with psql's (measure() checks), the pooler passed their queries over one
    server connection, and psycopg is not run in transaction mode (it prepares repeated queries)."""
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--repeat", "1", "--interface", "libpq,psycopg",
                      "--method", "normal", "--transport", "unix,tcp", "--sqlstrat", "sql001:once",
                      "--via", "direct,pgbouncer", "--pool-mode", "session,transaction", workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    rep = report_json(workspace_root)
    ms = rep["measurements"]
    assert all(m["ok"] for m in ms), [m["error"] for m in ms if not m["ok"]]
    base = "normal:-:{t}:sql001:once:p-all:file:0ms:15"
    expected = {f"{i}:{base.format(t=t)}{hop}" for i in ("libpq", "psycopg") for t in ("unix", "tcp")
                for hop in ("", ":pgbouncer:session")} | \
        {f"libpq:{base.format(t=t)}:pgbouncer:transaction" for t in ("unix", "tcp")}
    assert {m["case_id"] for m in ms} == expected
    for m in ms:
        mt, pooled = m["metrics"], m["dims"]["via"] == "pgbouncer"
        assert mt["checksum"] == ms[0]["metrics"]["checksum"] and mt["rows"] == ms[0]["metrics"]["rows"]
        if not pooled:
            assert "pooler_transactions" not in mt and m["path"] in (None, "pg15_local_0ms")
            continue
        assert m["path"] == f"pg15_local_0ms_pgbouncer-{m['dims']['pool_mode']}"
        assert mt["pooler_queries"] >= mt["iterations"] == 20 and mt["pooler_server_connections"] == 1
    assert pooler_leftovers(workspace_root, rep["run"]["run_id"]) == [] and our_processes(workspace_root) == []
