"""How the orchestrator invokes the native clients (clients/CONTRACT.md) and reads their JSON.

Every client (`pgpb_libpq`, `pgpb_odbc`, `pgpb-jdbc.jar`, `pgpb_psycopg`) takes the same command
line and prints one JSON object. `run_native_client` runs one, as a child that dies with the tool
(procs.py's parent-death signal, its own session), and adds what only the outside sees: the
child's wall time from fork to exit, its CPU time (user, system) and its peak resident set, all
from the kernel's accounting of the client alone (wait4 in pgpb_measure, a small C program that
forks it: forked straight from this Python process, the client's peak RSS would include the
~40 MiB it shares with it until exec), so they count the JVM or the Python interpreter exactly as
they count a C program. Its JSON is validated field by field: a client that prints something
else fails the measurement loudly (CaseError), never silently.

The measured spawn itself (`spawn_measured`) is tools/spawn.py's, shared with every other
program a study measures (psql, pgbench).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..clientenv import child_env
from ..errors import CaseError, UserError
from ..metrics import Metric
from .spawn import MEASURE, spawn_measured

REPO = Path(__file__).resolve().parents[3]
TOOLS = REPO / ".tools" / "clients"

# Keys of the client's JSON, in the contract's order.
KEYS = ("client", "version", "mode", "iterations", "rows", "bytes", "checksum", "connect_s", "exec_s",
        "fetch_s", "total_s", "iteration_us")
ITERATION_KEYS = ("min", "max", "hist")
TIMES = ("connect_s", "exec_s", "fetch_s", "total_s")
MASK64 = (1 << 64) - 1
# Every session of ours reading the seed tables runs without synchronized sequential scans: on a table
# larger than a quarter of shared_buffers, a scan would start where another left off, and the same
# query return its rows in another order (the checksum does not mind; a file of the rows would).
SYNC_SCANS_OFF = "-c synchronize_seqscans=off"
# connect + exec + fetch <= total, each printed with 6 decimals: rounding slack.
ROUNDING_SLACK_S = 4e-6


@dataclass(frozen=True)
class NativeClient:
    """One interface's client: how to run it and which fetch modes it has."""
    name: str                  # the contract's `client` value
    files: tuple[str, ...]     # under .tools/clients, needed to run it
    modes: tuple[str, ...]     # modes without their :N
    unix_socket: bool = True   # pgjdbc has none

    def command(self, jvm_options: Sequence[str] = ()) -> list[str]:
        if self.name == "jdbc":
            return ["java", *jvm_options, "-jar", str(TOOLS / "pgpb-jdbc.jar")]
        return [str(TOOLS / self.files[0])]

    def missing(self) -> list[str]:
        return [f for f in self.files if not (TOOLS / f).is_file()]


CLIENTS: dict[str, NativeClient] = {
    "libpq": NativeClient("libpq", ("pgpb_libpq",), ("normal", "single-row", "copy", "chunked")),
    "odbc": NativeClient("odbc", ("pgpb_odbc", "odbcinst.ini"), ("normal", "cursor")),
    "jdbc": NativeClient("jdbc", ("pgpb-jdbc.jar",), ("normal", "cursor", "copy"), unix_socket=False),
    "psycopg": NativeClient("psycopg", ("pgpb_psycopg", "libpgpb_rowhash.so"), ("normal", "cursor", "copy")),
    # Not an interface: pgpb_libpq built without its checksum loop (its JSON says client "libpq" and the
    # checksum of no rows, 0). interfaces-fidelity runs it to show what the checksum costs.
    "libpq-nochecksum": NativeClient("libpq", ("pgpb_libpq_nochecksum",), ("normal", "single-row", "copy")),
}


def require_clients(names: Sequence[str], option: str = "--interface") -> None:
    """UserError naming what is missing (before anything is written) and how to build it."""
    if not MEASURE.is_file():
        raise UserError(f"{option}: .tools/clients/pgpb_measure is missing; run scripts/build-clients "
                        "(make bootstrap does)")
    for name in names:
        client = CLIENTS[name]
        missing = client.missing()
        if missing:
            raise UserError(f"{option}: the {name} client is not built (.tools/clients/{missing[0]} is missing); "
                            "run scripts/build-clients (make bootstrap does)")
        if name == "jdbc" and not _which("java"):
            raise UserError(f"{option}: the jdbc client needs java on PATH; run scripts/build-clients "
                            "(it installs openjdk-17-jdk-headless)")


