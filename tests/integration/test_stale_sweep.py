"""A session killed outright (SIGKILL, the OOM killer) tears nothing down; the next session's start
removes what it left in the suite's folder (conftest.sweep_stale): its workspaces' servers stopped,
its small disk unmounted, its folders gone; what a live session or anything else made is kept."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

import pytest

from conftest import close_workspaces_in, cmdlines, pgpathbench, sweep_stale

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
