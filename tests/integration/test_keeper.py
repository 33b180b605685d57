"""The workspace's results cluster outlives a command by keeper.LINGER_S, for the next one to reuse
(`make demo`'s five commands start it once); `clean` stops it at once, a killed keeper leaves
nothing, and each workspace has its own. Real commands, real keeper and postmaster processes."""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

import pytest

from conftest import close_workspace, cmdlines, pgpathbench, workspace_base
from pgpathbench.procs import pid_alive
from pgpathbench.store.keeper import KEEPER_PID, LINGER_S

pytestmark = pytest.mark.integration


def results_cluster(ws: Path) -> tuple[int, int]:
    """The keeper's pid and its postmaster's, both alive."""
    keeper = int((ws / KEEPER_PID).read_text())
    postmaster = int((ws / "results" / "data" / "postmaster.pid").read_text().split()[0])
    assert pid_alive(keeper) and pid_alive(postmaster), (keeper, postmaster)
    return keeper, postmaster


def nothing_of_the_store(ws: Path) -> list[str]:
    """Live processes of the workspace's results cluster: its keeper, its postmaster."""
    return [f"{pid}: {cmd}" for pid, cmd in cmdlines().items()
            if f"{ws}/results/" in cmd or ("pgpathbench.store.keeper" in cmd and str(ws) in cmd)]


def runs(ws: Path) -> None:
    res = pgpathbench("runs", workspace=ws)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr


@pytest.fixture(scope="module")
def workspace():
    root = workspace_base() / f"keeper-{os.getpid()}-{secrets.token_hex(2)}"
    yield root
    close_workspace(root)


@pytest.fixture
def ws(workspace):
    """The module's workspace (its template made once) with no results cluster running."""
    assert pgpathbench("clean", workspace=workspace).returncode == 0
    assert nothing_of_the_store(workspace) == []
    return workspace


def test_the_next_command_reuses_the_cluster_then_it_stops_by_itself(ws):
    runs(ws)
    first = results_cluster(ws)   # the command has ended: the cluster lingers
    runs(ws)
    assert results_cluster(ws) == first, "the second command started its own"
    left = time.monotonic()
    deadline = left + LINGER_S + 60
    while nothing_of_the_store(ws) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert nothing_of_the_store(ws) == []
    assert time.monotonic() - left >= LINGER_S - 1, "it stopped before its linger was over"
    runs(ws)   # a new keeper then
    assert results_cluster(ws)[1] != first[1]


def test_clean_stops_a_lingering_cluster_at_once(ws):
    runs(ws)
    keeper, postmaster = results_cluster(ws)
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 0, res.stderr
    assert f"stopped the results cluster's keeper (pid {keeper})" in res.stdout, res.stdout
    assert not pid_alive(keeper) and not pid_alive(postmaster) and nothing_of_the_store(ws) == []
    runs(ws)
    res = pgpathbench("clean", "--all", workspace=ws)
    assert res.returncode == 0 and "stopped the results cluster's keeper" in res.stdout, res.stdout
    assert nothing_of_the_store(ws) == [] and not (ws / "results").exists()


def test_a_killed_keeper_leaves_nothing(ws):
    runs(ws)
    keeper, postmaster = results_cluster(ws)
    os.kill(keeper, signal.SIGKILL)
    deadline = time.monotonic() + 60   # well within the linger: the postmaster's parent-death signal
    while pid_alive(postmaster) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert nothing_of_the_store(ws) == []
    runs(ws)
    assert results_cluster(ws)[1] != postmaster


def test_two_workspaces_never_share_a_cluster(ws):
    other = ws.parent / f"{ws.name}-other"
    try:
        runs(ws)
        mine = results_cluster(ws)
        runs(other)   # while ours lingers (or, on a slow machine, has stopped)
        theirs = results_cluster(other)
        assert set(mine).isdisjoint(theirs)
        assert f"-D {other}/results/data" in cmdlines()[theirs[1]]
    finally:
        close_workspace(other)