# The libpq conninfo keywords the JDBC client maps to pgjdbc: PgpbJdbc.buildUrl() (clients/jdbc/src/main/
# java/pgpathbench/clients/PgpbJdbc.java) takes host, port, user, dbname and its `names` table, and exits 2
# on any other keyword. Change the two together (tests/unit/test_user_jdbc_dsn.py compares them).
JDBC_CONNINFO_KEYWORDS = frozenset({"host", "port", "user", "dbname", "password", "sslmode", "sslrootcert",
                                    "connect_timeout", "application_name", "options"})


def check_jdbc_dsns(roles: Iterable[str], dsns: Mapping[str, object], option: str) -> None:
    """UserError when the jdbc client is to connect by a user server's DSN (servers/user.UserDsn, by role)
    that holds a keyword it cannot map: checked before anything is written, as the client would fail
    only at its first run, once our database is made on that server."""
    for role in sorted(set(roles) & set(dsns)):
        unusable = [k for k in dsns[role].params if k not in JDBC_CONNINFO_KEYWORDS]
        if unusable:
            named = ", ".join(unusable)
            raise UserError(f"--server {role}: the jdbc client cannot connect by this DSN: pgjdbc has no "
                            f"equivalent of {named} here; give {option} without jdbc, or a DSN without {named}")


def _which(program: str) -> bool:
    return any(os.access(Path(d) / program, os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) if d)


