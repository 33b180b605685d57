"""The host CPU reading's script and its output (evidence/host_cpu.py), run here by a real sh and
awk against a /proc tree of files the test writes: what a reading adds up, whatever comm holds,
with the kernel's children list and without it, and what it says of a process that is gone.
The same script over SSH against real processes: tests/integration/test_host_cpu.py."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from pgpathbench.evidence import host_cpu
from pgpathbench.evidence.host_cpu import clk_tck, parse_reading, reading_script

PARENT = 4000


class ShellHere:
    """A host whose run() is a sh on this machine: the script as ssh would give it to one."""

    def __init__(self):
        self.scripts: list[str] = []

    def run(self, script: str, timeout: float = 30) -> subprocess.CompletedProcess:
        self.scripts.append(script)
        return subprocess.run(["sh", "-s"], input=script, capture_output=True, text=True, timeout=timeout)


def write_stat(proc: Path, pid: int, comm: str, ppid: int, utime: int, stime: int, cutime: int, cstime: int) -> None:
    """A /proc/PID/stat as the kernel writes it (fields 3-17 and a few after), replaced at once."""
    d = proc / str(pid)
    d.mkdir(exist_ok=True)
    tmp = d / "stat.new"
    tmp.write_text(f"{pid} ({comm}) S {ppid} {ppid} {ppid} 0 -1 4194304 120 0 0 0 "
                   f"{utime} {stime} {cutime} {cstime} 20 0 1 0 4242 10000000 300\n")
    os.replace(tmp, d / "stat")


@pytest.fixture
def proc(tmp_path) -> Path:
    """A parent whose comm holds spaces, parentheses and a newline; children of every kind."""
    root = tmp_path / "proc"
    root.mkdir()
    write_stat(root, PARENT, "post) (ma\nster ", 1, 100, 20, 3000, 400)
    write_stat(root, 4001, "child (a) b", PARENT, 7, 2, 1, 0)     # a live child
    write_stat(root, 4002, ")", PARENT, 50, 5, 0, 0)              # left out (our own backend)
    write_stat(root, 4004, "other", 1, 900, 900, 0, 0)            # listed, but its pid was reused
    write_stat(root, 77, "unrelated", 1, 11, 11, 0, 0)
    (root / "self").mkdir()                                       # not a pid: the scan skips it
    children = root / str(PARENT) / "task" / str(PARENT)
    children.mkdir(parents=True)
    (children / "children").write_text("4001 4002 4003 4004 ")    # 4003 exited meanwhile: no stat
    return root


def read(proc: Path, exclude=(4002,), wait_gone=None, pid=PARENT) -> str:
    res = ShellHere().run(reading_script(pid, exclude, wait_gone, proc=str(proc)))
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return res.stdout


def test_the_group_adds_up_the_parent_and_its_live_children(proc):
    # parent 100+3000 user, 20+400 system; 4001 7+1, 2+0; 4002 left out; 4003 gone; 4004 not a child
    assert parse_reading(read(proc), PARENT) == (3108, 422)
    assert parse_reading(read(proc, exclude=()), PARENT) == (3158, 427)


def test_without_the_kernels_children_list_every_process_is_scanned(proc):
    (proc / str(PARENT) / "task" / str(PARENT) / "children").unlink()
    assert parse_reading(read(proc), PARENT) == (3108, 422)


def test_a_process_that_is_gone_raises_process_lookup_error(proc):
    assert read(proc, pid=4003).split() == ["gone"]
    with pytest.raises(ProcessLookupError, match="process 4003 not visible"):
        parse_reading(read(proc, pid=4003), 4003)


def test_the_reading_waits_for_our_backend_to_be_reaped(proc, monkeypatch):
    """Reaped, a backend's CPU moves into the parent's cutime: a reading made before that would
    count it after. The reading starts only once the backend's entry is gone."""
    monkeypatch.setattr(host_cpu, "WAIT_POLLS", 1_000_000)   # no way out but the reaping
    ours = proc / "4005"
    write_stat(proc, 4005, "ours", PARENT, 30, 10, 0, 0)
    started = threading.Event()

    def reap():
        started.wait()
        write_stat(proc, PARENT, "post) (ma\nster ", 1, 100, 20, 3030, 410)
        (ours / "stat").unlink()
        ours.rmdir()
    reaper = threading.Thread(target=reap)
    reaper.start()
    script = reading_script(PARENT, (4002,), 4005, proc=str(proc))
    child = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child.stdin.write(script)
    child.stdin.close()
    started.set()
    out = child.stdout.read()
    child.wait(timeout=30)
    reaper.join()
    assert parse_reading(out, PARENT) == (3138, 432)


@pytest.mark.parametrize("out", ["", "ticks 1\n", "ticks a 2\n", "ticks -1 2\n", "sh: awk: not found\n",
                                 "ticks 1 2\nticks 3 4\n"])
def test_output_that_is_not_a_reading_is_refused(out):
    with pytest.raises(ValueError, match="unexpected CPU reading"):
        parse_reading(out, PARENT)


def test_a_reading_parses_its_two_numbers():
    assert parse_reading("ticks 6941940 1455258\n", 1) == (6941940, 1455258)


def test_a_failed_reading_names_what_the_host_said():
    class Refusing:
        def run(self, script, timeout=30):
            return subprocess.CompletedProcess(["ssh"], 255, "", "ssh: connect to host 10.0.0.2: No route to host\n")
    with pytest.raises(RuntimeError, match="reading CPU on the host failed: ssh: connect .* No route to host"):
        host_cpu.group_ticks(Refusing(), PARENT)


def test_clk_tck_is_read_once_per_connection():
    first, second = ShellHere(), ShellHere()
    assert clk_tck(first) == clk_tck(first) == os.sysconf("SC_CLK_TCK")
    assert clk_tck(second) == os.sysconf("SC_CLK_TCK")
    assert (len(first.scripts), len(second.scripts)) == (1, 1)
