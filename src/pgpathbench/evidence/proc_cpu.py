"""CPU time of a server's whole process group, read from /proc.

A backend's CPU moves from its own /proc entry into the postmaster's cutime/cstime when the
postmaster reaps it, so the group total is: the postmaster's utime+stime+cutime+cstime plus every
live child's utime+stime+cutime+cstime. Deltas of that total stay right while backends come and
go. Resolution is one clock tick (usually 10 ms).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

CLK_TCK = os.sysconf("SC_CLK_TCK")
_RETRIES = 5


@dataclass(frozen=True)
class Stat:
    """The /proc/PID/stat fields we use, in clock ticks."""
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int


def read_stat(pid: int) -> Stat | None:
    """A process's stat, or None when it is gone (it may exit between listing and reading)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm (field 2) may hold spaces and parentheses: split after its last ')'.
    rest = text[text.rindex(")") + 2:].split()
    # rest[0] is field 3 (state); ppid is field 4, utime..cstime fields 14..17.
    return Stat(int(rest[1]), int(rest[11]), int(rest[12]), int(rest[13]), int(rest[14]))


def children(ppid: int) -> list[tuple[int, Stat]]:
    """Live (or not yet reaped) processes whose parent is ppid: those the kernel lists as its children
    (/proc/PID/task/PID/children: a server's own, where a scan of every process's stat costs 10 ms a
    read on a busy machine), else any process whose stat names it."""
    try:
        with open(f"/proc/{ppid}/task/{ppid}/children") as f:
            pids = [int(p) for p in f.read().split()]
    except OSError:   # a kernel without CONFIG_PROC_CHILDREN
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    found = []
    for pid in pids:
        stat = read_stat(pid)
        if stat is not None and stat.ppid == ppid:
            found.append((pid, stat))
    return found


def group_ticks(pid: int, exclude: Iterable[int] = ()) -> tuple[int, int]:
    """(user, system) ticks of pid and its children, leaving out the live children in exclude.

    A child reaped while we list the others would move its time into the parent's cutime after
    we read it (counted twice) or before (lost); so the parent is read before and after the
    listing, and the whole is read again when its cutime/cstime changed meanwhile.
    Raises ProcessLookupError when pid is not visible in /proc.
    """
    skip = set(exclude)
    for _ in range(_RETRIES):
        first = read_stat(pid)
        if first is None:
            raise ProcessLookupError(f"process {pid} not visible in /proc")
        user = first.utime + first.cutime
        system = first.stime + first.cstime
        for child_pid, st in children(pid):
            if child_pid not in skip:
                user += st.utime + st.cutime
                system += st.stime + st.cstime
        last = read_stat(pid)
        if last is not None and (last.cutime, last.cstime) == (first.cutime, first.cstime):
            break
    return user, system


def backend_ticks(pid: int) -> tuple[int, int] | None:
    """One backend's own (user, system) ticks, or None when it is gone."""
    stat = read_stat(pid)
    return (stat.utime, stat.stime) if stat else None


def ticks_to_ms(ticks: int, per_second: int = CLK_TCK) -> float:
    """Ticks in ms: ours by default, a host's CLK_TCK for ticks read there."""
    return ticks * 1000.0 / per_second
