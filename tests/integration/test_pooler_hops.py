"""The pooler's hops (issue 46): --tls on through a PgBouncer, and a PgBouncer in front of a user's server.

Through the real CLI, Debian's pgbouncer 1.18 and real servers: interfaces at a few thousand rows over
loopback TCP through the pooler, libpq and jdbc, --tls off,on: every case measured with the checksum
psql's COPY gives, and on `on` cases both legs' TLS recorded (client to pooler as the pooler logged each
login, pooler to server from the server's pg_stat_ssl), on `off` cases neither. fdw-overhead quick
narrowed to the FDW hop through the pooler with --tls on: both of that hop's legs encrypted.

A PgBouncer of ours in front of two user servers (tests/user_server.py: scram over TCP, and TLS only
with verify-full): every case measured, the pooler's counters in the export, no password on any
process's command line (sampled through the run), and nothing left (no pgbouncer process, no pooler
directory) after the run and after SIGKILL + clean; the user servers left as found.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from conftest import STATE_ONLY_RATE, cmdlines, our_processes, pgpathbench, pgpathbench_main, run_watching_ps, spawn_pgpathbench
from pgpathbench.servers.cluster import socket_dir
from user_server import UserServer, assert_left_as_found, assert_no_secret, use_passfile

pytestmark = pytest.mark.integration

ENCRYPTED = "TLSv1."   # what an encrypted leg's record starts with (protocol, cipher[, bits])


def exported(workspace: Path) -> dict:
    res = pgpathbench_main("export", "latest", "--format", "json", workspace=workspace)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def pooler_leftovers(root: Path, run_id: str) -> list[str]:
    """PgBouncer processes, directories and socket directories a run of this workspace left."""
    found = [f"{pid}: {cmd}" for pid, cmd in cmdlines().items() if "pgbouncer" in cmd and str(root) in cmd]
    for d in (root / "servers" / run_id).glob("*pgbouncer*"):
        found += [str(p) for p in (d, socket_dir(d)) if p.exists()]
    return found


def test_interfaces_both_legs_tls_through_the_pooler(workspace_root):
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--repeat", "1", "--interface", "libpq,jdbc",
                      "--method", "normal", "--transport", "tcp", "--sqlstrat", "sql001:once,sql50k:once",
                      "--via", "direct,pgbouncer", "--pool-mode", "session", "--tls", "off,on",
                      workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    export = exported(workspace_root)
    ms = export["measurements"]
    assert all(m["ok"] for m in ms), [m["error"] for m in ms if not m["ok"]]
    assert len(ms) == 2 * 2 * 2 * 2   # interface x query x via x tls
    for query in ("sql001", "sql50k"):
        sums = {(m["metrics"]["rows"], m["metrics"]["checksum"]) for m in ms if m["dims"]["sqlstrat"].startswith(query)}
        assert len(sums) == 1, sums
    pooled = [m for m in ms if m["dims"]["via"] == "pgbouncer"]
    assert len(pooled) == 8
    for m in pooled:
        mt, on = m["metrics"], m["dims"]["tls"] == "on"
        assert mt["pooler_queries"] >= 1 and mt["pooler_server_connections"] >= 1
        for leg in ("tls", "pooler_server_tls"):
            assert mt[leg].startswith(ENCRYPTED) if on else mt[leg] == "off", (m["case_id"], leg, mt[leg])
    for m in ms:
        if m["dims"]["via"] == "direct":
            assert "pooler_server_tls" not in m["metrics"]
            assert m["metrics"]["tls"].startswith(ENCRYPTED) == (m["dims"]["tls"] == "on")
    assert pooler_leftovers(workspace_root, export["run"]["run_id"]) == [] and our_processes(workspace_root) == []


def test_fdw_hop_through_the_pooler_both_legs_tls(workspace_root):
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "1", "--target", "fdw_local,fdw_external",
                      "--workload", "ro", "--clients", "1", "--fdw-via", "pgbouncer", "--pool-mode", "transaction",
                      "--tls", "on", workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    export = exported(workspace_root)
    ms = export["measurements"]
    assert all(m["ok"] for m in ms), [m["error"] for m in ms if not m["ok"]]
    assert {m["dims"]["target"] for m in ms} == {"fdw_local", "fdw_external"}
    for m in ms:
        mt = m["metrics"]
        assert m["dims"]["fdw_via"] == "pgbouncer" and m["dims"]["tls"] == "on" and mt["tps"] > 0
        assert mt["tls"].startswith(ENCRYPTED) and mt["pooler_server_tls"].startswith(ENCRYPTED), mt
        assert mt["fdw_pooler_transactions"] > 0
    assert pooler_leftovers(workspace_root, export["run"]["run_id"]) == [] and our_processes(workspace_root) == []


def test_tls_poolers_sigkill_then_clean_then_resume(workspace_root):
    """A killed run's TLS pooler is stopped (it dies with the tool, or clean stops it by its pid file) and its
    files go; a resume makes the CA, the certificates and the poolers anew and measures both legs again.
    At a fixed rate: each leg's TLS is checked at a rate step too (before, a step recorded none)."""
    ws = workspace_root / "ws-tls-pooler-killed"
    proc = spawn_pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "3", "--duration", "2",
                             "--target", "fdw_local", "--workload", "ro", "--clients", "1", "--fdw-via", "pgbouncer",
                             "--pool-mode", "transaction", "--tls", "off,on", *STATE_ONLY_RATE, workspace=ws)
    deadline = time.monotonic() + 180
    while True:
        assert time.monotonic() < deadline, "no measurement"
        line = proc.stderr.readline()
        assert line, f"run ended early: {proc.wait()}"
        if line.startswith("[1/"):
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_id = next(p.name for p in (ws / "servers").iterdir() if p.is_dir())   # not its .lock
    clean = pgpathbench("clean", workspace=ws)
    assert clean.returncode == 0, clean.stderr
    assert pooler_leftovers(ws, run_id) == [] and our_processes(ws) == [] and not (ws / "servers" / run_id).exists()
    resumed = pgpathbench("run", "--resume", run_id, workspace=ws)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    ms = exported(ws)["measurements"]
    assert len(ms) == 2 * 3 and all(m["ok"] for m in ms), [m["error"] for m in ms]
    for m in ms:
        on = m["dims"]["tls"] == "on"
        assert all(m["metrics"][leg].startswith(ENCRYPTED) == on for leg in ("tls", "pooler_server_tls"))
    assert pooler_leftovers(ws, run_id) == [] and our_processes(ws) == []


