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
import time

import pytest

from pgpathbench import runner
from pgpathbench.errors import Interrupted
from pgpathbench import procs
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
    with runner.signals_interrupt():
        handler = signal.getsignal(signal.SIGTERM)
        handler(signal.SIGTERM, frame_of(logging._releaseLock))   # deferred: nothing raised here
        with pytest.raises(Interrupted) as caught:
            time.sleep(5)                                          # the signal again, in ordinary code
    assert caught.value.signum == signal.SIGTERM


def test_a_signal_elsewhere_raises_at_once():
    with runner.signals_interrupt():
        handler = signal.getsignal(signal.SIGTERM)
        with pytest.raises(Interrupted):
            handler(signal.SIGTERM, sys._getframe())


def test_a_signal_as_a_measured_program_starts_is_held_until_the_program_is_killed_with_the_run(monkeypatch):
    """SIGTERM sent right after the fork (here, as the program is registered for abort_running):
    before, Interrupted was raised there, outside the part that kills the program on the way out,
    and the program ran on through the run's clean-up (a pgbench on a database being dropped)."""
    started, mask = [], signal.pthread_sigmask(signal.SIG_BLOCK, set())

    class SignalOnRegistration(dict):
        def __setitem__(self, pid, kill):
            started.append(pid)
            os.kill(os.getpid(), signal.SIGTERM)
            super().__setitem__(pid, kill)
    monkeypatch.setattr(spawn, "_running", SignalOnRegistration())
    try:
        with runner.signals_interrupt(), pytest.raises(Interrupted):
            spawn.spawn_measured(["sleep", "30"], timeout=60)
        deadline = time.monotonic() + 5
        while (left := _running_in_session(started[0])) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"left running in the program's session: {left}"
    finally:
        if started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(started[0], signal.SIGKILL)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask, "the signal mask is as it was"


def test_a_signal_as_a_client_starts_is_held_until_the_client_is_killed_with_the_run(monkeypatch):
    """SIGTERM sent as Popen returns a client (run_client: pgbench's initialisation, psql): before,
    Interrupted was raised there, outside the part that kills the client on the way out."""
    started, mask = [], signal.pthread_sigmask(signal.SIG_BLOCK, set())

    class SignalOnStart(subprocess.Popen):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            started.append(self.pid)
            os.kill(os.getpid(), signal.SIGTERM)
    monkeypatch.setattr(procs.subprocess, "Popen", SignalOnStart)
    try:
        with runner.signals_interrupt(), pytest.raises(Interrupted):
            procs.run_client(["sleep", "30"], timeout=60)
        assert not pid_alive(started[0]), "the client was killed and reaped"
    finally:
        if started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(started[0], signal.SIGKILL)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask, "the signal mask is as it was"


def _running_in_session(sid: int) -> list[int]:
    """The processes of that session, zombies (killed, not yet reaped by their new parent) apart."""
    found = []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        with contextlib.suppress(OSError):   # gone meanwhile
            if os.getsid(pid) == sid and pid_alive(pid):
                found.append(pid)
    return found
