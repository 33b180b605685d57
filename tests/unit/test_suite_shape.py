"""The suite's own shape: what would break `make test`'s collection while `make check` passes, its
teardown when a `make test` is stopped, and where its workspaces go."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import conftest

TESTS = Path(__file__).resolve().parent.parent


def test_no_two_test_files_share_a_name():
    # Test folders have no __init__.py: pytest imports each file by its basename, so two of one name
    # in different folders fail to collect ("import file mismatch") once both are collected.
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert sorted(n for n, count in names.items() if count > 1) == []


STOPPED_SUITE = '''
import os, pathlib, time
import pytest

@pytest.fixture(scope="session")
def made():
    mark = pathlib.Path(__file__).parent
    (mark / "set-up").touch()
    yield
    time.sleep(float(os.environ["TEARDOWN_S"]))
    (mark / "torn-down").touch()

def test_waits(made):
    time.sleep(120)
'''


@pytest.mark.parametrize("teardown_s", [0, pytest.param(17, marks=pytest.mark.integration)])
def test_a_suite_stopped_by_sigterm_tears_its_fixtures_down(tmp_path, teardown_s):
    """A make test killed by SIGTERM to its process group (a CI timeout) still runs the session's
    teardown, in an xdist worker as in `make test`, however long it takes: a real pytest of one test
    stopped half-way. 17 s: past execnet's interrupt (5 s after its controller's stop) and exit (10 s
    after that), which cut it before the controller waited for its workers."""
    (tmp_path / "test_stopped.py").write_text(STOPPED_SUITE)
    env = {**os.environ, "PYTHONPATH": str(TESTS), "TEARDOWN_S": str(teardown_s)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", "-n", "1",
                             "test_stopped.py"], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "set-up").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert (tmp_path / "set-up").exists(), proc.communicate(timeout=60)[0]
    os.killpg(proc.pid, signal.SIGTERM)
    out = proc.communicate(timeout=60 + teardown_s)[0]
    assert (tmp_path / "torn-down").exists(), out
    assert proc.returncode != 0, out


@pytest.mark.skipif(os.geteuid() != 0, reason="gives a folder to another user (root only)")
def test_the_suites_folder_on_shm_is_taken_only_when_it_is_its_own(tmp_path, monkeypatch):
    """/dev/shm is everyone's: a folder of that name another user made, or anyone may write, is not
    used (the repository's .workspace is)."""
    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setattr(conftest, "SHM", shm)
    monkeypatch.setattr(conftest, "SHM_ROOM", 0)
    monkeypatch.delenv("TEST_WORKSPACES", raising=False)
    try:
        conftest.workspace_base.cache_clear()
        ours = conftest.workspace_base()
        assert ours.parent == shm and ours.stat().st_mode & 0o777 == 0o711
        for owner, mode in ((os.geteuid() + 1, 0o711), (os.geteuid(), 0o777)):
            os.chown(ours, owner, -1)
            ours.chmod(mode)
            conftest.workspace_base.cache_clear()
            assert conftest.workspace_base() == conftest.REPO / ".workspace", (owner, oct(mode))
        monkeypatch.setenv("TEST_WORKSPACES", "disk")
        os.chown(ours, os.geteuid(), -1)
        ours.chmod(0o711)
        conftest.workspace_base.cache_clear()
        assert conftest.workspace_base() == conftest.REPO / ".workspace"
    finally:
        conftest.workspace_base.cache_clear()   # the next call sees the real /dev/shm again
