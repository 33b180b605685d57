"""What the servers did during one measurement: snapshots before and after, wait events between.

The measurement must never fail because of evidence: every section is read on its own, and a
section that cannot be read (extension absent, view missing in this major, permission denied,
process not visible) lands in data["missing"] with a one-line reason.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import psycopg

from ..at_once import at_once
from ..errors import reason
from . import host_cpu
from .proc_cpu import CLK_TCK, backend_ticks, group_ticks, read_stat, ticks_to_ms
from .snapshots import MARK, READERS, STATEMENTS_LIMIT, counter_deltas, read_settings, server_version_num, \
    statement_deltas, statement_totals
from .waits import Sampler

SETTLE_TIMEOUT_S = 2.0     # how long the case's backends get to exit (and report their stats)
SETTLE_POLL_S = 0.005
EXIT_TIMEOUT_S = 0.5       # how long our before-snapshot backend gets to exit
STATEMENT_TIMEOUT = "5s"   # a hung server must not hang the measurement
# Wait-event samples: 5 a second on each server. A sample costs a path through postgres_fdw about
# 0.5 ms of its time (at 50 a second on each server its TPS fell 5.4%, bench/evidence_overhead.py):
# the path's three processes wait on one another, and the sampler's thread and backend delay them.
# 5 a second keeps that near 0.5%; at 2 a second a 1 s measurement sometimes caught no backend.
SAMPLE_INTERVAL_S = 0.2


@dataclass(frozen=True)
class Watched:
    role: str                                   # "source", "external", ...
    connect: Callable[[], psycopg.Connection]   # a new autocommit connection to a maintenance database
    postmaster_pid: int | None                  # None: the host's processes are not visible
    databases: tuple[str, ...]                  # the databases whose activity the case causes
    settings: tuple[str, ...] = ()              # server settings read with the after-snapshot (--set's)
    skip: tuple[str, ...] = ()                  # sections not read: the study counts them otherwise
    host: host_cpu.Host | None = None           # the SSH connection of the host it runs on; None: here


@dataclass
class Evidence:
    """data: the JSON-able record (filled when collected() ends); timings: per role, what the
    evidence itself cost and how long the case's backends took to exit (not part of data)."""
    data: dict = field(default_factory=lambda: {"servers": {}, "missing": {}})
    timings: dict = field(default_factory=dict)


@dataclass
class _Snapshot:
    version: int | None = None
    sections: dict = field(default_factory=dict)
    cpu: tuple[int, int] | None = None
    cpu_read: tuple[float, float] | None = None   # monotonic clock when reading cpu began and ended
    clk_tck: int = CLK_TCK            # the ticks' unit: the host's when read there
    pid: int | None = None            # our backend for this snapshot
    settle_ms: float | None = None
    settled: bool | None = None
    taken_at: object = None           # the server's clock at the snapshot
    settings: dict | None = None      # Watched.settings as a new session sees them


def _open(w: Watched, conn: psycopg.Connection | None = None) -> psycopg.Connection:
    """A new session (or `conn`, the sampler's) with our statement timeout."""
    conn = conn or w.connect()
    try:
        conn.execute(f"{MARK}SET statement_timeout = '{STATEMENT_TIMEOUT}'")
    except Exception:
        pass
    return conn


def _settle(conn: psycopg.Connection, databases: Sequence[str], ours: list[int], since, deadline: float) \
        -> tuple[float, bool]:
    """Wait until no client backend the case opened (since the before-snapshot) is connected to
    `databases`: backends report their statistics when they exit. Sessions older than the case (a
    study's kept connection) are not waited for. Returns (ms waited, whether they all left)."""
    started = time.monotonic()
    while True:
        n = conn.execute(MARK + "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                         "AND datname = ANY(%s) AND pid <> ALL(%s) AND backend_start >= %s",
                         (list(databases), ours, since)).fetchone()[0]
        if n == 0 or time.monotonic() >= deadline:
            return (time.monotonic() - started) * 1000, n == 0
        time.sleep(SETTLE_POLL_S)


def _read_sections(conn: psycopg.Connection, w: Watched, snap: _Snapshot, missing: dict, before: bool) -> None:
    try:
        snap.version = server_version_num(conn)
    except Exception as e:
        for section in READERS:
            missing.setdefault(f"{w.role}.{section}", reason(e))
        return
    for section, read in READERS.items():
        if f"{w.role}.{section}" in missing or section in w.skip:
            continue  # lost in the before-snapshot already, or not wanted
        try:
            if section == "statements":
                snap.sections[section] = read(conn, snap.version, w.databases, with_text=not before)
            else:
                snap.sections[section] = read(conn, snap.version, w.databases)
        except Exception as e:
            missing.setdefault(f"{w.role}.{section}", reason(e))


