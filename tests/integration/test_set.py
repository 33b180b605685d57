"""--set against real managed servers: a server setting as a knob dimension reaches the measured
sessions. file-fdw-tpch: work_mem 64kB makes Q10's sort spill to disk, 64MB keeps it in memory
(EXPLAIN ANALYZE of each case under its settings). fdw-overhead: a session setting reaches
pgbench's sessions (default_transaction_read_only=on fails its writes, not its reads), a sighup
one is applied by ALTER SYSTEM and a reload (the server's log says it changed). A value the
server refuses stops the run in prepare: exit 2, the run recorded failed, nothing measured.
A postmaster setting restarts every managed server between cases: each measurement's evidence
holds the value in force, as the server said it."""

from __future__ import annotations

import json
import re

import pytest

from conftest import pgpathbench, report_json

pytestmark = pytest.mark.integration


def test_work_mem_changes_the_sort_method_of_q10(workspace_root):
    res = pgpathbench("run", "file-fdw-tpch", "--preset", "quick", "--set", "work_mem=64kB,64MB", "--queries", "10",
                      "--layout", "single", "--scale", "0.01", "--repeat", "2", workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    rep = report_json(workspace_root)
    ms = rep["measurements"]
    assert len(ms) == 8 and all(m["ok"] for m in ms)
    for m in ms:
        sorts = m["metrics"]["sort_methods"]
        if m["dims"]["set.work_mem"] == "64kB":
            assert "external merge Disk" in sorts, m
        else:
            assert m["dims"]["set.work_mem"] == "64MB" and "Disk" not in sorts and "Memory" in sorts, m
    facts = rep["run"]["environment"]["sessions"][-1]["setup"]["15"]["file-fdw-tpch"]["server_settings"]
    assert facts["work_mem"]["context"] == "user" and facts["work_mem"]["values"] == ["64kB", "64MB"]
    assert "Server settings (--set)" in res.stdout and "set.work_mem" in res.stdout


def test_session_and_sighup_settings_reach_pgbench_and_the_servers(workspace_root):
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--target", "local", "--workload", "rw,ro",
                      "--clients", "1", "--duration", "1", "--repeat", "1", "--keep-servers",
                      "--set", "default_transaction_read_only=off,on", "--set", "log_checkpoints=off,on",
                      workspace=workspace_root)
    assert res.returncode == 1, res.stderr[-3000:]   # the read-only writes failed, nothing else
    rep = report_json(workspace_root)
    ms = rep["measurements"]
    assert len(ms) == 8
    for m in ms:
        failing = m["dims"]["workload"] == "rw" and m["dims"]["set.default_transaction_read_only"] == "on"
        assert m["ok"] is not failing, m
    logs = "".join(p.read_text(errors="replace") for p in workspace_root.rglob("server.log"))
    assert "cannot execute UPDATE in a read-only transaction" in logs
    assert 'parameter "log_checkpoints" changed to "on"' in logs
    facts = rep["run"]["environment"]["sessions"][-1]["setup"]["15"]["fdw-overhead"]["server_settings"]
    assert facts["log_checkpoints"]["context"] == "sighup" and facts["default_transaction_read_only"]["context"] == "user"
    pgpathbench("clean", workspace=workspace_root)


def test_a_value_the_server_refuses_stops_the_run_before_measuring(workspace_root):
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--target", "local", "--workload", "ro",
                      "--clients", "1", "--duration", "1", "--repeat", "1", "--set", "work_mem=12zz",
                      workspace=workspace_root)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        "pgpathbench: error: --set work_mem: PostgreSQL 15 refuses '12zz': invalid value for parameter "
        "\"work_mem\": \"12zz\"; give values it accepts (SHOW work_mem)")
    runs = json.loads(pgpathbench("runs", "--format", "json", workspace=workspace_root).stdout)
    latest = max(runs, key=lambda r: r["started_at"])
    assert latest["status"] == "failed" and latest["measurements"] == 0


def test_a_session_setting_reaches_the_native_client_and_psql(workspace_root):
    """statement_timeout=1 (ms) cancels every COPY of 200k rows, the client's and psql's: PGOPTIONS reached them."""
    res = pgpathbench("run", "interfaces-fidelity", "--preset", "quick", "--repeat", "1", "--tool", "reference,libpq",
                      "--workload", "copy", "--transport", "unix", "--set", "statement_timeout=0,1",
                      workspace=workspace_root)
    assert res.returncode == 1, res.stderr[-3000:]
    ms = report_json(workspace_root)["measurements"]
    assert len(ms) == 4
    for m in ms:
        cancelled = m["dims"]["set.statement_timeout"] == "1"
        assert m["ok"] is not cancelled and (not cancelled or "statement timeout" in m["error"]), m


def test_a_postmaster_setting_restarts_the_servers_between_cases(workspace_root):
    """remote-sampling keeps its connections across measurements: after each restart they are made again."""
    res = pgpathbench("run", "remote-sampling", "--preset", "quick", "--pg", "15", "--test", "sampling",
                      "--rows", "10k", "--method", "system", "--fraction", "0.1", "--repeat", "2",
                      "--set", "shared_buffers=16MB,32MB", workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    plan = res.stderr[:res.stderr.index("[1/8]")]
    assert "restart between cases for shared_buffers (every managed server of PostgreSQL 15, same port; " \
           "cold shared buffers after each restart)" in plan
    restarts = re.findall(r"restart (\d+) for --set shared_buffers=(\d+MB): pg15_source, pg15_external", res.stderr)
    ms = report_json(workspace_root)["measurements"]
    assert len(ms) == 8 and all(m["ok"] for m in ms)
    # The value the server reported during each measurement, on every server it involved.
    for m in ms:
        servers = m["evidence"]["servers"]
        assert set(servers) == ({"source", "external"} if m["dims"]["access"] == "fdw" else {"source"}), m
        assert {s["settings"]["shared_buffers"] for s in servers.values()} == {m["dims"]["set.shared_buffers"]}, m
    # The first measurement needs one; a case whose value is already in force, none.
    assert 2 <= len(restarts) <= 8 and [int(n) for n, _ in restarts] == list(range(1, len(restarts) + 1))

