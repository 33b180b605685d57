"""Loading the TPC-H files with COPY, on every core.

Every line ends with '|', which COPY would read as one column too many. The files are streamed
to COPY FROM STDIN with that final '|' cut (a byte replace of '|\\n' per 1 MB block, never inside
a line: blocks are cut at the last newline). Large files are split at line boundaries into
slices loaded concurrently, so that every core works (a single COPY is bound to one core:
bench/tpch_load.py measures both). The same pool runs the ANALYZE statements after the load.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import psycopg

from .files import MB

BLOCK = 1 << 20


def split_points(path: Path, pieces: int) -> list[tuple[int, int]]:
    """[start, end) byte ranges of `pieces` slices of a file, each cut just after a newline."""
    size = path.stat().st_size
    points = [0]
    with open(path, "rb") as f:
        for i in range(1, pieces):
            f.seek(max(points[-1], size * i // pieces))
            f.readline()
            pos = f.tell()
            if pos < size and pos > points[-1]:
                points.append(pos)
    points.append(size)
    return [(a, b) for a, b in zip(points, points[1:]) if b > a]


def _connect(conninfo: str, password: str | None) -> psycopg.Connection:
    """password: a user server's, held in memory (never in a conninfo we show or store).

    Every load and ANALYZE session commits synchronously. The VACUUM after the load marks a page
    all-visible only once its rows' commit hint is set, and PostgreSQL sets it only once the WAL up
    to the commit LSN clog keeps for a group of 32 transactions is flushed: that LSN is the group's
    latest asynchronous commit's. With a server set to synchronous_commit = off (file-fdw-tpch's),
    an ANALYZE committed just before, in the same group as the last COPYs, left their pages
    unmarked until the WAL writer's next flush, and so did an asynchronous COPY of its own."""
    conn = psycopg.connect(conninfo, autocommit=True, **({"password": password} if password is not None else {}))
    conn.execute("SET synchronous_commit = on")
    return conn


def copy_slice(conninfo: str, table: str, path: Path, start: int, end: int, password: str | None = None) -> int:
    """COPY one slice of a .tbl file into `table`, without each line's final '|'. Returns bytes."""
    with _connect(conninfo, password) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY {table} FROM STDIN (FORMAT text, DELIMITER '|')") as cp, open(path, "rb") as f:
            f.seek(start)
            left, tail = end - start, b""
            while left > 0:
                block = f.read(min(BLOCK, left))
                if not block:
                    raise RuntimeError(f"{path}: ends before byte {end}")
                left -= len(block)
                data = tail + block
                cut = data.rfind(b"\n") + 1
                tail = data[cut:]
                if cut:
                    cp.write(data[:cut].replace(b"|\n", b"\n"))
            if tail:
                raise RuntimeError(f"{path}: slice [{start}, {end}) does not end with a newline")
    return end - start


# --- tasks on a pool of connections ---------------------------------------------------------------
@dataclass
class Task:
    """One unit of load work: a slice COPY'd into a table, or statements (VACUUM, ANALYZE) run one
    after the other on one connection, each its own transaction."""
    group: str                    # what it counts towards: "load single", "analyze foreign partitioned"...
    conninfo: str
    table: str = ""
    path: Path | None = None
    start: int = 0
    end: int = 0
    sql: str | tuple[str, ...] = ""
    weight: float = 0.0           # bytes of work, for longest-first ordering
    password: str | None = field(default=None, repr=False)

    @property
    def bytes(self) -> int:
        return self.end - self.start if self.path is not None else 0

    def run(self) -> None:
        if self.path is not None:
            copy_slice(self.conninfo, self.table, self.path, self.start, self.end, self.password)
        else:
            with _connect(self.conninfo, self.password) as conn:
                for statement in (self.sql,) if isinstance(self.sql, str) else self.sql:
                    conn.execute(statement)


def copy_tasks(group: str, conninfo: str, table: str, path: Path, slice_bytes: int,
               password: str | None = None) -> list[Task]:
    size = path.stat().st_size
    pieces = max(1, math.ceil(size / slice_bytes)) if slice_bytes > 0 else 1
    return [Task(group, conninfo, table=table, path=path, start=a, end=b, weight=b - a, password=password)
            for a, b in split_points(path, pieces)]


@dataclass
class PhaseResult:
    wall_s: float
    groups: dict[str, dict] = field(default_factory=dict)   # group -> {busy_s, bytes, tasks}


def run_tasks(tasks: Iterable[Task], workers: int) -> PhaseResult:
    """Longest first on `workers` connections; the first failure stops the phase and is raised."""
    todo = sorted(tasks, key=lambda t: -t.weight)
    groups: dict[str, dict] = {}
    lock = threading.Lock()

    def one(task: Task) -> None:
        t0 = time.monotonic()
        task.run()
        dt = time.monotonic() - t0
        with lock:
            g = groups.setdefault(task.group, {"busy_s": 0.0, "bytes": 0, "tasks": 0, "first": t0, "last": t0 + dt})
            g["busy_s"] += dt
            g["bytes"] += task.bytes
            g["tasks"] += 1
            g["first"], g["last"] = min(g["first"], t0), max(g["last"], t0 + dt)

    t0 = time.monotonic()
    ex = ThreadPoolExecutor(max(1, workers), thread_name_prefix="tpch-load")
    try:
        for fut in [ex.submit(one, t) for t in todo]:
            fut.result()
    except BaseException:
        # A failure or an interrupt: nothing more starts; what runs ends with its connection
        # when the servers stop.
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    wall = time.monotonic() - t0
    out = {}
    for name, g in groups.items():
        span = g["last"] - g["first"]
        out[name] = {"busy_s": round(g["busy_s"], 3), "span_s": round(span, 3), "bytes": g["bytes"],
                     "tasks": g["tasks"]}
        if g["bytes"]:
            out[name]["mb_per_s"] = round(g["bytes"] / MB / max(span, 1e-9), 1)
    return PhaseResult(round(wall, 3), out)


