"""The wait-event sampler stopped before it started (evidence/waits.py): what collected() does when a
signal (Ctrl-C, SIGTERM) lands while it starts the servers' samplers one after the other."""

from __future__ import annotations

from pgpathbench.evidence.waits import Sampler


def _never_called():
    raise AssertionError("a sampler never started never connects")


def test_a_sampler_never_started_stops_at_once_with_no_session():
    sampler = Sampler("source", _never_called, ["postgres"], 0.1)
    assert sampler.stop() is None   # was: RuntimeError (cannot join thread before it is started)
    assert sampler.error is None and sampler.samples == 0
