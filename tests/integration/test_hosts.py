"""Hosts over SSH (issue 47): namespace hosts of tests/hosts.py, each with its own sshd.

The hosts themselves first: a login as the non-root user and as root sees the host's own
hostname, machine-id, /tmp and home (not this machine's), and nothing of them is left after.
Then `doctor --host`: an unknown host key refused (nothing written), accepted into the
workspace's known_hosts only, the host's facts read there (its hostname and machine-id, not
ours), a login refused and a port closed as one line each, and the multiplexed connection
closed at the end, or with a doctor that was killed (its socket's directory then swept by clean).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pgpathbench import scratch
from pgpathbench.procs import pid_alive
from pgpathbench.servers.network import available_link_kinds

from conftest import assert_user_error, cmdlines, namespaces, pgpathbench, pgpathbench_main, spawn_pgpathbench
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
        theirs = {h.lan.netns for h in made.hosts.values()}
        pids = [pid for h in made.hosts.values() for pid in h.pids()]
        assert len(pids) >= 2   # an sshd each
        assert made["x"].machine_id != made["y"].machine_id
    assert not theirs & set(namespaces())
    assert not [pid for pid in pids if pid_alive(pid)]   # their mounts went with them


def ssh_masters(host) -> list[int]:
    """Our side's master connections to the host (ssh -M ... ssh://USER@ADDRESS:22)."""
    return [pid for pid, cmd in cmdlines().items() if cmd.startswith("ssh ") and " -M " in cmd and host.address in cmd]


def test_doctor_refuses_an_unknown_host_key_then_accepts_it_into_the_workspace(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "doctor-hosts"
    args = ("doctor", "--host", f"a={host.url()}", "--ssh-identity", str(host.identity))
    refused = pgpathbench_main(*args, workspace=ws)
    assert_user_error(refused, "--host a: the host key of", untouched=ws)
    assert "--accept-host-key a" in refused.stderr

    res = pgpathbench(*args, "--accept-host-key", "a", workspace=ws)
    assert res.returncode == 0, res.stdout + res.stderr
    assert host.known_hosts_line.split()[-1] in (ws / "known_hosts").read_text()
    here = (Path("/proc/sys/kernel/hostname").read_text().strip(), Path("/etc/machine-id").read_text().strip())
    assert host.hostname in res.stdout and host.machine_id in res.stdout
    assert not any(fact in res.stdout for fact in here)   # read there, not here
    assert f"{LOGIN} (uid " in res.stdout and f"/home/{LOGIN}/.local/share/pgpathbench" in res.stdout
    assert "PostgreSQL 15 installed" in res.stdout and "`true` over the open SSH connection" in res.stdout
    assert not ssh_masters(host) and not list(Path(scratch.tmpfs_or_tmp()).glob(f"pgpathbench-ssh-{os.getpid()}-*"))


def test_doctor_as_root_on_the_host(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "doctor-root"
    ws.mkdir(parents=True)
    (ws / "known_hosts").write_text(host.known_hosts_line + "\n")   # known: no --accept-host-key
    res = pgpathbench("doctor", "--host", f"a={host.url('root')}", "--ssh-identity", str(host.identity),
                      workspace=ws)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "root (uid 0): servers would run there as an unprivileged account" in res.stdout
    assert "/var/lib/pgpathbench" in res.stdout and host.machine_id in res.stdout


@pytest.mark.parametrize("url, message", [
    ("ssh://nobody@{address}", "--host a: ssh://nobody@{address} refused the login (nobody@{address}: Permission "
                               "denied"),
    ("ssh://{login}@{address}:2", "--host a: cannot reach ssh://{login}@{address}:2 (")])
def test_doctor_refuses_a_host_it_cannot_log_in_to(hosts, workspace_root, url, message):
    host, ws = hosts["a"], workspace_root / "doctor-refused"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "known_hosts").write_text(host.known_hosts_line + "\n")
    fill = {"address": host.address, "login": LOGIN}
    res = pgpathbench_main("doctor", "--host", "a=" + url.format(**fill), "--ssh-identity", str(host.identity),
                           workspace=ws)
    assert_user_error(res, message.format(**fill))
    assert sorted(p.name for p in ws.iterdir()) == ["known_hosts"]


def test_a_killed_doctors_connection_ends_with_it_and_clean_sweeps_its_socket(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "doctor-killed"
    ws.mkdir(parents=True)
    (ws / "known_hosts").write_text(host.known_hosts_line + "\n")
    doctor = spawn_pgpathbench("doctor", "--host", f"a={host.url()}", "--ssh-identity", str(host.identity),
                               workspace=ws)
    base = Path(scratch.tmpfs_or_tmp())
    deadline = time.monotonic() + 60
    while not list(base.glob(f"pgpathbench-ssh-{doctor.pid}-*/a")) and time.monotonic() < deadline:
        time.sleep(0.02)
    masters = ssh_masters(host)
    assert masters, "the doctor's connection was open"
    doctor.send_signal(signal.SIGKILL)
    doctor.communicate()
    deadline = time.monotonic() + 10
    while any(map(pid_alive, masters)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(pid_alive, masters)), "the master outlived the killed doctor"
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 0, res.stderr
    # removed by this clean, or by any other's sweep meanwhile (the machine's other runs sweep too)
    assert not list(base.glob(f"pgpathbench-ssh-{doctor.pid}-*"))
