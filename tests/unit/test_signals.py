"""A SIGTERM that lands in one of logging's at-fork hooks (they run around every spawn with a
preexec_fn) would be printed as 'Exception ignored in ... Traceback' and dropped: the run's
handler sends it again once the hook is over, where it raises Interrupted as usual."""

from __future__ import annotations

import logging
import signal
import sys
import time

import pytest

from pgpathbench import runner
from pgpathbench.errors import Interrupted


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
