"""How a run stops on SIGINT/SIGTERM: Interrupted, raised once, in the main thread, where the run
can clean up; never where it would be lost or leave a child behind.

Two places must not see it raised: code that prints and drops exceptions (logging's at-fork hooks,
around every spawn with a preexec_fn), where the signal is sent again a moment later; and a child's
start (`held`), from the fork until the child is the caller's to kill, where it is put off and
raised at the release. Put off in Python, not by the thread's signal mask: the kernel gives a
signal the main thread blocks to another thread (a watchdog's, a sampler's), and Python runs the
handler in the main thread all the same.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from typing import Callable, Iterator

from .errors import Interrupted

_pending: list[int] = []    # the signal whose Interrupted was raised (and may have been swallowed)
_held: list[bool] = []      # one entry per `held` block open now
_deferred: list[int] = []   # the signal that came while one was open

# Code where an exception is printed ("Exception ignored in ...") and dropped instead of raised:
# the at-fork hooks logging registers, which run around every spawn with a preexec_fn.
_IGNORING_CODE = frozenset(getattr(logging, name).__code__ for name in (
    "_acquireLock", "_releaseLock", "_after_at_fork_child_reinit_locks", "_prepareFork", "_afterFork")
    if hasattr(logging, name))
REDELIVER_S = 0.05


def pending_signal() -> int | None:
    """The signal that interrupted the run, if one did."""
    return _pending[0] if _pending else None


def check_interrupted() -> None:
    """Raise the interrupt again if its exception was lost (a signal that lands in code that
    ignores exceptions, such as an at-fork hook, must still stop the run)."""
    if _pending:
        raise Interrupted(_pending[0])


@contextlib.contextmanager
def signals_interrupt():
    """SIGINT/SIGTERM raise Interrupted once; later ones are ignored while we clean up."""
    def handler(signum, frame):
        if _held:   # a child is starting: raised once it is the caller's to kill
            _deferred[:] = _deferred or [signum]
            return
        if _in_ignoring_code(frame):
            threading.Timer(REDELIVER_S, os.kill, (os.getpid(), signum)).start()
            return
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _pending.append(signum)
        raise Interrupted(signum)

    _pending.clear()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def held() -> Iterator[Callable[[], None]]:
    """The run's stop signal put off until the block ends or the caller lets it through with the
    function it yields, once a child it started is its to kill: one raised between the fork and
    that point left the child running through the run's clean-up (a pgbench on a database being
    dropped)."""
    _held.append(True)
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            _held.pop()
            if _deferred and not _held:
                signal.raise_signal(_deferred.pop())   # its handler runs here, in this thread
    try:
        yield release
    finally:
        release()


def _in_ignoring_code(frame) -> bool:
    while frame is not None:
        if frame.f_code in _IGNORING_CODE:
            return True
        frame = frame.f_back
    return False
