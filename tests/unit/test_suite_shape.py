"""The suite's own shape: what would break `make test`'s collection while `make check` passes, and
its teardown when a `make test` is stopped."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def test_no_two_test_files_share_a_name():
    # Test folders have no __init__.py: pytest imports each file by its basename, so two of one name
    # in different folders fail to collect ("import file mismatch") once both are collected.
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert sorted(n for n, count in names.items() if count > 1) == []


STOPPED_SUITE = '''
import pathlib, time
import pytest

@pytest.fixture(scope="session")
def made(tmp_path_factory):
    mark = pathlib.Path(__file__).parent
    (mark / "set-up").touch()
    yield
    (mark / "torn-down").touch()

def test_waits(made):
    time.sleep(120)
'''


def test_a_suite_stopped_by_sigterm_tears_its_fixtures_down(tmp_path):
    """A make test killed by SIGTERM to its process group (a CI timeout) still runs the session's
    teardown, in an xdist worker as in `make test`: a real pytest of one test stopped half-way."""
    (tmp_path / "test_stopped.py").write_text(STOPPED_SUITE)
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", "-n", "1",
                             "test_stopped.py"], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "set-up").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert (tmp_path / "set-up").exists(), proc.communicate(timeout=60)[0]
    os.killpg(proc.pid, signal.SIGTERM)
    out = proc.communicate(timeout=60)[0]
    assert (tmp_path / "torn-down").exists(), out
