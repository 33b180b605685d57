"""interfaces (seed 003) on servers pgpathbench does not manage (--server local=DSN, remote=DSN).

Two servers of the user (tests/user_server.py): local on 127.0.0.2 (scram over TCP, its password
in the DSN) and remote on 127.0.0.3 (TLS only, sslmode=verify-full with its root certificate, the
password from the user's PGPASSFILE), the tool's login a non-superuser with CREATEDB only. One
round of every client and method over both servers' TCP, reading t50k at its smallest: every
client's checksum equal to psql's COPY, the user's servers left as found, and no password in
anything the run writes or shows, nor on any process's command line. The local server is TCP, so
the unix transport is left out (said), and refused when --transport names it.
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main, report_json, run_watching_ps
from pgpathbench.datasets.seed003 import SEED_ID, row_bytes
from user_server import UserServer, assert_left_as_found, assert_no_secret, use_passfile

pytestmark = pytest.mark.integration

# The smallest run that still runs every client and method: sql50k once over t50k's fewest rows.
QUICK = ["--preset", "quick", "--repeat", "1", "--sqlstrat", "sql50k:once", "--t50k-rows", str(SEED_ID),
         "--output", "p-none:null"]
INTERFACES = {"libpq", "odbc", "jdbc", "psycopg"}


@pytest.fixture(scope="module")
def servers(workspace_root):
    root = workspace_root / "user-servers-interfaces"
    with UserServer(root, "local", "127.0.0.2") as local, UserServer(root, "remote", "127.0.0.3", ssl=True) as remote:
        yield local, remote


def _servers(local: UserServer, remote: UserServer) -> list[str]:
    return ["--server", f"local={local.dsn()} password={local.password()}", "--server", f"remote={remote.dsn()}"]


def test_interfaces_on_two_user_servers_every_client_matches_psql(servers, workspace_root, monkeypatch):
    local, remote = servers
    ws = workspace_root / "ws-user-interfaces"
    use_passfile(monkeypatch, workspace_root / "pgpass", remote)   # the remote's password by a file, the local's in its DSN
    before = {s.dsn(): s.known_objects() for s in servers}
    for s in servers:
        s.mark_log()
    t0 = time.monotonic()
    res, cmdlines = run_watching_ps("run", "interfaces", *QUICK, *_servers(local, remote), workspace=ws)
    print(f"\ninterfaces on two user servers: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "warning: --server local: its DSN holds a password" in res.stderr
    assert "local is your server: measured over tcp (lcl:tcp) only" in res.stderr

    run = report_json(ws)
    ms = run["measurements"]
    assert all(m["ok"] for m in ms), [(m["case_id"], m["error"]) for m in ms if not m["ok"]]
    assert {(m["dims"]["interface"], m["dims"]["transport"]) for m in ms} == \
        {(i, t) for i in INTERFACES for t in ("tcp", "remote")}
    assert len(ms) == 11 * 2     # every client's every method, over each server
    session = run["run"]["environment"]["sessions"][-1]
    facts = session["setup"]["15"]["interfaces"]
    ref = facts["reference"]["sql50k"]
    assert (ref["rows"], ref["bytes"]) == (SEED_ID, row_bytes("t50k", SEED_ID))
    assert {(m["metrics"]["rows"], m["metrics"]["bytes"], m["metrics"]["checksum"]) for m in ms} == \
        {(ref["rows"], ref["bytes"], ref["checksum"])}
    assert {k for k in session["tools"] if k.endswith(" client")} == {f"{i} client" for i in INTERFACES}
    # every client reached the TLS-only server by the DSN's verify-full and root certificate
    assert f"sslmode=verify-full sslrootcert={remote.root_cert}" in facts["conninfo"]["remote_0ms"]
    for m in ms:   # evidence through the user server's own watched(): SQL, and no processes of its host
        role = "remote" if m["dims"]["transport"] == "remote" else "local"
        db = m["evidence"]["servers"][role]["database"]
        assert db["xact_commit"] >= 1 and db["tup_returned"] + db["tup_fetched"] >= SEED_ID, m["case_id"]
        assert m["evidence"]["missing"][f"{role}.cpu_ms"] == "host processes not visible"
    text = json.dumps(run)
    assert '"user_local"' in text and '"user_remote"' in text

    assert_left_as_found(servers, before, ws)
    markdown = pgpathbench_main("report", "latest", "--format", "markdown", workspace=ws).stdout
    csv = pgpathbench_main("export", "latest", "--format", "csv", workspace=ws).stdout
    assert "| user server local |" in markdown and "| user server remote |" in markdown
    assert_no_secret([local.password(), remote.password()], {
        "stdout": res.stdout, "stderr": res.stderr, "json": text, "markdown": markdown, "csv": csv,
        "ps": "\n".join(cmdlines)})
    assert any("pgpathbench_" in c and ("pgpb" in c or "psql" in c) for c in cmdlines), "no client seen running"


def test_a_user_local_server_by_its_socket_is_measured_over_unix(servers, workspace_root):
    """A DSN whose host is the server's socket directory: lcl:ipc, by the user's socket (trust there)."""
    local, _ = servers
    ws = workspace_root / "ws-user-interfaces-socket"
    before = {local.dsn(): local.known_objects()}
    local.mark_log()
    res = pgpathbench("run", "interfaces", *QUICK, "--transport", "unix", "--method", "normal",
                      "--server", f"local=host={local.sockdir} port={local.port} user=app dbname=userdb", workspace=ws)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "local is your server: measured over unix (lcl:ipc) only" in res.stderr
    ms = report_json(ws)["measurements"]
    assert all(m["ok"] for m in ms) and {(m["dims"]["interface"], m["dims"]["transport"]) for m in ms} == \
        {(i, "unix") for i in INTERFACES - {"jdbc"}}      # pgjdbc has no unix sockets
    assert len({m["metrics"]["checksum"] for m in ms}) == 1
    assert_left_as_found([local], before, ws)


@pytest.mark.parametrize("case", ["unix over tcp", "remote socket", "verify-full link"])
def test_transports_a_user_server_cannot_serve_are_refused_with_nothing_written(servers, workspace_root, case):
    local, remote = servers
    ws = workspace_root / f"ws-user-interfaces-bad-{case.replace(' ', '-')}"
    args, message = {
        "unix over tcp": (["--transport", "unix,tcp"], "--transport unix: your server in the local role is reached "
                                                       "over TCP"),
        "remote socket": (["--server", f"remote=host={remote.sockdir} port={remote.port} user=app dbname=userdb"],
                          "--server remote: its DSN names a unix socket"),
        "verify-full link": (["--server", f"remote={remote.dsn()}", "--latency", "0,2ms"],
                             "--latency/--bandwidth: an emulated link reaches your remote server at 127.0.0.1"),
    }[case]
    servers_args = ["--server", f"local={local.dsn()} password={local.password()}"]
    for s in servers:
        s.mark_log()
    res = pgpathbench("run", "interfaces", *QUICK, *servers_args, *args, workspace=ws)
    assert_user_error(res, message, untouched=ws)
    assert local.password() not in res.stderr
    for s in servers:
        assert s.statements_log() == [] and s.ours() == []   # refused before connecting at all


@pytest.mark.parametrize("case", ["remote sslkey", "local target_session_attrs", "fidelity sslkey"])
def test_a_dsn_the_jdbc_client_cannot_use_is_refused_with_nothing_written(servers, workspace_root, case):
    """pgjdbc takes only some of libpq's keywords (clients.JDBC_CONNINFO_KEYWORDS): a DSN with another is
    refused when the servers are checked, before our database is made there, not at jdbc's first run."""
    local, remote = servers
    ws = workspace_root / f"ws-user-interfaces-jdbc-{case.replace(' ', '-')}"
    keys = "sslcert=/nonexistent/client.crt sslkey=/nonexistent/client.key"     # no such files: libpq goes on
    study, role, dsn, fix = {
        "remote sslkey": ("interfaces", "remote", f"{remote.dsn()} {keys}", "--interface without jdbc"),
        "local target_session_attrs": ("interfaces", "local", f"{local.dsn()} target_session_attrs=any",
                                       "--interface without jdbc"),
        "fidelity sslkey": ("interfaces-fidelity", "local", f"{local.dsn()} {keys}", "--tool without jdbc"),
    }[case]
    named = "target_session_attrs" if "target" in case else "sslcert, sslkey"
    servers_args = ["--server", f"{role}={dsn} password={(local if role == 'local' else remote).password()}"]
    before = {s.dsn(): s.known_objects() for s in servers}
    for s in servers:
        s.mark_log()
    args = QUICK if study == "interfaces" else ["--preset", "quick", "--repeat", "1"]
    res = pgpathbench("run", study, *args, *servers_args, workspace=ws)
    assert_user_error(res, f"--server {role}: the jdbc client cannot connect by this DSN: pgjdbc has no equivalent "
                           f"of {named} here; give {fix}, or a DSN without {named}", untouched=ws)
    assert local.password() not in res.stderr and remote.password() not in res.stderr
    checked = local if role == "local" else remote
    assert checked.statements_log(), "refused after the server was checked (read), not before"
    for s in servers:
        s.assert_as_found(before[s.dsn()])
