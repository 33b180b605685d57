"""file-fdw-tpch's postgres_fdw workers on other hosts (issue 47, `--place workerK=NAME`): two
namespace hosts of tests/hosts.py, a non-root login, the study at its smallest (quick preset, Q1,
one round, --layout postgres_fdw with two workers, one per host).

Asserts: the run measures, its answers checked (regular and foreign alike, and DuckDB's); each
worker's postmaster in its host's network namespace; its file_fdw tables read part files shipped
to its directory on the host (seen there during the run), not this machine's; the load and the
shipped files crossed each host's veth; each host's facts in its worker's fingerprint; each
placed worker's CPU read on its host; the client path and the FDW hop to each worker probed; no
password on any command line here or there; nothing of ours left on either host.
"""

from __future__ import annotations

import contextlib
import os
import time

import pytest

from pgpathbench.servers.network import available_link_kinds

from conftest import cmdlines, placed_passwords, report_json, spawn_pgpathbench
from hosts import LOGIN, SshHosts
from test_place import accounts, known, ours_on

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")]

PLACED = {"a": "worker1", "b": "worker2"}


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with SshHosts(tmp_path_factory.mktemp("hosts"), tuple(PLACED)) as made:
        yield made


def watch(proc, hosts, ws, placed=PLACED):
    """The run to its end: every command line (the hosts' processes are in our pid namespace), each
    worker's postmaster's network namespace, our files seen on each host, the password files' secrets."""
    seen, netns, shipped, passwords = [], {n: set() for n in placed}, {n: set() for n in placed}, set()
    while proc.poll() is None:
        passwords |= placed_passwords(ws)
        runs = [p.name for p in ws.glob("servers/*")]
        for pid, cmd in cmdlines().items():
            if "pgpathbench.cli" in cmd:
                continue
            seen.append(cmd)
            for name, role in placed.items():
                if " -D " in cmd and any(f"/runs/{run}/pg15_{role}/data" in cmd for run in runs):
                    with contextlib.suppress(OSError):
                        netns[name].add(os.stat(f"/proc/{pid}/ns/net").st_ino)
        for name in placed:
            shipped[name] |= {str(p) for p in ours_on(hosts[name]) if p.parent.name == "files"}
        time.sleep(0.1)
    out, err = proc.communicate()
    return err, seen, netns, shipped, passwords


def test_postgres_fdw_workers_on_two_hosts(hosts, workspace_root):
    ws = known(hosts, workspace_root / "place-tpch")
    before = {n: hosts.lan.counters(n) for n in PLACED}
    t0 = time.monotonic()
    proc = spawn_pgpathbench(
        "run", "file-fdw-tpch", "--preset", "quick", "--queries", "q1", "--layout", "postgres_fdw", "--partitions",
        "2", "--repeat", "1", *(a for n in PLACED for a in ("--host", f"{n}={hosts[n].url()}")),
        "--ssh-identity", str(hosts["a"].identity), *(a for n, r in PLACED.items() for a in ("--place", f"{r}={n}")),
        workspace=ws)
    err, seen, netns, shipped, passwords = watch(proc, hosts, ws)
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, err[-3000:]
    assert "pg15_worker1 runs on host a" in err and "pg15_worker2 runs on host b" in err, err
    exported = report_json(ws)
    ms = exported["measurements"]
    assert len(ms) == 2 and all(m["ok"] for m in ms), [m["error"] for m in ms]
    assert {m["dims"]["storage"] for m in ms} == {"regular", "foreign"} and {m["metrics"]["rows"] for m in ms} == {4}
    session = exported["run"]["environment"]["sessions"][0]
    setup = session["setup"]["15"]["file-fdw-tpch"]
    answer = setup["answers"]["q1"]
    assert sorted(answer["agreeing"]) == ["foreign/postgres_fdw", "regular/postgres_fdw"] and \
        answer["duckdb"] == "agrees", answer
    for m in ms:   # each placed worker's CPU, read on its host over SSH
        for role in PLACED.values():
            assert set(m["evidence"]["servers"][role]["cpu_read_ms"]) == {"before", "after"}, m["evidence"]["missing"]
    part_bytes = {k: sum(sizes[k - 1] for sizes in setup["part_files"].values()) for k in (1, 2)}
    for name, role in PLACED.items():
        host, k = hosts[name], int(role[-1])
        fingerprint = session["servers"][f"pg15_{role}"]
        assert (fingerprint["host"]["host"], fingerprint["host"]["machine_id"]) == (host.hostname, host.machine_id)
        assert fingerprint["placed"]["os_user"] == LOGIN
        assert netns[name] == {os.stat(f"/run/netns/{host.lan.netns}").st_ino}, netns
        read_at = setup["worker_files"][f"pg15_{role}"]   # its file_fdw tables' files: those shipped there
        assert set(read_at) == {"lineitem", "orders"}
        assert all(path.startswith(f"/home/{LOGIN}/.local/share/pgpathbench/runs/") for path in read_at.values())
        assert {os.path.basename(p) for p in shipped[name]} == {"lineitem", "orders"}, shipped
        crossed = sum(hosts.lan.counters(name)[c] - before[name][c] for c in ("rx_bytes", "tx_bytes"))
        assert crossed > 1.5 * part_bytes[k], (name, crossed, part_bytes[k])   # its files shipped, then COPY
    probes = {p["link"] for p in exported["link_probes"] if p["rtt_median_ms"] > 0}
    assert {f"pg15_{r}@{n}{hop}" for n, r in PLACED.items() for hop in ("", "+fdw_scan")} <= probes, probes
    assert len(passwords) == 2 and not [c for c in seen for p in passwords if p in c]
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"])
    assert "pgpathbench:" not in accounts(hosts["a"]) + accounts(hosts["b"])
    print(f"placed file-fdw-tpch run: {seconds:.1f} s")


