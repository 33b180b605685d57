"""The user's SQL (a --script's commands, --init's statements) parsed by PostgreSQL itself before
anything of a run is written, with nothing executed, and no error that quotes the text.

The check's server is one of its own: a managed cluster of the run's binaries initialised in a
private scratch directory (tmpfs when it has room) and removed at once. It costs about 1.5 s
(initdb and start) per run that brings SQL of its own, and buys what the alternatives do not:
nothing of a refused file reaches a server that holds anything (the results cluster, a user's
server or --results-dsn's store), the check is the same whatever the store, and a refused
invocation leaves nothing behind (no workspace, no server).

How nothing is executed: the text goes in a Parse message (libpq's PQprepare), followed by two
statements of ours (`;SELECT;SELECT`). The server's raw parser reads the whole string first;
if it accepts it, the string holds more than one statement, which a prepared statement cannot,
and the server says so ("cannot insert multiple commands into a prepared statement", no
position) before it analyses or runs anything. Any other answer is the parser's refusal, at a
position we turn into a line of the file. Only the grammar is checked: the tables a script reads
come from --init and pgbench -i, so "relation does not exist" can never come up here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Iterator

import psycopg
from psycopg import pq

from .. import scratch
from ..errors import UserError
from ..procs import OsUser
from .binaries import PgBinaries
from .cluster import Cluster

_ENDING = "\n;\nSELECT\n;\nSELECT"
_ACCEPTED = ("42601", "cannot insert multiple commands into a prepared statement")
# A start as cheap as a server gets: nothing is stored, one session connects.
_SETTINGS = {"max_connections": "5", "autovacuum": "off", "fsync": "off", "lc_messages": "C"}
_ROOM_BYTES = 256 << 20   # tmpfs when it has room for a cluster (40 MB) and its WAL


@dataclass(frozen=True)
class Sql:
    """One user file's SQL: `option` names it in a refusal ('--script read.sql'), `text` is the
    file's, `pieces` its SQL as (offset in text, SQL), `fix` what a refusal advises."""
    option: str
    text: str
    pieces: tuple[tuple[int, str], ...]
    fix: str


def check(given: list[Sql], bins: PgBinaries, user: OsUser) -> None:
    """Every piece of every file parsed by the server (see the module); UserError at the first
    refusal, naming the option and the line, never the text."""
    if not given:
        return
    with _server(bins, user, given[0].option.split()[0]) as conn:
        for sql in given:
            refusal = _refusal(conn, sql)
            if refusal is not None:
                raise UserError(f"{sql.option}: {refusal}; {sql.fix}")


@contextlib.contextmanager
def _server(bins: PgBinaries, user: OsUser, option: str = "") -> Iterator[psycopg.Connection]:
    """A connection to a server of the check's own, removed when it is done with."""
    tmpfs = scratch.tmpfs_or_tmp()
    room = shutil.disk_usage(tmpfs).free > _ROOM_BYTES   # a container's /dev/shm may be 64 MB
    base = scratch.make_dir("parse", tmpfs if room else tempfile.gettempdir())
    os.chmod(base, 0o711)   # the server's user reaches its directory below; sweep() finds ours
    cluster = Cluster("parse-check", base / "pg", bins, user, _SETTINGS)
    try:
        try:
            cluster.start()
        except (OSError, RuntimeError) as e:
            raise UserError(f"{option}: the server that parses it (PostgreSQL {bins.major} in {base}) did not "
                            f"start: {str(e).splitlines()[0][:200]}; see 'pgpathbench doctor'") from None
        with cluster.connect("postgres") as conn:
            yield conn
    finally:
        cluster.remove()
        shutil.rmtree(base, ignore_errors=True)


def _refusal(conn: psycopg.Connection, sql: Sql) -> str | None:
    """Why the server refuses the file's SQL ('line 3: the server cannot parse it (SyntaxError,
    SQLSTATE 42601)'), or None when it parses."""
    joined, starts = "", []
    for offset, piece in sql.pieces:   # a piece ended by its own ';' needs no other
        starts.append((len(joined), offset, piece))
        joined += piece + ("\n" if piece.endswith(";") else "\n;\n")
    result = conn.pgconn.prepare(b"", (joined + _ENDING).encode())
    field = {f: (result.error_field(f) or b"").decode() for f in (pq.DiagnosticField.SQLSTATE,
             pq.DiagnosticField.MESSAGE_PRIMARY, pq.DiagnosticField.STATEMENT_POSITION)}
    code, message, position = field.values()
    if result.status == pq.ExecStatus.FATAL_ERROR and (code, message) == _ACCEPTED and not position:
        return None
    if result.status != pq.ExecStatus.FATAL_ERROR:   # the two SELECTs of ours make this impossible
        raise RuntimeError(f"the SQL check's Parse ended {result.status.name}, not with an error")
    try:
        name = psycopg.errors.lookup(code).__name__
    except KeyError:
        name = "an error"
    what = f"the server cannot parse it ({name}, SQLSTATE {code})"
    return f"{_line(sql, starts, int(position) - 1)}: {what}" if position.isdigit() else what


def _line(sql: Sql, starts: list[tuple[int, int, str]], at: int) -> str:
    """'line N' of the file at a character position of the joined text; a position past a piece
    (in what joins them) is where that piece is left unfinished."""
    for joined_at, offset, piece in reversed(starts):
        if at >= joined_at:
            inside = at - joined_at < len(piece)
            line = sql.text.count("\n", 0, offset) + 1 + \
                (piece.count("\n", 0, at - joined_at) if inside else piece.rstrip().count("\n"))
            return f"line {line}" + ("" if inside else " (a statement, string or comment left unfinished)")
    return "line 1"
