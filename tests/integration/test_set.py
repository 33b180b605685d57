"""--set against real managed servers: a server setting as a knob dimension reaches the measured
sessions. file-fdw-tpch: work_mem 64kB makes Q10's sort spill to disk, 64MB keeps it in memory
(EXPLAIN ANALYZE of each case under its settings). fdw-overhead: a session setting reaches
pgbench's sessions (default_transaction_read_only=on fails its writes, not its reads), a sighup
one is applied by ALTER SYSTEM and a reload (the server's log says it changed). A value the
server refuses stops the run in prepare: exit 2, the run recorded failed, nothing measured.
A postmaster setting restarts every managed server between cases: each measurement's evidence
holds the value in force, as the server said it. A session setting reaches the sessions
postgres_fdw opens on the remote server (the foreign server's libpq options), new and kept ones."""

from __future__ import annotations

import json
import re

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main, report_json, started_cluster

from pgpathbench.matrix import Case, StudyOptions
from pgpathbench.servers import fdw, guc
from pgpathbench.servers.cluster import SUPERUSER
from pgpathbench.studies.base import StudyEnv

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
    # 15's default is on, so whether a reload ever changes it back to on depends on the round's order
    # (1 in 70 with 4 cases each way): the server's reload is in its log, the value in force per case
    # in each measurement's evidence.
    assert 'parameter "log_checkpoints" changed to "off"' in logs
    for m in (m for m in ms if m["ok"]):   # those that ran (the read-only writes failed)
        assert m["evidence"]["servers"]["source"]["settings"]["log_checkpoints"] == m["dims"]["set.log_checkpoints"], m
    facts = rep["run"]["environment"]["sessions"][-1]["setup"]["15"]["fdw-overhead"]["server_settings"]
    assert facts["log_checkpoints"]["context"] == "sighup" and facts["default_transaction_read_only"]["context"] == "user"
    pgpathbench("clean", workspace=workspace_root)


def test_a_value_postgresql_refuses_is_refused_before_anything_is_written(workspace_root):
    """PostgreSQL's own checks (form, unit, range, enum: postgres -C), before a run is stored."""
    def runs() -> list:
        res = pgpathbench_main("runs", "--format", "json", workspace=workspace_root)
        return json.loads(res.stdout) if res.returncode == 0 else []
    before = runs()
    for value, said in (("12zz", 'invalid value for parameter "work_mem": "12zz"'),
                        ("1", '1 kB is outside the valid range for parameter "work_mem" (64 .. 2147483647)')):
        res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--target", "local", "--workload", "ro",
                          "--repeat", "1", "--set", f"work_mem=64MB,{value}", workspace=workspace_root)
        assert_user_error(res, f"--set work_mem: PostgreSQL 15 refuses '{value}': {said}; give values it accepts")
    assert runs() == before


def test_a_session_setting_reaches_the_native_client_and_psql(workspace_root):
    """statement_timeout=1 (ms) cancels every COPY of 200k rows, the client's and psql's: PGOPTIONS reached them.
    PostgreSQL may name the cancel a user request: a timer that fired while the statement was parsed
    is armed again before it is planned (start_xact_command), which clears its indicator (once in CI)."""
    res = pgpathbench("run", "interfaces-fidelity", "--preset", "quick", "--repeat", "1", "--tool", "reference,libpq",
                      "--workload", "copy", "--transport", "unix", "--set", "statement_timeout=0,1",
                      workspace=workspace_root)
    assert res.returncode == 1, res.stderr[-3000:]
    ms = report_json(workspace_root)["measurements"]
    assert len(ms) == 4
    for m in ms:
        cancelled = m["dims"]["set.statement_timeout"] == "1"
        assert m["ok"] is not cancelled, m
        if cancelled:
            assert re.search("canceling statement due to (statement timeout|user request)", m["error"]), m


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


@pytest.fixture(scope="module")
def fdw_server(workspace_root):
    yield from started_cluster("set-fdw", workspace_root)