# -- a PgBouncer of ours in front of a user's server ---------------------------------------------------
USER_RUN = ["run", "interfaces", "--preset", "quick", "--repeat", "1", "--interface", "libpq,jdbc", "--method",
            "normal", "--sqlstrat", "sql50k:once", "--output", "p-none:null", "--transport", "tcp,remote",
            "--via", "direct,pgbouncer", "--pool-mode", "session"]


@pytest.fixture(scope="module")
def user_servers(workspace_root):
    """local: scram over TCP; remote: TLS only (verify-full with its root certificate): the pooler's leg to
    it must follow that DSN, or it cannot log in at all."""
    root = workspace_root / "user-servers-pooled"
    with UserServer(root, "local", "127.0.0.2") as local, UserServer(root, "remote", "127.0.0.3", ssl=True) as remote:
        yield local, remote


def _user_args(local, remote) -> list[str]:
    return ["--server", f"local={local.dsn()}", "--server", f"remote={remote.dsn()}"]


def test_pooler_in_front_of_user_servers(user_servers, workspace_root, monkeypatch):
    local, remote = user_servers
    ws = workspace_root / "ws-user-pooled"
    use_passfile(monkeypatch, workspace_root / "pgpass-pooled", local, remote)
    before = {s.dsn(): s.known_objects() for s in user_servers}
    res, seen = run_watching_ps(*USER_RUN, *_user_args(local, remote), workspace=ws)
    assert res.returncode == 0, res.stderr[-3000:]
    export = exported(ws)
    ms = export["measurements"]
    assert all(m["ok"] for m in ms), [(m["case_id"], m["error"]) for m in ms if not m["ok"]]
    assert len(ms) == 2 * 2 * 2   # interface x transport x via
    assert len({(m["metrics"]["rows"], m["metrics"]["checksum"]) for m in ms}) == 1
    for m in ms:
        if m["dims"]["via"] == "pgbouncer":   # its counters in the export: the queries it passed, its pool
            mt = m["metrics"]
            assert mt["pooler_queries"] >= 1 and mt["pooler_server_connections"] >= 1, m["case_id"]
            assert m["evidence"]["pgbouncer"]["pooler"]["pool_mode"] == "session"
    assert any("pgbouncer" in c for c in seen), "no pooler ran"
    assert_no_secret([local.password(), remote.password()],
                     {"command lines": "\n".join(seen), "stderr": res.stderr, "export": json.dumps(export)})
    assert pooler_leftovers(ws, export["run"]["run_id"]) == [] and our_processes(ws) == []
    assert_left_as_found(user_servers, before, ws)


