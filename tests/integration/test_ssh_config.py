"""Hosts named by aliases of an ssh config (`--ssh-config FILE`), one behind a ProxyJump (issue 47).

Two namespace hosts of tests/hosts.py: b lets in SSH logins from a's address only, a forwards to
b's sshd (and listens on JUMP_PORT too). The test's config names a by `aalias` (HostName, User,
Port JUMP_PORT, IdentityFile) and b by `balias` (ProxyJump aalias), or by `bhidden`, b's address
that only a reaches. No --ssh-identity, no user or port on the command line: the config gives
them. Then: doctor through the jump, its host keys (the jump host's too) refused until
--accept-host-key and then recorded in the workspace's known_hosts; bhidden refused in one line
(this machine cannot reach it, and no database connection is tunnelled); a placed run through
the alias and the jump, measuring over the real link from here, its fingerprint naming the
resolved host, nothing left on either host; `clean` reaches b through the jump after a run that
left its directory there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pgpathbench import scratch
from pgpathbench.procs import cmdline, processes_in
from pgpathbench.servers.host_ledger import HostLedger
from pgpathbench.servers.hosts import Hosts, SshSettings, parse_host
from pgpathbench.servers.network import available_link_kinds
from pgpathbench.servers.remote import HostWorkspace

from conftest import REPO, assert_user_error, pgpathbench, report_json
from hosts import JUMP_PORT, LOGIN, SshHosts

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with SshHosts(tmp_path_factory.mktemp("hosts"), ("a", "b"), jumps={"b": "a"}) as made:
        yield made


@pytest.fixture(scope="module")
def config(hosts, tmp_path_factory) -> Path:
    a, b = hosts["a"], hosts["b"]
    path = tmp_path_factory.mktemp("ssh") / "config"
    path.write_text("\n".join([
        "Host aalias", f"  HostName {a.address}", f"  User {LOGIN}", f"  Port {JUMP_PORT}",
        f"  IdentityFile {a.identity}",
        *(line for alias, address in (("balias", b.address), ("bhidden", b.hidden_address))
          for line in (f"Host {alias}", f"  HostName {address}", f"  User {LOGIN}", f"  IdentityFile {b.identity}",
                       "  ProxyJump aalias")), ""]))
    return path


def known(hosts, ws: Path) -> Path:
    """The workspace's known_hosts with a's key (at its JUMP_PORT) and b's (both addresses)."""
    ws.mkdir(parents=True, exist_ok=True)
    a_key, b_key = (hosts[n].known_hosts_line.split(" ", 1)[1] for n in ("a", "b"))
    (ws / "known_hosts").write_text(f"[{hosts['a'].address}]:{JUMP_PORT} {a_key}\n{hosts['b'].address} {b_key}\n"
                                    f"{hosts['b'].hidden_address} {b_key}\n")
    return ws


def ours_left(config: Path) -> list[str]:
    """Our ssh processes (a master, a jump's ssh -W) still running: any that read this config, of
    this checkout (their working directory, inherited: two suites side by side use the same aliases)."""
    return [cmd for cmd in map(cmdline, processes_in(REPO)) if cmd.startswith("ssh ") and
            ("balias" in cmd or "bhidden" in cmd or "aalias" in cmd or str(config) in cmd)]


