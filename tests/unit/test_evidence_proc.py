"""The /proc CPU reader on this very process: a child's CPU counts while it lives, and stays
counted (in our cutime) once we reaped it."""

import os
import subprocess
import sys
import time

import pytest

from pgpathbench.evidence.proc_cpu import CLK_TCK, children, group_ticks, read_stat, ticks_to_ms

BUSY = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def busy_child(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUSY.format(s=seconds)])


def test_reaped_child_moves_into_cutime():
    me = os.getpid()
    before_stat = read_stat(me)
    before = group_ticks(me)
    child = busy_child(0.3)
    child.wait()  # reaped: its CPU is now in our cutime
    after_stat = read_stat(me)
    after = group_ticks(me)
    grown = after_stat.cutime + after_stat.cstime - before_stat.cutime - before_stat.cstime
    assert grown >= 0.25 * CLK_TCK, grown
    assert sum(after) - sum(before) >= 0.25 * CLK_TCK


def test_live_child_counts_and_can_be_left_out():
    me = os.getpid()
    child = busy_child(0.8)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            st = read_stat(child.pid)
            if st and st.utime + st.stime >= 0.3 * CLK_TCK:
                break
            time.sleep(0.02)
        assert child.pid in dict(children(me))
        with_child = sum(group_ticks(me))
        without = sum(group_ticks(me, exclude=[child.pid]))
        # the two reads are not at once: our own ticks (and the child's) move between them
        assert with_child - without >= 0.2 * CLK_TCK
    finally:
        child.wait()


def test_sleeping_child_costs_nothing_and_gone_process_is_tolerated():
    child = subprocess.Popen(["sleep", "0.05"])
    pid = child.pid
    child.wait()
    assert read_stat(pid) is None          # exited and reaped: no /proc entry, no exception
    with pytest.raises(ProcessLookupError, match="not visible"):
        group_ticks(pid)


def test_ticks_to_ms():
    assert ticks_to_ms(CLK_TCK) == 1000.0


def test_children_listed_by_the_kernel_include_the_unreaped(monkeypatch):
    me = os.getpid()
    exited = subprocess.Popen(["true"])
    live = subprocess.Popen(["sleep", "5"])
    try:
        deadline = time.monotonic() + 20
        while read_stat(exited.pid) is None or open(f"/proc/{exited.pid}/stat").read().split(") ")[1][0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        listed = dict(children(me))
        assert {exited.pid, live.pid} <= set(listed)   # a zombie's CPU is not in our cutime yet: it counts
        real_open = open

        def no_children_file(path, *args, **kw):   # a kernel without CONFIG_PROC_CHILDREN: every stat read
            if str(path).endswith("/children"):
                raise FileNotFoundError(path)
            return real_open(path, *args, **kw)
        monkeypatch.setattr("builtins.open", no_children_file)
        assert {exited.pid, live.pid} <= set(dict(children(me)))
    finally:
        live.kill()
        live.wait()
        exited.wait()
