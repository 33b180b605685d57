"""Wait-event sampling of one server's client backends, in a daemon thread of its own.

The thread holds its own connection (a session of the sampled server, in the maintenance
database), so it never shares a connection with the measurement or with the snapshots.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Callable, Sequence

import psycopg

from ..errors import reason
from .snapshots import MARK

READY_TIMEOUT_S = 5.0   # how long start() waits for the sampler's connection
STOP_TIMEOUT_S = 2.0    # a sample in flight is cancelled when stopping takes longer

QUERY = (MARK + "SELECT state, wait_event_type FROM pg_stat_activity "
         "WHERE backend_type = 'client backend' AND datname = ANY(%s) AND pid <> ALL(%s)")


def classify(state: str | None, wait_event_type: str | None) -> str:
    """'CPU' for a backend running and not waiting, else what it waits for ('Client' when idle)."""
    if wait_event_type is None:
        return "CPU" if state == "active" else "Unknown"
    return wait_event_type


class Sampler:
    """Counts, every interval_s, what each client backend connected to `databases` is doing."""

    def __init__(self, role: str, connect: Callable[[], psycopg.Connection], databases: Sequence[str],
                 interval_s: float, own_cpu: Callable[[int], tuple[int, int] | None] | None = None):
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self.query_s = 0.0                # time spent in the sampling queries, for the cost
        self.error: str | None = None
        self.pid: int | None = None       # the sampler's own backend
        self.own_ticks: tuple[int, int] | None = None  # that backend's CPU when it stopped
        self._connect, self._databases, self._interval = connect, list(databases), interval_s
        self._exclude: list[int] = []
        self._own_cpu = own_cpu
        self._conn: psycopg.Connection | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._go = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"evidence-waits-{role}", daemon=True)

    def start(self) -> None:
        """The thread started: it connects, and samples once begin() is called."""
        self._thread.start()

    def session(self) -> psycopg.Connection | None:
        """The sampler's session once connected, free until begin() (the before-snapshot reads in
        it); None if it could not connect (error says why)."""
        connected = self._ready.wait(READY_TIMEOUT_S) and self.error is None and self.pid is not None
        return self._conn if connected else None

    def begin(self, exclude_pids: Sequence[int] = ()) -> None:
        """Sample from now (the start of the measurement), leaving out these backends too."""
        self._exclude = list(exclude_pids)
        self._ready.wait(READY_TIMEOUT_S)
        self._go.set()

    def _run(self) -> None:
        try:
            self._conn = conn = self._connect()
            self.pid = conn.info.backend_pid
            self._ready.set()
            self._go.wait()
            try:
                self._loop(conn)
            except BaseException:
                self.own_ticks = self._backend_ticks()
                conn.close()
                raise
        except Exception as e:  # evidence never fails the measurement
            self.error = reason(e)
        finally:
            self._ready.set()

    def _loop(self, conn: psycopg.Connection) -> None:
        params = (self._databases, self._exclude + [self.pid])
        while not self._stop.is_set():
            started = time.monotonic()
            rows = conn.execute(QUERY, params).fetchall()
            spent = time.monotonic() - started
            self.query_s += spent
            self.samples += 1
            self.counts.update(classify(state, wait) for state, wait in rows)
            # Event.wait: stop() wakes us at once instead of after a whole interval.
            self._stop.wait(max(0.0, self._interval - spent))

    def _backend_ticks(self) -> tuple[int, int] | None:
        """The sampler's own backend's CPU (own_cpu reads a pid's user and system ticks where the
        server runs) when its session ends here, so the server's CPU delta can leave it out."""
        return self._own_cpu(self.pid) if self._own_cpu and self.pid else None

    def stop(self) -> psycopg.Connection | None:
        """Stop sampling. Returns the sampler's session, still open, for the after-snapshot (its
        backend, live at both snapshots, is left out of both CPU readings), or None when it ended
        (error says why; own_ticks has its CPU)."""
        self._stop.set()
        self._go.set()
        if self._thread.ident is None:   # never started: a signal while collected() started the samplers
            return None
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive() and self._conn is not None:
            try:
                # a sample stuck on a slow server; bounded: a server whose network is lost never answers
                self._conn.cancel_safe(timeout=STOP_TIMEOUT_S)
            except Exception:
                pass
            self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive():
            self.error = self.error or f"sampler did not stop within {2 * STOP_TIMEOUT_S:.0f} s"
            return None
        return self._conn if self.error is None and self._conn is not None and not self._conn.closed else None

    def result(self) -> dict:
        """{"samples": N, "interval_ms": I, "shares": {TYPE: fraction}}: N counts the reads of
        pg_stat_activity, one every I ms."""
        seen = sum(self.counts.values())
        shares = {k: v / seen for k, v in self.counts.most_common()} if seen else {}
        return {"samples": self.samples, "interval_ms": round(self._interval * 1000), "shares": shares}
