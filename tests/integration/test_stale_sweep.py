"""A session killed outright (SIGKILL, the OOM killer) tears nothing down; the next session's start
removes what it left in the suite's folder (conftest.sweep_stale): its workspaces' servers stopped,
its test hosts' sshd ended and their namespaces deleted, its small disk unmounted, its folders gone;
what a live session or anything else made is kept."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

import pytest

from conftest import close_workspaces_in, cmdlines, namespaces, pgpathbench, sweep_stale
from hosts import SshHosts

from pgpathbench.procs import pid_alive

pytestmark = pytest.mark.integration


def dead_pid() -> int:
    proc = subprocess.Popen(["sleep", "60"])
    proc.kill()
    proc.wait()
    return proc.pid


def with_results_cluster(workspace) -> None:
    """A workspace whose results cluster runs (its keeper lingers after the command)."""
    res = pgpathbench("runs", workspace=workspace)
    assert res.returncode == 0, res.stderr


@pytest.fixture
def base(workspace_root):
    folder = workspace_root.parent / f"sweep-base-{secrets.token_hex(3)}"   # reachable by the servers' user
    folder.mkdir()
    yield folder
    for entry in folder.iterdir():   # what the sweep did not remove, if it failed
        close_workspaces_in(entry)
    shutil.rmtree(folder, ignore_errors=True)


def test_a_killed_sessions_entries_go_and_a_live_ones_stay(base):
    gone, me = dead_pid(), os.getpid()
    (base / f"templates-{gone}" / "pg15").mkdir(parents=True)
    with_results_cluster(base / f"test-{gone}-ab12")
    with_results_cluster(base / f"tmp-{gone}" / "popen-gw0" / "test_x0" / "ws")   # a test's own, deeper
    stale = [f"templates-{gone}", f"test-{gone}-ab12", f"tmp-{gone}"]
    if os.geteuid() == 0:
        disk = base / f"small-disk-{gone}-cd34"
        disk.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100m,mode=0755", "tmpfs", str(disk)], check=True)
        with_results_cluster(disk / "ws")
        stale.append(disk.name)
    kept = [f"tmp-{me}", f"test-{me}-ef56", "never-made-2"]
    for name in kept:
        (base / name).mkdir()
    assert [cmd for cmd in cmdlines().values() if str(base) in cmd and "postgres -D" in cmd]
    assert sweep_stale(base) == sorted(stale)
    assert sorted(path.name for path in base.iterdir()) == sorted(kept)
    left = [cmd for cmd in cmdlines().values() if str(base) in cmd and "pytest" not in cmd]
    assert not left, left
    assert not any(str(base) in line for line in open("/proc/self/mounts"))


@pytest.mark.skipif(os.geteuid() != 0, reason="test hosts need root (network namespaces)")
def test_a_killed_sessions_test_hosts_go(base):
    gone = dead_pid()
    made = SshHosts(base / f"tmp-{gone}" / "popen-gw1" / "test_y0" / "hosts", ("a",)).__enter__()
    netns = [rec["name"] for rec in made.lan.records if rec["kind"] == "netns"]
    inside = [pid for name in netns for pid in pids_in(name)]   # the host's sshd
    try:
        assert inside and set(netns) <= set(namespaces())
        assert sweep_stale(base) == [f"tmp-{gone}"]
    finally:
        for daemon in made.daemons:   # ours to reap, as the killed session's parent would have
            daemon.kill()
            daemon.wait(timeout=10)
    assert not set(netns) & set(namespaces())
    assert not [pid for pid in inside if pid_alive(pid)]   # a killed sshd's child may wait as a zombie
    assert list(base.iterdir()) == []


def pids_in(netns: str) -> list[int]:
    listed = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout
    return [int(pid) for pid in listed.split()]