def _read_settings(conn: psycopg.Connection, w: Watched, snap: _Snapshot, missing: dict) -> None:
    if not w.settings:
        return
    try:
        snap.settings = read_settings(conn, w.settings)
    except Exception as e:
        missing[f"{w.role}.settings"] = reason(e)


def _wait_exit(pid: int | None) -> None:
    """Let a backend of ours be reaped, so its CPU is in the postmaster's cutime before we read."""
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while pid is not None and read_stat(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.001)


def _read_cpu(w: Watched, snap: _Snapshot, missing: dict, exclude: Sequence[int], gone: int | None = None) -> None:
    """The server's group CPU, here from /proc or on its host over SSH; there, the reading first
    waits for `gone` (our backend) to be reaped, as _wait_exit does here."""
    key = f"{w.role}.cpu_ms"
    if key in missing:
        return
    if w.postmaster_pid is None:
        missing[key] = "host processes not visible"
        return
    try:
        if w.host is not None:
            snap.clk_tck = host_cpu.clk_tck(w.host)   # once per connection: not part of the reading
        started = time.monotonic()
        snap.cpu = group_ticks(w.postmaster_pid, exclude) if w.host is None \
            else host_cpu.group_ticks(w.host, w.postmaster_pid, exclude, gone)
        snap.cpu_read = (started, time.monotonic())
    except Exception as e:
        missing[key] = reason(e)


def _own_cpu(w: Watched) -> Callable[[int], tuple[int, int] | None] | None:
    """How the sampler reads its own backend's CPU before leaving (None: it cannot)."""
    if w.postmaster_pid is None:
        return None
    if w.host is None:
        return backend_ticks
    return lambda pid: host_cpu.backend_ticks(w.host, pid)


def _before(w: Watched, missing: dict, sampler: Sampler) -> _Snapshot:
    """The sections, then the server's CPU, in the sampler's session before it samples: its backend
    is live at both snapshots and left out of both readings. When the sampler could not connect,
    in a session of its own, the CPU read once that backend has gone (its CPU then in the figure,
    as what came before the measurement)."""
    snap = _Snapshot()
    shared = sampler.session()
    try:
        conn = _open(w, shared)
    except Exception as e:
        for section in READERS:
            missing[f"{w.role}.{section}"] = f"cannot connect: {reason(e)}"
        conn = None
    if conn is not None:
        try:
            snap.pid = conn.info.backend_pid
            snap.taken_at = conn.execute(MARK + "SELECT clock_timestamp()").fetchone()[0]
            _read_sections(conn, w, snap, missing, before=True)
        finally:
            if conn is not shared:
                conn.close()
    if shared is not None:
        _read_cpu(w, snap, missing, [snap.pid])
        return snap
    if w.postmaster_pid is not None and w.host is None:
        _wait_exit(snap.pid)
    _read_cpu(w, snap, missing, (), gone=snap.pid)
    return snap


def _after(w: Watched, missing: dict, ours: list[int], since, deadline: float,
           kept: psycopg.Connection | None) -> _Snapshot:
    """The sections and the server's CPU, in the sampler's session when it is `kept` (else a new one),
    read while that backend lives: left out, as it was at the before-snapshot."""
    snap = _Snapshot()
    try:
        conn = kept or _open(w)   # the before-snapshot set the sampler's session's timeout
    except Exception as e:
        for section in READERS:
            missing.setdefault(f"{w.role}.{section}", f"cannot connect: {reason(e)}")
        conn = None
    if conn is not None:
        try:
            snap.pid = conn.info.backend_pid
            try:
                snap.settle_ms, snap.settled = _settle(conn, w.databases, ours + [snap.pid], since, deadline)
            except Exception:
                pass  # the sections below record what is wrong with this connection
            _read_sections(conn, w, snap, missing, before=False)
            _read_settings(conn, w, snap, missing)
            # Read while our backend lives: a live child we can leave out.
            _read_cpu(w, snap, missing, [snap.pid])
        finally:
            conn.close()
    else:
        _read_cpu(w, snap, missing, ())
    return snap


