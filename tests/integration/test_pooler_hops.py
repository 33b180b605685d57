"""The pooler's hops (issue 46): --tls on through a PgBouncer, and a PgBouncer in front of a user's server.

Through the real CLI, Debian's pgbouncer 1.18 and real servers: interfaces at a few thousand rows over
loopback TCP through the pooler, libpq and jdbc, --tls off,on: every case measured with the checksum
psql's COPY gives, and on `on` cases both legs' TLS recorded (client to pooler as the pooler logged each
login, pooler to server from the server's pg_stat_ssl), on `off` cases neither. fdw-overhead quick
narrowed to the FDW hop through the pooler with --tls on: both of that hop's legs encrypted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cmdlines, our_processes, pgpathbench
from pgpathbench.servers.cluster import socket_dir

pytestmark = pytest.mark.integration

ENCRYPTED = "TLSv1."   # what an encrypted leg's record starts with (protocol, cipher[, bits])


def exported(workspace: Path) -> dict:
    res = pgpathbench("export", "latest", "--format", "json", workspace=workspace)
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
