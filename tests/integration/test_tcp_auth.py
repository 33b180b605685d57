"""--tcp-auth: what checks a TCP client's password on a managed server is what the run asked for.

md5 in pg_hba.conf checks by md5 only a password stored as an md5 hash (with a SCRAM secret stored,
PostgreSQL runs SCRAM whatever the file says), so both must change. The server says which method
authenticated each connection (log_connections, PostgreSQL 14 and later): checked here for every
client, over TCP, with the password from PGPASSFILE alone.
"""

from __future__ import annotations

import json
import re
import subprocess

import psycopg
import pytest

from conftest import REPO, pgpathbench, pgpathbench_main, started_cluster
from pgpathbench.tools.clients import CLIENTS, session_env

pytestmark = pytest.mark.integration

INTERFACES = ("libpq", "odbc", "jdbc", "psycopg")
AUTHENTICATED = re.compile(r'connection authenticated: identity="pgpathbench" method=(\S+)')


@pytest.fixture(scope="module")
def built():
    res = subprocess.run([str(REPO / "scripts" / "build-clients")], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.fixture(scope="module", params=["scram-sha-256", "md5"])
def server(request, workspace_root):
    yield from started_cluster(f"auth-{request.param}", workspace_root, {"log_connections": "on"},
                               tcp_auth=request.param)


def _methods(server) -> list[str]:
    return AUTHENTICATED.findall(server.logfile.read_text(errors="replace"))


def test_every_client_authenticates_by_the_asked_method(built, server):
    before = len(_methods(server))
    for iface in INTERFACES:
        res = subprocess.run([*CLIENTS[iface].command(), "-c", server.conninfo(transport="tcp"), "-s", "select 1"],
                             capture_output=True, text=True, env=server.client_env(session_env()), timeout=120)
        assert res.returncode == 0, f"{iface}: {res.stderr}"
    assert _methods(server)[before:] == [server.tcp_auth] * len(INTERFACES)
    with server.connect() as conn:
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = 'pgpathbench'").fetchone()[0]
    assert stored.startswith("md5" if server.tcp_auth == "md5" else "SCRAM-SHA-256$4096:")
    assert server.password not in server.logfile.read_text(errors="replace")
    assert server.fingerprint()["auth"]["tcp"] == server.tcp_auth


def test_the_method_holds_across_a_restart(server):
    server.restart()
    before = len(_methods(server))
    with server.connect() as conn:
        conn.execute("SELECT 1")                   # the socket asks no password
    psycopg.connect(server.conninfo(transport="tcp"), passfile=str(server.passfile)).close()
    assert _methods(server)[before:] == [server.tcp_auth]


def test_an_interfaces_run_records_its_tcp_auth(built, workspace_root):
    """A quick run over tcp and remote with md5: both servers say so in the stored environment."""
    ws = workspace_root / "tcp-auth-run"
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--interface", "libpq", "--method", "normal",
                      "--transport", "tcp,remote", "--sqlstrat", "sql001:each,sql001:once", "--tcp-auth", "md5",
                      "--repeat", "1", workspace=ws, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    export = json.loads(pgpathbench_main("export", "latest", "--format", "json", workspace=ws).stdout)
    assert export["run"]["options"]["studies"][0]["params"]["tcp_auth"] == "md5"
    servers = export["run"]["environment"]["sessions"][0]["servers"]
    assert {s["auth"]["tcp"] for s in servers.values()} == {"md5"} and len(servers) == 2