def _server_data(w: Watched, before: _Snapshot, after: _Snapshot, sampler: Sampler) -> dict:
    out: dict = {}
    for section, values in after.sections.items():
        if section not in before.sections:
            continue
        if section == "statements":
            statements = statement_deltas(before.sections[section], values)
            out[section], out["statement_totals"] = statements[:STATEMENTS_LIMIT], statement_totals(statements)
        else:
            out[section] = counter_deltas(before.sections[section], values)
            if section == "io" and (after.version or 0) < 160000:
                out[section]["source"] = "pg_stat_bgwriter"
    if before.cpu is not None and after.cpu is not None:
        # The sampler's backend ran between the snapshots only because of us: left out of both
        # readings when the after-snapshot read in its session, else its CPU read as it ended.
        own = sampler.own_ticks or (0, 0)
        tck = after.clk_tck
        out["cpu_ms"] = {"user": ticks_to_ms(max(0, after.cpu[0] - before.cpu[0] - own[0]), tck),
                         "system": ticks_to_ms(max(0, after.cpu[1] - before.cpu[1] - own[1]), tck)}
        # The wall time those ticks were counted in: wider than the measurement (its connect, the
        # backends' exit), so it, not the duration, bounds cpu_ms at cores x window.
        out["cpu_window_ms"] = (after.cpu_read[1] - before.cpu_read[0]) * 1000
        if w.host is not None:   # over SSH a reading takes a round trip: what each one took
            out["cpu_read_ms"] = {"before": (before.cpu_read[1] - before.cpu_read[0]) * 1000,
                                  "after": (after.cpu_read[1] - after.cpu_read[0]) * 1000}
    if sampler.error is None:
        out["waits"] = sampler.result()
    if after.settings is not None:
        out["settings"] = after.settings
    return out


@contextlib.contextmanager
def collected(watched: Sequence[Watched], sample_interval_s: float = SAMPLE_INTERVAL_S) -> Iterator[Evidence]:
    """A wait-event sampler thread per server, before-snapshots in its session, yield, stop the
    samplers, let the case's backends finish (up to 2 s), after-snapshots in the same session; the
    servers' snapshots are taken at once: each mostly waits (a connection's start, the case's
    backends leaving), and each one's figures are read as alone. evidence.data is filled on exit.

    Nothing here raises because a server cannot tell something; a failure of the body
    propagates after the samplers stopped, with no after-snapshot.
    """
    roles = [w.role for w in watched]
    if len(set(roles)) != len(roles):
        raise ValueError(f"collected(): roles must differ, got {roles}")
    evidence = Evidence()
    missing = evidence.data["missing"]
    samplers = {w.role: Sampler(w.role, w.connect, w.databases, sample_interval_s, own_cpu=_own_cpu(w))
                for w in watched}
    befores = {}
    try:
        for sampler in samplers.values():
            sampler.start()   # the servers' samplers connect at once
        taken = at_once(lambda w: _timed(_before, w, {}, samplers[w.role]), watched)
        for w, (snap, own_missing, ms) in zip(watched, taken):
            missing.update(own_missing)
            befores[w.role] = snap
            evidence.timings[w.role] = {"before_ms": ms}
        for w in watched:
            samplers[w.role].begin([befores[w.role].pid] if befores[w.role].pid else [])
        yield evidence
    except BaseException:
        for sampler in samplers.values():
            if (session := sampler.stop()) is not None:
                session.close()
        raise
    kept = {role: sampler.stop() for role, sampler in samplers.items()}
    _finish(evidence, watched, befores, samplers, kept)


def _finish(evidence: Evidence, watched: Sequence[Watched], befores: dict, samplers: dict, kept: dict) -> None:
    missing = evidence.data["missing"]
    deadline = time.monotonic() + SETTLE_TIMEOUT_S  # backends of all servers exit in parallel

    def after(w: Watched) -> tuple[_Snapshot, dict, float]:
        own_missing = dict(missing)   # what the before-snapshot lost, not asked again
        if samplers[w.role].error is not None:
            own_missing[f"{w.role}.waits"] = samplers[w.role].error
        ours = [p for p in (befores[w.role].pid, samplers[w.role].pid) if p]
        return _timed(_after, w, own_missing, ours, befores[w.role].taken_at, deadline, kept[w.role])

    for w, (snap, own_missing, ms) in zip(watched, at_once(after, watched)):
        for key, why in own_missing.items():
            missing.setdefault(key, why)
        sampler = samplers[w.role]
        evidence.timings[w.role].update(
            after_ms=ms, settle_ms=snap.settle_ms, settled=snap.settled, samples=sampler.samples,
            sample_ms=sampler.query_s * 1000 / sampler.samples if sampler.samples else None)
        evidence.data["servers"][w.role] = _server_data(w, befores[w.role], snap, sampler)


def _timed(snapshot: Callable[..., _Snapshot], w: Watched, missing: dict, *args) -> tuple[_Snapshot, dict, float]:
    """(the snapshot, the reasons it added to `missing`, how long it took in ms)."""
    started = time.monotonic()
    snap = snapshot(w, missing, *args)
    return snap, missing, (time.monotonic() - started) * 1000

