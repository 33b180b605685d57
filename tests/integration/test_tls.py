"""--tls off,on (issue 46): TLS as a hop, verified by every client, the negotiated TLS recorded.

Through the real CLI: interfaces at t50k's seed size (50k rows) over loopback TCP, every client with
its normal method (the one method all four have) connecting once, off and on: every case measured,
every connection of an `on` case encrypted and none of an `off` case (as the server logged each),
and the same rows, bytes and checksum with TLS as without. fdw-overhead quick with --tls on: the
FDW hop (postgres_fdw's connections from the external server to the source) encrypted, and so
remote-sampling's (a kept session's, read from the source's pg_stat_ssl). Then the
clients themselves against a server with a certificate of one CA: each reads pg_stat_ssl of its
own connection (its rows printed to a file) with the right CA, and fails verification (exit 3)
with another CA, which proves sslmode=verify-full is what they run with.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from conftest import REPO, pgpathbench, pgpathbench_main, started_cluster
from pgpathbench.procs import OsUser
from pgpathbench.servers import tls
from pgpathbench.tools.clients import CLIENTS, session_env

pytestmark = pytest.mark.integration

INTERFACES = ("libpq", "odbc", "jdbc", "psycopg")
T50K_ROWS = "50000"


@pytest.fixture(scope="module")
def built():
    res = subprocess.run([str(REPO / "scripts" / "build-clients")], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]


def _measurements(workspace) -> list[dict]:
    res = pgpathbench_main("export", "latest", "--format", "json", workspace=workspace)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["measurements"]


def _tls_files_left(workspace) -> list[str]:
    return [str(p) for p in workspace.rglob("*") if p.suffix in (".key", ".crt")]


@pytest.fixture(scope="module")
def interfaces_run(built, workspace_root):
    ws = workspace_root / "tls-interfaces"
    t0 = time.monotonic()
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--tls", "off,on", "--transport", "tcp",
                      "--interface", ",".join(INTERFACES), "--method", "normal", "--sqlstrat", "sql50k:once",
                      "--output", "p-none:null", "--t50k-rows", T50K_ROWS, "--repeat", "1", workspace=ws, timeout=1200)
    print(f"\ninterfaces --tls off,on: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stderr[-3000:]
    return ws, _measurements(ws)


def test_every_interface_case_measured_with_and_without_tls(interfaces_run):
    _, measurements = interfaces_run
    cases = {(m["dims"]["interface"], m["dims"].get("tls", "off")): m for m in measurements}
    assert set(cases) == {(i, t) for i in INTERFACES for t in tls.VALUES}
    assert all(m["ok"] for m in measurements), [m["error"] for m in measurements if not m["ok"]]
    for (iface, value), m in cases.items():
        assert m["case_id"].endswith(":on") == (value == "on")   # off keeps the id runs before --tls had
        negotiated = m["metrics"]["tls"]
        if value == "on":
            protocol, cipher, bits = negotiated.split(" ")
            assert protocol.startswith("TLSv1.") and cipher and int(bits) >= 128, (iface, negotiated)
        else:
            assert negotiated == "off", (iface, negotiated)


def test_checksums_agree_with_and_without_tls(interfaces_run):
    _, measurements = interfaces_run
    by = {(m["dims"]["interface"], m["dims"].get("tls", "off")): m["metrics"] for m in measurements}
    for iface in INTERFACES:
        off, on = by[(iface, "off")], by[(iface, "on")]
        assert (on["rows"], on["bytes"], on["checksum"]) == (off["rows"], off["bytes"], off["checksum"])
        assert on["rows"] == int(T50K_ROWS)


def test_nothing_of_tls_is_left_after_the_run(interfaces_run):
    ws, _ = interfaces_run
    assert _tls_files_left(ws) == []


def test_fdw_hop_is_encrypted(workspace_root):
    ws = workspace_root / "tls-fdw"
    t0 = time.monotonic()
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--tls", "on", "--target", "local,fdw_external",
                      "--workload", "ro", "--repeat", "1", workspace=ws, timeout=900)
    print(f"\nfdw-overhead --tls on: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stderr[-3000:]
    measurements = _measurements(ws)
    assert all(m["ok"] for m in measurements), [m["error"] for m in measurements if not m["ok"]]
    by = {m["dims"]["target"]: m for m in measurements}
    assert set(by) == {"local", "fdw_external"}
    assert by["local"]["dims"].get("tls", "off") == "off" and "tls" not in by["local"]["metrics"]
    assert by["fdw_external"]["dims"]["tls"] == "on"
    assert by["fdw_external"]["metrics"]["tls"].startswith("TLSv1."), by["fdw_external"]["metrics"]["tls"]
    assert _tls_files_left(ws) == []


def test_remote_sampling_fdw_hop_is_encrypted(workspace_root):
    """remote-sampling keeps its session (and postgres_fdw's connection): its TLS is read from the
    source's pg_stat_ssl."""
    ws = workspace_root / "tls-sampling"
    t0 = time.monotonic()
    res = pgpathbench("run", "remote-sampling", "--preset", "quick", "--tls", "on", "--test", "sampling",
                      "--rows", "10k", "--method", "system", "--fraction", "0.1", "--repeat", "1", workspace=ws,
                      timeout=900)
    print(f"\nremote-sampling --tls on: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stderr[-3000:]
    measurements = _measurements(ws)
    assert all(m["ok"] for m in measurements), [m["error"] for m in measurements if not m["ok"]]
    by = {m["dims"]["access"]: m for m in measurements}
    assert set(by) == {"direct", "fdw"} and "tls" not in by["direct"]["metrics"]
    assert by["fdw"]["dims"]["tls"] == "on" and by["fdw"]["metrics"]["tls"].startswith("TLSv1.")
    assert _tls_files_left(ws) == []


@pytest.fixture(scope="module")
def tls_server(workspace_root):
    """A managed server with a certificate of one CA, and the root certificate of another CA that did not
    sign it."""
    user = OsUser.for_servers()
    right, wrong = tls.Authority(workspace_root / "tls-ca", user), tls.Authority(workspace_root / "tls-other", user)
    files = right.issue("tls-server", ())
    wrong.issue("unused", ())   # makes the other CA
    assert (files.key.stat().st_mode & 0o777) == 0o600 and files.key.stat().st_uid == user.uid
    for cluster in started_cluster("tls-server", workspace_root, tls=files):
        yield cluster, right.root_cert, wrong.root_cert


def _ssl_of_own_connection(iface: str, cluster, root_cert, out) -> subprocess.CompletedProcess:
    conninfo = tls.conninfo(cluster.conninfo(transport="tcp"), tls.ON, root_cert)
    return subprocess.run([*CLIENTS[iface].command(), "-c", conninfo, "-s",
                           "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()", "-p", "1", "-o",
                           str(out)], capture_output=True, text=True, env=cluster.client_env(session_env()),
                          timeout=120)


def test_each_client_verifies_the_server(built, tls_server, tmp_path):
    cluster, right, wrong = tls_server
    for iface in INTERFACES:
        out = tmp_path / f"{iface}.out"
        ok = _ssl_of_own_connection(iface, cluster, right, out)
        assert ok.returncode == 0, f"{iface}: {ok.stderr}"
        ssl, version = out.read_text().rstrip("\n").split("\t")
        assert ssl in ("t", "1", "true") and version.startswith("TLSv1."), (iface, ssl, version)
        refused = _ssl_of_own_connection(iface, cluster, wrong, out)
        assert refused.returncode == 3, f"{iface} connected with a CA that did not sign the server's certificate"
        assert "certificate" in refused.stderr.lower() or "pkix" in refused.stderr.lower(), (iface, refused.stderr)
