"""fdw-overhead on user servers that are hosts of their own: each on a test LAN (tests/user_lan.py).

Host a holds the user's source, host b the user's external, each in its own network namespace
with one veth onto a bridge (this namespace on it too): so pgbench's traffic from here, and the
external's postgres_fdw reaching the source, cross real veths, as they would cross a network
between machines. Checked: the measured figures, each fingerprint's LAN address, the link probes
(the FDW hop included), the user's data and catalog as found, nothing of ours left, and that the
traffic took those paths (the source saw the external's address; host b's veth counted at least
the bytes of the statements it carried). A user source with a managed external (on this
namespace's loopback) is measured across the veth too.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from pgpathbench.servers.network import available_link_kinds

from conftest import pgpathbench, report_json
from user_lan import Lan
from user_server import UserServer, assert_left_as_found, use_passfile

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")]

ARGS = ["run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--repeat", "2", "--target",
        "local,fdw_external"]
PROBES = {"pg15_source_0ms", "pg15_source_0ms+fdw_scan"}
# What postgres_fdw sends for a foreign scan (pgbench's -S runs no such statement).
FDW_SQL = re.compile(r"(DECLARE|FETCH|CLOSE|START TRANSACTION|COMMIT TRANSACTION)\b")


@pytest.fixture(scope="module")
def lan_servers(workspace_root):
    root = workspace_root / "user-lan"
    with Lan(root / "lan", ("a", "b")) as lan, UserServer(root, "src", lan=lan.hosts["a"]) as src, \
            UserServer(root, "ext", lan=lan.hosts["b"]) as ext:
        yield lan, src, ext


def _measured(ws) -> dict:
    """The run's report; every measurement without error, with transactions."""
    run = report_json(ws)
    assert run["measurements"] and all(m["error"] is None and m["metrics"]["tps"] > 0 and
                                       m["metrics"]["transactions"] > 0 for m in run["measurements"])
    assert {m["dims"]["target"] for m in run["measurements"]} == {"local", "fdw_external"}
    return run


def _probes(run: dict) -> dict[str, int]:
    found: dict[str, int] = {}
    for p in run["link_probes"]:
        assert p["rtt_median_ms"] > 0
        found[p["link"]] = found.get(p["link"], 0) + 1
    return found


def _sent_bytes(statements) -> int:
    """The least bytes those statements took on the wire: their text (the protocol adds headers)."""
    return sum(len(s.text.encode()) for s in statements)


def test_two_user_servers_on_two_hosts_reach_each_other_across_the_lan(lan_servers, workspace_root, monkeypatch):
    lan, src, ext = lan_servers
    ws = workspace_root / "ws-user-lan"
    use_passfile(monkeypatch, workspace_root / "pgpass-lan", src, ext)   # no password on any command line
    before = {s.dsn(): s.known_objects() for s in (src, ext)}
    for s in (src, ext):
        s.mark_log()
    counted = lan.counters("b")
    t0 = time.monotonic()
    res = pgpathbench(*ARGS, "--server", f"source={src.dsn()}", "--server", f"external={ext.dsn()}", workspace=ws)
    grew = {k: v - counted[k] for k, v in lan.counters("b").items()}
    print(f"\nfdw-overhead on two LAN hosts: {time.monotonic() - t0:.0f} s; host b's veth: {grew}")
    assert res.returncode == 0, res.stderr[-3000:]

    run = _measured(ws)
    fingerprints = run["run"]["environment"]["sessions"][-1]["servers"]
    assert {fingerprints[f"user_{r}"]["address"] for r in ("source", "external")} == \
        {f"{src.address}:5432", f"{ext.address}:5432"}
    assert _probes(run) == {link: 4 for link in PROBES}      # before and after each of 2 rounds

    # The paths: the tool (this namespace's LAN address) reached both hosts; the source saw the
    # external's own address, postgres_fdw's; host b's veth carried every statement b's server
    # received (from here) and every one its postgres_fdw sent to the source.
    assert src.clients_seen() == {lan.root_address, ext.address}
    assert ext.clients_seen() == {lan.root_address}
    fdw = [s for s in src.statements_log() if FDW_SQL.match(s.text)]
    transactions = sum(m["metrics"]["transactions"] for m in run["measurements"]
                       if m["dims"]["target"] == "fdw_external")
    assert len([s for s in fdw if s.text.startswith("DECLARE")]) >= transactions
    assert grew["rx_bytes"] >= _sent_bytes(ext.statements_log()) > 0
    assert grew["tx_bytes"] >= _sent_bytes(fdw) > 0
    assert grew["rx_packets"] >= 2 * transactions and grew["tx_packets"] >= 2 * transactions

    assert_left_as_found([src, ext], before, ws)


def test_a_user_source_on_a_lan_host_with_a_managed_external(lan_servers, workspace_root, monkeypatch):
    """The managed external (this namespace's loopback) reaches the user's source at its LAN address."""
    lan, src, _ = lan_servers
    ws = workspace_root / "ws-user-lan-managed"
    use_passfile(monkeypatch, workspace_root / "pgpass-lan", src)
    before = {src.dsn(): src.known_objects()}
    src.mark_log()
    res = pgpathbench(*ARGS, "--server", f"source={src.dsn()}", workspace=ws)
    assert res.returncode == 0, res.stderr[-3000:]
    run = _measured(ws)
    assert run["run"]["environment"]["sessions"][-1]["servers"]["user_source"]["address"] == f"{src.address}:5432"
    assert _probes(run) == {link: 4 for link in PROBES}
    assert src.clients_seen() == {lan.root_address}          # the tool and the managed external: both from here
    assert any(FDW_SQL.match(s.text) for s in src.statements_log())
    assert_left_as_found([src], before, ws)
    assert json.loads((ws / "user-objects.json").read_text()) == []
