"""at_once: jobs in threads of their own, results in the items' order, the first failure raised
once every job has ended."""

from __future__ import annotations

import threading
import time

import pytest

from pgpathbench.at_once import at_once


def test_results_keep_the_items_order_and_the_jobs_overlap():
    together = threading.Barrier(3, timeout=10)   # passed only when all three run at once

    def job(n: int) -> int:
        together.wait()
        time.sleep(0.1 if n == 1 else 0)   # the first ends last
        return n * 10

    assert at_once(job, [1, 2, 3]) == [10, 20, 30]


def test_one_item_runs_in_the_calling_thread():
    assert at_once(lambda _: threading.current_thread(), ["only"]) == [threading.current_thread()]
    assert at_once(lambda _: 1, []) == []


def test_the_first_failure_in_order_raises_after_every_job_ended():
    ended = []

    def job(n: int) -> int:
        time.sleep(0.1 * (3 - n))
        ended.append(n)
        if n in (1, 2):
            raise ValueError(f"job {n}")
        return n

    with pytest.raises(ValueError, match="job 1"):
        at_once(job, [1, 2, 3])
    assert sorted(ended) == [1, 2, 3]