def test_a_citus_worker_on_a_host_gets_the_shipped_citus_build(hosts, workspace_root):
    """The hosts' PostgreSQL 15 has no Citus: this machine's tree (Debian's 15 with Citus) is shipped;
    the coordinator here adds the worker by its host's address, and the worker writes its foreign
    shards' files on its own disk there."""
    ws = known(hosts, workspace_root / "place-citus")
    host = hosts["a"]
    before = hosts.lan.counters("a")
    t0 = time.monotonic()
    proc = spawn_pgpathbench("run", "file-fdw-tpch", "--preset", "quick", "--queries", "q1", "--layout", "citus",
                             "--workers", "1", "--partitions", "2", "--repeat", "1", "--host", f"a={host.url()}",
                             "--ssh-identity", str(host.identity), "--place", "citus_worker=a", workspace=ws)
    err, seen, netns, _, passwords = watch(proc, hosts, ws, {"a": "citus_worker1"})
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, err[-3000:]
    assert "pg15_citus_worker1 runs on host a" in err, err
    assert netns["a"] == {os.stat(f"/run/netns/{host.lan.netns}").st_ino}, netns
    # one secret, the Citus cluster's (the coordinator's, shared by its worker): on no command line
    assert len(passwords) == 1 and not [c for c in seen for p in passwords if p in c]
    exported = report_json(ws)
    ms = exported["measurements"]
    assert len(ms) == 2 and all(m["ok"] for m in ms), [m["error"] for m in ms]
    session = exported["run"]["environment"]["sessions"][0]
    setup = session["setup"]["15"]["file-fdw-tpch"]
    assert sorted(setup["answers"]["q1"]["agreeing"]) == ["foreign/citus", "regular/citus"]
    assert setup["answers"]["q1"]["duckdb"] == "agrees"
    worker = session["servers"]["pg15_citus_worker1"]
    assert (worker["host"]["host"], worker["host"]["machine_id"]) == (host.hostname, host.machine_id)
    assert "with Citus" in worker["binaries"] and "shipped to the host" in worker["binaries"], worker["binaries"]
    nodes = setup["citus"]["nodes"]
    assert [(n["host"], n["group"] > 0) for n in nodes if n["group"] > 0] == [(host.address, True)], nodes
    on_worker = [f for f in setup["citus"]["shard_files"] if f["node"] == "pg15_citus_worker1"]
    assert on_worker and all(f["path"].startswith(f"/home/{LOGIN}/.local/share/pgpathbench/runs/") and f["bytes"] > 0
                             for f in on_worker), on_worker
    for m in ms:
        assert set(m["evidence"]["servers"]["citus_worker1"]["cpu_read_ms"]) == {"before", "after"}
    crossed = sum(hosts.lan.counters("a")[c] - before[c] for c in ("rx_bytes", "tx_bytes"))
    assert crossed > 40e6, crossed   # the shipped tree (about 60 MB, compressed by nothing) and the load
    assert "pg15_citus_worker1@a" in {p["link"] for p in exported["link_probes"] if p["rtt_median_ms"] > 0}
    assert not ours_on(host) and "pgpathbench:" not in accounts(host)
    print(f"placed citus run: {seconds:.1f} s")