def test_b_lets_in_no_direct_login(hosts):
    b = hosts["b"]
    res = subprocess.run(["ssh", "-F", "/dev/null", "-i", str(b.identity), "-o", "IdentitiesOnly=yes", "-o",
                          "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                          f"{LOGIN}@{b.address}", "true"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 255 and "Permission denied" in res.stderr, res.stderr


def test_doctor_through_the_jump_checks_both_host_keys(hosts, config, workspace_root):
    ws, a, b = workspace_root / "sshcfg-doctor", hosts["a"], hosts["b"]
    args = ("doctor", "--host", "b=ssh://balias", "--ssh-config", str(config))
    refused = pgpathbench(*args, workspace=ws)
    # the jump host's key, the first met on the way: named as such
    assert_user_error(refused, f"--host b: the host key of [{a.address}]:{JUMP_PORT}, a jump host on the way to "
                               "ssh://balias, is not in known_hosts", untouched=ws)
    assert "--accept-host-key b" in refused.stderr

    res = pgpathbench(*args, "--accept-host-key", "b", workspace=ws)
    assert res.returncode == 0, res.stdout + res.stderr
    recorded = (ws / "known_hosts").read_text()   # hashed (Debian's HashKnownHosts), both keys
    assert all(h.known_hosts_line.split()[-1] in recorded for h in (a, b)) and len(recorded.splitlines()) == 2
    out = " ".join(res.stdout.split())
    assert b.hostname in out and b.machine_id in out and a.hostname not in out
    assert f"{LOGIN}@{b.address}:22 via aalias (ssh config)" in out and f"to {b.address}: it answers TCP" in out
    assert not ours_left(config)
    assert not list(Path(scratch.tmpfs_or_tmp()).glob(f"pgpathbench-ssh-{os.getpid()}-*"))


def test_a_host_this_machine_cannot_reach_is_refused_not_tunnelled(hosts, config, workspace_root):
    ws = known(hosts, workspace_root / "sshcfg-hidden")
    hidden = hosts["b"].hidden_address
    res = pgpathbench("doctor", "--host", "b=bhidden", "--ssh-config", str(config), workspace=ws)
    assert_user_error(res, f"--host b: this machine cannot reach {hidden}: No route to host; a server placed there "
                           "is reached at that address directly, never through SSH or aalias: give the host a HostName")
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--transport", "remote", "--host", "b=bhidden",
                      "--ssh-config", str(config), "--place", "remote=b", workspace=ws)
    assert_user_error(res, f"--host b: this machine cannot reach {hidden}: No route to host;")
    assert sorted(p.name for p in ws.iterdir()) == ["known_hosts"] and not hosts["b"].ours()   # nothing written
    assert not ours_left(config)


def test_a_placed_run_through_the_alias_and_the_jump(hosts, config, workspace_root):
    ws, a, b = known(hosts, workspace_root / "sshcfg-run"), hosts["a"], hosts["b"]
    before = hosts.lan.counters("b")
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--transport", "remote", "--interface", "libpq",
                      "--repeat", "1", "--host", "b=ssh://balias", "--ssh-config", str(config), "--place", "remote=b",
                      workspace=ws)
    assert res.returncode == 0, res.stderr
    assert f"pg15_remote runs on host b (ssh://balias: {LOGIN}@{b.address}:22 via aalias) at {b.address}:" in res.stderr
    exported = report_json(ws)
    ok = [m for m in exported["measurements"] if m["ok"]]
    assert ok and len(ok) == len(exported["measurements"])
    crossed = sum(hosts.lan.counters("b")[k] - before[k] for k in ("rx_bytes", "tx_bytes"))
    assert crossed > sum(m["metrics"].get("bytes", 0) for m in ok) > 0   # the rows crossed b's veth
    fingerprint = exported["run"]["environment"]["sessions"][0]["servers"]["pg15_remote"]
    assert (fingerprint["host"]["host"], fingerprint["host"]["machine_id"]) == (b.hostname, b.machine_id)
    assert fingerprint["placed"]["ssh"] == {"hostname": b.address, "port": 22, "user": LOGIN, "via": "aalias"}
    assert (fingerprint["placed"]["at"], fingerprint["placed"]["address"]) == ("ssh://balias", b.address)
    assert str(config) in str(exported["run"]["options"])   # kept for --resume
    assert not a.ours() and not b.ours() and HostLedger(ws).entries() == [] and not ours_left(config)


def test_clean_reaches_a_host_through_its_jump(hosts, config, workspace_root):
    ws = known(hosts, workspace_root / "sshcfg-clean")
    ledger = HostLedger(ws)
    settings = SshSettings.checked(ws, None, (), {}, str(config))
    with Hosts({"b": parse_host("b=balias")}, settings) as conns:   # closed with its directory left: a SIGKILL
        HostWorkspace(conns["b"], "run-jumped", ledger).prepare()
    assert hosts["b"].ours() and ledger.entries("run-jumped")[0]["ssh_config"] == str(config)
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 0 and "host b: removed" in res.stdout, res.stdout + res.stderr
    assert not hosts["b"].ours() and ledger.entries() == [] and not ours_left(config)
