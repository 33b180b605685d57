"""A SIGTERM that lands in one of logging's at-fork hooks (they run around every spawn with a
preexec_fn) would be printed as 'Exception ignored in ... Traceback' and dropped: the run's
handler sends it again once the hook is over, where it raises Interrupted as usual. One that lands
as a measured program or a client starts stops it with the run."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from pgpathbench import procs, stop_signals
from pgpathbench.errors import Interrupted
from pgpathbench.procs import pid_alive
from pgpathbench.tools import spawn


def frame_of(function):
    """A live frame of `function` (as the signal handler would see it), caught with a tracer."""
    frames = []

    def tracer(frame, event, arg):
        if event == "call" and frame.f_code is function.__code__:
            frames.append(frame)
    sys.settrace(tracer)
    try:
        logging._acquireLock()
        logging._releaseLock()
    finally:
        sys.settrace(None)
    return frames[0]


@pytest.mark.skipif(not hasattr(logging, "_releaseLock"), reason="this Python's logging has other fork hooks")
def test_a_signal_in_a_fork_hook_is_delivered_again_outside_it():
    with stop_signals.signals_interrupt():
        handler = signal.getsignal(signal.SIGTERM)
        handler(signal.SIGTERM, frame_of(logging._releaseLock))   # deferred: nothing raised here
        with pytest.raises(Interrupted) as caught:
            time.sleep(5)                                          # the signal again, in ordinary code
    assert caught.value.signum == signal.SIGTERM


def test_a_signal_elsewhere_raises_at_once():
    with stop_signals.signals_interrupt():
        handler = signal.getsignal(signal.SIGTERM)
        with pytest.raises(Interrupted):
            handler(signal.SIGTERM, sys._getframe())


@pytest.fixture
def signal_as_popen_returns(monkeypatch):
    """Every Popen made meanwhile sends us SIGTERM as it returns (the fork and exec done, the child
    not yet ours to kill), with another thread alive, as in a run (the watchdog's, a sampler's),
    which the kernel may give the signal to (all of it, were the main thread's mask to block it).
    Yields the Popen objects made."""
    started, done = [], threading.Event()
    bystander = threading.Thread(target=done.wait)

    class SignalOnStart(subprocess.Popen):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            started.append(self)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)   # taken by the other thread meanwhile,
            handled_here()     # its handler run (at a call of a Python function) before Popen returns
    monkeypatch.setattr(subprocess, "Popen", SignalOnStart)
    bystander.start()
    try:
        yield started
    finally:
        done.set()
        bystander.join()
        for proc in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def handled_here() -> None:
    """A call of a Python function: where the main thread runs a pending signal's handler."""


def test_a_signal_as_a_measured_program_starts_is_held_until_the_program_is_killed_with_the_run(
        signal_as_popen_returns):
    """Before, Interrupted was raised there, outside the part that kills the program on the way out,
    and the program ran on through the run's clean-up (a pgbench on a database being dropped)."""
    with stop_signals.signals_interrupt(), pytest.raises(Interrupted):
        spawn.spawn_measured(["sleep", "30"], timeout=60)
    session = signal_as_popen_returns[0].pid
    deadline = time.monotonic() + 5
    while (left := _running_in_session(session)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"left running in the program's session: {left}"


def test_a_signal_as_a_client_starts_is_held_until_the_client_is_killed_with_the_run(signal_as_popen_returns):
    """run_client (pgbench's initialisation, psql): the same window."""
    with stop_signals.signals_interrupt(), pytest.raises(Interrupted):
        procs.run_client(["sleep", "30"], timeout=60)
    assert signal_as_popen_returns[0].returncode == -signal.SIGKILL, "the client was killed and reaped"


def _running_in_session(sid: int) -> list[int]:
    """The processes of that session, zombies (killed, not yet reaped by their new parent) apart."""
    found = []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        with contextlib.suppress(OSError):   # gone meanwhile
            if os.getsid(pid) == sid and pid_alive(pid):
                found.append(pid)
    return found