def test_session_settings_reach_new_and_kept_remote_sessions(fdw_server):
    """A view on the 'remote' database reads the setting of the session postgres_fdw opened."""
    c = fdw_server
    for db in ("remote", "local"):
        c.create_database(db)
    c.execute("remote", "CREATE VIEW remote_setting AS SELECT current_setting('work_mem') AS work_mem, "
                        "pg_backend_pid() AS pid")
    with c.connect("local") as conn:
        fdw.create_server(conn, "remote", "127.0.0.1", c.port, "remote", SUPERUSER, c.password)
        fdw.import_schema(conn, "remote")
    env = StudyEnv(StudyOptions("fdw-overhead", "quick", 1, {}, {"pg": ("15",)}), "15", None, None, print,
                   knobs=guc.KnobState({"work_mem": {"context": "user"}}))
    kept, observer = c.connect("local"), c.connect("postgres")

    def remote_pids() -> set[int]:
        return {r[0] for r in observer.execute("SELECT pid FROM pg_stat_activity WHERE datname = 'remote'")}

    def case(work_mem: str) -> Case:
        return Case("fdw-overhead", (("pg", "15"), ("set.work_mem", work_mem)))
    # Backends that end (a dropped remote connection, a closed session's) leave pg_stat_activity a
    # moment later: "primed" is that the query ran on a remote backend present before it was sent.
    try:
        pid = None
        for work_mem in ("64kB", "1MB"):
            fdw.set_case_options(env, case(work_mem), c, "local", ["remote"], kept=[kept])
            primed = remote_pids()
            value, new_pid = kept.execute("SELECT work_mem, pid FROM remote_setting").fetchone()
            assert value == work_mem and new_pid in primed and new_pid != pid
            pid = new_pid
            with c.connect("local") as new:   # a session made after, as pgbench's
                assert new.execute("SELECT work_mem FROM remote_setting").fetchone()[0] == work_mem
        fdw.set_case_options(env, case("1MB"), c, "local", ["remote"], kept=[kept])   # in force: no change
        assert kept.execute("SELECT pid FROM remote_setting").fetchone()[0] == pid
        kept.close()   # as a restart does: the session made anew is primed though nothing changed
        kept = c.connect("local")
        fdw.set_case_options(env, case("1MB"), c, "local", ["remote"], kept=[kept])
        primed = remote_pids()
        value, new_pid = kept.execute("SELECT work_mem, pid FROM remote_setting").fetchone()
        assert value == "1MB" and new_pid in primed and new_pid != pid
    finally:
        kept.close()
        observer.close()


def test_a_session_setting_reaches_postgres_fdw_on_the_source(workspace_root, tmp_path):
    """fdw-overhead: a view on the source fails (division by zero) unless its session has work_mem
    64kB. Through the FDW it runs in the session postgres_fdw opened there: it fails exactly in the
    cases of 64MB, so each case's value reached the source (its default, 4MB, would fail them all)."""
    (tmp_path / "init.sql").write_text(
        "CREATE VIEW probe AS SELECT 1 / (current_setting('work_mem') = '64kB')::int AS ok;\n")
    (tmp_path / "probe.sql").write_text("SELECT ok FROM probe;\n")
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--target", "local,fdw_external", "--clients", "1",
                      "--duration", "1", "--repeat", "1", "--init", str(tmp_path / "init.sql"),
                      "--script", str(tmp_path / "probe.sql"), "--set", "work_mem=64kB,64MB", "--keep-servers",
                      workspace=workspace_root)
    assert res.returncode == 1, res.stderr[-3000:]   # the 64MB cases failed, nothing else
    ms = report_json(workspace_root)["measurements"]
    assert {(m["dims"]["target"], m["dims"]["set.work_mem"]) for m in ms} == {
        (t, w) for t in ("local", "fdw_external") for w in ("64kB", "64MB")}
    for m in ms:
        assert m["ok"] is (m["dims"]["set.work_mem"] == "64kB"), m
    external = "".join(p.read_text(errors="replace") for p in workspace_root.rglob("pg15_external/server.log"))
    assert "ERROR:  division by zero\n" in external and "remote SQL command: SELECT ok FROM public.probe" in external
    pgpathbench("clean", workspace=workspace_root)