def session_env(settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a client or psql reading the seed tables (clientenv.child_env: none of the user's
    libpq or driver variables): UTF-8, and PGOPTIONS SYNC_SCANS_OFF (libpq and psql read it; the JDBC client
    passes it to pgjdbc as its options), with `settings` (a case's --set session settings, servers/guc.py)
    after it."""
    from ..servers.guc import pgoptions
    return child_env(PGCLIENTENCODING="UTF8", PGOPTIONS=f"{SYNC_SCANS_OFF} {pgoptions(settings or {})}".strip())


# -- the contract's JSON ------------------------------------------------------------------------
class ClientOutputError(CaseError):
    """A client printed something other than the contract's JSON object."""


class _Pairs(list):
    """A JSON object's (key, value) pairs, in their order (the contract fixes it)."""


def parse_client_json(stdout: str, client: str, mode: str, iterations: int) -> dict:
    """The client's JSON object, checked against the contract and against what was asked; its
    iteration_us becomes a dict {"min", "max", "hist": [[LOWER, COUNT], ...]} (see _iteration_us)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ClientOutputError(f"{client}: expected one JSON line on stdout, got {len(lines)}: {stdout[:200]!r}")
    try:
        pairs = json.loads(lines[0], object_pairs_hook=_Pairs)
    except json.JSONDecodeError as e:
        raise ClientOutputError(f"{client}: stdout is not JSON ({e.msg}): {lines[0][:200]!r}") from None
    if not isinstance(pairs, _Pairs):
        raise ClientOutputError(f"{client}: expected a JSON object, got {lines[0][:200]!r}")
    keys = tuple(k for k, _ in pairs)
    if keys != KEYS:
        raise ClientOutputError(f"{client}: JSON keys {', '.join(keys)}; the contract's are {', '.join(KEYS)} "
                                "in that order")
    out = dict(pairs)

    def fail(what: str) -> ClientOutputError:
        return ClientOutputError(f"{client}: {what} in {lines[0][:300]}")

    if out["client"] != client:
        raise fail(f"client is {out['client']!r}, expected {client!r}")
    if not isinstance(out["version"], str) or not any(ch.isdigit() for ch in out["version"]):
        raise fail("version names no driver version")
    if out["mode"] != mode:
        raise fail(f"mode is {out['mode']!r}, expected {mode!r}")
    for k in ("iterations", "rows", "bytes"):
        if not _is_int(out[k]) or out[k] < 0:
            raise fail(f"{k} is not a whole number >= 0")
    if out["iterations"] != iterations:
        raise fail(f"iterations is {out['iterations']}, expected {iterations}")
    if not isinstance(out["checksum"], str) or not re.fullmatch(r"[0-9a-f]{16}", out["checksum"]):
        raise fail("checksum is not 16 lower-case hex digits")
    for k in TIMES:
        if not _is_number(out[k]) or out[k] < 0:
            raise fail(f"{k} is not a number of seconds >= 0")
    if out["connect_s"] + out["exec_s"] + out["fetch_s"] > out["total_s"] + ROUNDING_SLACK_S:
        raise fail("connect_s + exec_s + fetch_s exceed total_s")
    out["iteration_us"] = _iteration_us(out["iteration_us"], out["iterations"], fail)
    return out


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _load_psycopg_module(name: str):
    """clients/psycopg/NAME.py, a module of the psycopg client's own that the orchestrator shares."""
    spec = importlib.util.spec_from_file_location(name, REPO / "clients" / "psycopg" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_histogram = _load_psycopg_module("pgpb_histogram")   # the contract's bucket function
bucket = _histogram.bucket                # v -> LOWER of v's bucket
bucket_width = _histogram.bucket_width    # LOWER -> how many whole microseconds the bucket holds


def _iteration_us(value, iterations: int, fail) -> dict:
    """The contract's iteration_us, checked: {"min": int, "max": int, "hist": [[LOWER, COUNT], ...]}
    with LOWER a bucket's lower bound, ascending, counts >= 1 adding up to iterations, min <= max,
    min in the first bucket and max in the last."""
    if not isinstance(value, _Pairs) or tuple(k for k, _ in value) != ITERATION_KEYS:
        raise fail(f"iteration_us is not an object with keys {', '.join(ITERATION_KEYS)} in that order")
    h = dict(value)
    if not all(_is_int(h[k]) and h[k] >= 0 for k in ("min", "max")) or h["min"] > h["max"]:
        raise fail("iteration_us min and max are not whole numbers with 0 <= min <= max")
    hist = h["hist"]
    if not isinstance(hist, list) or not all(isinstance(b, list) and len(b) == 2 and all(map(_is_int, b))
                                            for b in hist):
        raise fail("iteration_us hist is not a list of [LOWER, COUNT] pairs of whole numbers")
    if not hist or any(lower < 0 or bucket(lower) != lower or count < 1 for lower, count in hist):
        raise fail("iteration_us hist has a LOWER that starts no bucket, or a COUNT < 1")
    if any(a[0] >= b[0] for a, b in zip(hist, hist[1:])):
        raise fail("iteration_us hist is not ascending by LOWER")
    if sum(count for _, count in hist) != iterations:
        raise fail(f"iteration_us counts add up to {sum(c for _, c in hist)}, not the {iterations} iterations")
    if bucket(h["min"]) != hist[0][0] or bucket(h["max"]) != hist[-1][0]:
        raise fail("iteration_us min is not in the first bucket or max not in the last")
    return h


PERCENTILES = (50, 90, 95, 99)
# What iteration_percentiles() gives a study, declared once (for loops of more than one iteration).
ITERATION_METRICS = tuple(
    Metric(f"latency_{name}_ms", "ms", "lower", f"{text} of one iteration's wall time, from the client's histogram "
           "of iterations (nearest rank, midpoint of its 6.25% bucket)")
    for name, text in (("p50", "median"), ("p90", "90th percentile"), ("p95", "95th percentile"),
                       ("p99", "99th percentile"))) + (
    Metric("latency_max_ms", "ms", "lower", "the longest iteration's wall time (exact)"),)


def iteration_percentiles(iteration_us: dict) -> dict:
    """latency_p50_ms, latency_p90_ms, latency_p95_ms, latency_p99_ms and latency_max_ms (float
    milliseconds) of a client's iteration_us (as parse_client_json returns it).

    The p-th percentile is the nearest-rank value: the k-th smallest iteration time with
    k = ceil(p / 100 * N), N the number of iterations. The histogram holds it only to its bucket,
    so it is reported as the midpoint of the whole microseconds that bucket holds,
    LOWER + (width - 1) / 2 (exact for buckets of width 1, i.e. below 32 µs; otherwise within
    3.125% of the value), clipped to [min, max]. The maximum is exact (max)."""
    hist, lo, hi = iteration_us["hist"], iteration_us["min"], iteration_us["max"]
    n = sum(count for _, count in hist)
    out = {}
    for p in PERCENTILES:
        rank, seen = max(1, -(-p * n // 100)), 0   # ceil(p * n / 100), in integers
        lower = next(lower for lower, count in hist if (seen := seen + count) >= rank)
        mid = lower + (bucket_width(lower) - 1) / 2
        out[f"latency_p{p}_ms"] = min(max(mid, lo), hi) / 1000
    out["latency_max_ms"] = hi / 1000
    return out


# -- running one client -------------------------------------------------------------------------
@dataclass(frozen=True)
class ClientRun:
    output: dict               # the validated JSON
    wall_s: float
    user_s: float
    sys_s: float
    peak_rss_kib: int


def run_native_client(client: str, conninfo: str, sql: str, *, mode: str = "normal", keep: bool = True,
                      iterations: int = 1, print_rows: bool = False, dest: str = "/dev/null",
                      timeout: float = 600, jvm_options: Sequence[str] = (), env: dict | None = None) -> ClientRun:
    """One run of a native client (in session_env() unless env is given), measured; CaseError for any
    failure, with its message."""
    args = [*CLIENTS[client].command(jvm_options), "-c", conninfo, "-s", sql, "-k", "1" if keep else "0",
            "-n", str(iterations), "-p", "1" if print_rows else "0", "-o", dest, "-m", mode]
    m = spawn_measured(args, timeout, session_env() if env is None else env)
    if m.timed_out:
        raise CaseError(f"{client} ({mode}) did not finish within {timeout:g} s and was killed")
    if m.returncode != 0:
        lines = [line for line in m.stderr.splitlines() if line.strip()]
        what = {2: "usage error", 3: "server or connection error"}.get(m.returncode, f"exit {m.returncode}")
        if m.returncode < 0:
            what = f"killed by {signal.Signals(-m.returncode).name}"
        detail = next((line for line in lines if "Exception" in line or "Error" in line), lines[0] if lines else "")
        raise CaseError(f"{client} ({mode}): {what}: {detail or 'no message'}".strip())
    return ClientRun(parse_client_json(m.stdout, CLIENTS[client].name, mode, iterations), m.wall_s, m.user_s,
                     m.sys_s, m.peak_rss_kib)


# -- the contract's checksum ----------------------------------------------------------------
_rowhash = _load_psycopg_module("pgpb_rowhash")   # the definition in Python, and its C loop by ctypes
_rowhash_lib = None


def _rowhash_c():
    """(row_hash, update) of .tools/clients/libpgpb_rowhash.so, the psycopg client's C loop, if built
    and current."""
    global _rowhash_lib
    if _rowhash_lib is None:
        _rowhash_lib = _rowhash.load_c(TOOLS / "libpgpb_rowhash.so") or False
    return _rowhash_lib or None


def row_hash(row: bytes) -> int:
    """The hash of one row (all its bytes, its newline included) in the contract's checksum."""
    lib = _rowhash_c()
    return lib[0](row) if lib else _rowhash.row_hash_python(row)


class RowChecksum:
    """The contract's checksum of COPY text fed in pieces of any size (a row may span pieces, a
    piece may hold several rows): the sum mod 2^64 of every row's hash, its newline included, so
    that the order of the rows does not matter. A raw newline ends a row (COPY text escapes the
    newlines of values)."""

    def __init__(self) -> None:
        self._state = _rowhash.new_state()

    def update(self, data: bytes) -> RowChecksum:
        lib = _rowhash_c()
        (lib[1] if lib else _rowhash.update_python)(self._state, data)
        return self

    @property
    def value(self) -> int:
        return self._state[0]


def rows_checksum(text: bytes) -> int:
    """The contract's checksum of whole rows of COPY text."""
    return RowChecksum().update(text).value


def repeated_checksum(checksum: int, times: int) -> int:
    """The checksum of the same rows read `times` times: a sum of row hashes, so times * checksum."""
    return checksum * times & MASK64
