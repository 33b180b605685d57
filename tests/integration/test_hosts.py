"""Hosts over SSH (issue 47): namespace hosts of tests/hosts.py, each with its own sshd.

The hosts themselves first: a login as the non-root user and as root sees the host's own
hostname, machine-id, /tmp and home (not this machine's), and nothing of them is left after.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pgpathbench.servers.network import available_link_kinds

from hosts import LOGIN, SshHosts

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with SshHosts(tmp_path_factory.mktemp("hosts"), ("a",)) as made:
        yield made


def ssh(host, user: str, command: str, known_hosts: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-F", "/dev/null", "-i", str(host.identity), "-o", "IdentitiesOnly=yes",
                           "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={known_hosts}",
                           "-o", "StrictHostKeyChecking=yes", f"{user}@{host.address}", command],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("user", [LOGIN, "root"])
def test_a_login_sees_the_hosts_own_system(hosts, tmp_path, user):
    host = hosts["a"]
    known = tmp_path / "known_hosts"
    known.write_text(host.known_hosts_line + "\n")
    res = ssh(host, user, "id -un; hostname; cat /etc/machine-id; ls -A /tmp | wc -l; cd && pwd", known)
    assert res.returncode == 0, res.stderr
    name, hostname, machine_id, tmp_entries, home = res.stdout.split()
    assert (name, hostname, machine_id) == (user, host.hostname, host.machine_id)
    assert hostname != Path("/proc/sys/kernel/hostname").read_text().strip()
    assert machine_id != Path("/etc/machine-id").read_text().strip()
    assert tmp_entries == "0"   # its own tmpfs, not this machine's /tmp
    assert home == ("/root" if user == "root" else f"/home/{LOGIN}")


def test_an_unknown_host_key_is_refused(hosts, tmp_path):
    res = ssh(hosts["a"], LOGIN, "true", tmp_path / "empty_known_hosts")
    assert res.returncode == 255 and "Host key verification failed" in res.stderr


def test_nothing_is_left_after_the_hosts(tmp_path):
    with SshHosts(tmp_path / "hosts", ("x", "y")) as made:
        namespaces = [h.lan.netns for h in made.hosts.values()]
        pids = [pid for h in made.hosts.values() for pid in h.pids()]
        assert len(pids) >= 2   # an sshd each
        assert made["x"].machine_id != made["y"].machine_id
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in listed for ns in namespaces)
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]   # their mounts went with them
