"""Who is alive in a workspace (workspace.py): real processes holding real flocks, ended by SIGKILL."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgpathbench.procs import OsUser
from pgpathbench.workspace import Workspace

CHILD = """
import sys, time
from pathlib import Path
from pgpathbench.procs import OsUser
from pgpathbench.workspace import Workspace
ws = Workspace(Path(sys.argv[1]), OsUser("me", 0, 0))
what, arg = sys.argv[2], sys.argv[3]
if what == "hold":
    ws.hold_run(arg)
else:
    ws.enter(arg)
print("in", flush=True)
time.sleep(600)
"""

ALONE = """
import sys
from pathlib import Path
from pgpathbench.errors import UserError
from pgpathbench.procs import OsUser
from pgpathbench.workspace import Workspace
try:
    Workspace(Path(sys.argv[1]), OsUser("me", 0, 0)).enter("clean --all", alone=True)
except UserError as e:
    print(e)
    sys.exit(2)
"""


_children: list[subprocess.Popen] = []


def child(root: Path, what: str, arg: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), what, arg], stdout=subprocess.PIPE, text=True)
    _children.append(proc)
    return proc


def ended(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


@pytest.fixture
def ws(tmp_path):
    yield Workspace(tmp_path, OsUser("me", os.getuid(), os.getgid()))
    while _children:   # also when the test failed half-way
        proc = _children.pop()
        if proc.poll() is None:
            ended(proc)


def test_a_run_is_alive_while_its_process_holds_its_lock_and_gone_after_a_sigkill(ws):
    proc = child(ws.root, "hold", "r1")
    assert proc.stdout.readline() == "in\n"
    with ws.claim_run("r1") as holder:
        assert holder == f"pid {proc.pid}"
    ended(proc)
    with ws.claim_run("r1") as holder:
        assert holder is None
        assert ws.run_lock("r1").exists()
    assert not ws.run_lock("r1").exists(), "a claim removes the lock of a run that is gone"


def test_a_run_starting_while_its_leftovers_are_claimed_waits_then_holds_a_lock_others_see(ws):
    with ws.claim_run("r1") as holder:
        assert holder is None
        proc = child(ws.root, "hold", "r1")   # a resume: waits for the claim to end
        time.sleep(0.5)
        assert proc.poll() is None and not _readable(proc)
    assert proc.stdout.readline() == "in\n"
    with ws.claim_run("r1") as holder:   # its lock is on the file that is there now, not on the removed one
        assert holder == f"pid {proc.pid}"


def test_alone_is_refused_naming_who_else_is_in_and_records_of_the_dead_go(ws):
    reader = child(ws.root, "enter", "report")
    run = child(ws.root, "enter", "run 20260101-000000-abcd")
    assert reader.stdout.readline() == run.stdout.readline() == "in\n"
    ended(reader)
    assert ws.others() == [f"run 20260101-000000-abcd (pid {run.pid})"]
    assert not (ws.root / "processes" / str(reader.pid)).exists(), "a dead process's record is removed"
    res = subprocess.run([sys.executable, "-c", ALONE, str(ws.root)], capture_output=True, text=True)
    assert res.returncode == 2 and res.stdout.startswith("--all: other pgpathbench processes use workspace")
    assert f"run 20260101-000000-abcd (pid {run.pid})" in res.stdout and "report" not in res.stdout
    ended(run)
    assert subprocess.run([sys.executable, "-c", ALONE, str(ws.root)], capture_output=True, text=True).returncode == 0


def _readable(proc: subprocess.Popen) -> bool:
    return bool(select.select([proc.stdout], [], [], 0)[0])


def test_leave_all_ends_this_process_presence_as_its_exit_would(ws):
    from pgpathbench.workspace import leave_all
    ws.enter("report")
    res = subprocess.run([sys.executable, "-c", ALONE, str(ws.root)], capture_output=True, text=True)
    assert res.returncode == 2 and f"report (pid {os.getpid()})" in res.stdout
    leave_all()
    assert not (ws.root / "processes" / str(os.getpid())).exists()
    assert subprocess.run([sys.executable, "-c", ALONE, str(ws.root)], capture_output=True, text=True).returncode == 0
    ws.enter("runs")   # entered again after leaving: seen again, and left again
    assert (ws.root / "processes" / str(os.getpid())).read_text().startswith("runs")
    leave_all()
    leave_all()   # idempotent (it also runs at exit)
    assert not (ws.root / "processes" / str(os.getpid())).exists()
