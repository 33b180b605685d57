"""Independent jobs that mostly wait (on servers, disks, other processes), run at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def at_once(job: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """[job(item) for item in items], each in a thread of its own (one alone runs here), the results
    in the items' order; a failure raises, the first in that order, once every job has ended."""
    items = list(items)
    if len(items) < 2:
        return [job(item) for item in items]
    with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="at-once") as pool:
        futures = [pool.submit(job, item) for item in items]
        return [f.result() for f in futures]