def test_pooler_in_front_of_a_user_server_sigkill_then_clean(user_servers, workspace_root, monkeypatch):
    local, remote = user_servers
    ws = workspace_root / "ws-user-pooled-killed"
    use_passfile(monkeypatch, workspace_root / "pgpass-pooled", local, remote)
    before = {s.dsn(): s.known_objects() for s in user_servers}
    proc = spawn_pgpathbench(*USER_RUN, "--repeat", "50", *_user_args(local, remote), workspace=ws)
    deadline = time.monotonic() + 180
    while not any("pgbouncer" in c and str(ws) in c for c in cmdlines().values()):
        assert time.monotonic() < deadline and proc.poll() is None, "no pooler started"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_id = next(p.name for p in (ws / "servers").iterdir() if p.is_dir())   # not its .lock
    # Each pooler's and server's, in /tmp when the path is long; one killed before its pgbouncer.ini too.
    sockets = [socket_dir(d) for d in (ws / "servers" / run_id).iterdir() if d.is_dir()]
    clean = pgpathbench("clean", workspace=ws)
    assert clean.returncode == 0, clean.stderr
    assert pooler_leftovers(ws, run_id) == [] and our_processes(ws) == []
    assert [str(s) for s in sockets if s.exists()] == [], "a socket directory left"
    assert not any((ws / "servers" / run_id).glob("*pgbouncer*"))
    assert_left_as_found(user_servers, before, ws)


def test_fdw_overhead_pgbench_through_a_pooler_in_front_of_a_user_source(user_servers, workspace_root, monkeypatch):
    """pgbench (local target) on the user's source, direct and through our PgBouncer over its socket."""
    local, _ = user_servers
    ws = workspace_root / "ws-user-pooled-fdw"
    use_passfile(monkeypatch, workspace_root / "pgpass-pooled", local)
    before = {local.dsn(): local.known_objects()}
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "1", "--target", "local", "--workload",
                      "ro", "--clients", "1", "--via", "direct,pgbouncer", "--pool-mode", "transaction",
                      "--server", f"source={local.dsn()}", workspace=ws)
    assert res.returncode == 0, res.stderr[-3000:]
    ms = exported(ws)["measurements"]
    assert all(m["ok"] for m in ms) and {m["dims"]["via"] for m in ms} == {"direct", "pgbouncer"}, ms
    pooled = next(m["metrics"] for m in ms if m["dims"]["via"] == "pgbouncer")
    assert pooled["tps"] > 0 and pooled["pooler_transactions"] > 0
    assert our_processes(ws) == []
    assert_left_as_found([local], before, ws)
