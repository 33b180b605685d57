"""Managed servers on other hosts (issue 47, `--place`): namespace hosts of tests/hosts.py.

A server made over the run's SSH connection (servers/remote.py) runs in its host's network
namespace, as the login user (or, with a root login, as an account made for it and removed
after), listens on the host's address, admits this machine, and reports the host's facts in its
fingerprint; removing the run's directory there leaves nothing of ours; after a killed run, the
host's ledger is what `clean` (host_ledger.py) removes, and a host it cannot reach is said.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from pgpathbench.servers.binaries import BUNDLES
from pgpathbench.servers.host_ledger import HostLedger
from pgpathbench.servers.hosts import Hosts, HostSpec, SshSettings
from pgpathbench.servers.network import available_link_kinds
from pgpathbench.servers.remote import HostWorkspace, RemoteCluster

from conftest import pgpathbench
from hosts import LOGIN, SshHosts

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with SshHosts(tmp_path_factory.mktemp("hosts"), ("a",)) as made:
        yield made


def opened(host, user: str, ws: Path) -> Hosts:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "known_hosts").write_text(host.known_hosts_line + "\n")
    specs = {"a": HostSpec("a", host.url(user))}
    return Hosts(specs, SshSettings(ws, host.identity))


def ours_on(host) -> list[Path]:
    """What of pgpathbench lies on the host: its workspaces (a login's and root's)."""
    return [p for p in host.files("/home") + host.files("/var/lib") if "pgpathbench" in str(p)]


def gone(pid: int, wait_s: float = 10) -> bool:
    """Whether the process has ended (a zombie not yet reaped by its new parent counts)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def accounts(host) -> str:
    return (host.dir / "etc" / "passwd").read_text()


def postmaster_of(host, cluster: RemoteCluster) -> int:
    data = cluster.dir + "/data/postmaster.pid"
    sub, rest = ("home", data.removeprefix("/home/")) if data.startswith("/home/") else \
        ("varlib", data.removeprefix("/var/lib/"))
    return int((host.dir / sub / rest).read_text().split()[0])


@pytest.mark.parametrize("user", [LOGIN, "root"])
def test_a_server_on_a_host_runs_there_and_leaves_nothing(hosts, workspace_root, user):
    host, ws = hosts["a"], workspace_root / f"place-{user}"
    ledger = HostLedger(ws)
    with opened(host, user, ws) as conns:
        place = HostWorkspace(conns["a"], "run-place-1", ledger)
        cluster = RemoteCluster("pg15_source", place, 15, ws / "servers" / "run-place-1")
        cluster.start(ws)
        try:
            assert ledger.entries("run-place-1")[0]["host"] == "a"   # recorded here before anything there
            with cluster.connect() as conn:
                addr, who = conn.execute("SELECT host(inet_server_addr()), current_user").fetchone()
            assert (addr, who) == (host.address, "pgpathbench")
            pid = postmaster_of(host, cluster)
            assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{host.lan.netns}").st_ino
            uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
            assert uid != 0
            expected = "pgpathbench" if user == "root" else LOGIN
            assert f"\n{expected}:x:{uid}:" in "\n" + accounts(host)
            assert "pgpathbench:" in accounts(host) if user == "root" else "pgpathbench:" not in accounts(host)
            facts = cluster.fingerprint()
            assert (facts["host_facts"]["host"], facts["host_facts"]["machine_id"]) == (host.hostname,
                                                                                       host.machine_id)
            assert "the host's own /usr/lib/postgresql/15/bin" in facts["binaries"]
            assert oct(cluster.passfile.stat().st_mode & 0o777) == "0o600"   # the password here: 0600 only
            assert not [p for p in host.files("/home") + host.files("/var/lib") if p.name == "pw"]
        finally:
            cluster.remove()
            said = place.remove()
    assert any("removed" in line for line in said)
    assert gone(pid)
    assert not ours_on(host) and "pgpathbench:" not in accounts(host)
    assert ledger.entries() == []


def test_clean_after_a_killed_run_removes_what_the_hosts_ledger_lists(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "place-killed"
    ledger = HostLedger(ws)
    with opened(host, "root", ws) as conns:   # its connection closed, its server left: as after a SIGKILL
        cluster = RemoteCluster("pg15_external", HostWorkspace(conns["a"], "run-killed", ledger), 15, ws / "s")
        cluster.start(ws)
        pid = postmaster_of(host, cluster)
    assert Path(f"/proc/{pid}").exists() and ours_on(host)
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 0 and f"host a: stopped {pid}" in res.stdout, res.stdout + res.stderr
    assert gone(pid)
    assert not ours_on(host) and "pgpathbench:" not in accounts(host)
    assert ledger.entries() == []


def test_clean_says_which_host_it_could_not_reach(hosts, workspace_root):
    ws = workspace_root / "place-unreached"
    ledger = HostLedger(ws)
    ws.mkdir(parents=True)
    (ws / "known_hosts").write_text(hosts["a"].known_hosts_line + "\n")
    with opened(hosts["a"], LOGIN, ws) as conns:
        conns["a"].spec = HostSpec("a", f"ssh://{LOGIN}@{hosts['a'].address}:2")   # a port nobody listens on
        ledger.add("run-gone", conns["a"], "/home/nobody/x")
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 1 and res.stderr.startswith(
        f"pgpathbench: clean: host a (ssh://{LOGIN}@{hosts['a'].address}:2): could not reach it"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert ledger.entries("run-gone")   # kept for a later clean


def test_no_password_on_any_command_line(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "place-secret"
    seen: list[str] = []
    with opened(host, LOGIN, ws) as conns:
        place = HostWorkspace(conns["a"], "run-secret", HostLedger(ws))
        cluster = RemoteCluster("pg15_source", place, 15, ws / "s")
        cluster.start(ws)
        try:
            seen = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
            assert cluster.password and not [line for line in seen if cluster.password in line]
        finally:
            cluster.remove()
            place.remove()


def test_a_major_the_host_lacks_is_shipped_there_as_the_pinned_bundle(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "place-bundle"
    bundle = BUNDLES[17]
    with opened(host, LOGIN, ws) as conns:
        place = HostWorkspace(conns["a"], "run-bundle", HostLedger(ws))
        cluster = RemoteCluster("pg17_source", place, 17, ws / "s")
        cluster.start(ws)
        try:
            with cluster.connect() as conn:
                assert conn.execute("SHOW server_version").fetchone()[0] == bundle.server_version
            facts = cluster.fingerprint()
            assert facts["binaries"].startswith(f"{bundle.coordinates}, shipped to the host")
            assert facts["bindir"] == f"{place.dir}/postgresql-{bundle.version}/bin"
            shipped = host.dir / "home" / place.dir.removeprefix("/home/") / f"postgresql-{bundle.version}"
            assert (shipped / "bin" / "postgres").is_file()   # on the host's own /home, over SSH
        finally:
            cluster.remove()
            place.remove()
    assert not ours_on(host)
