"""pgpb_psycopg: pgpathbench's psycopg 3 client. Contract: clients/CONTRACT.md.

Modes: normal (execute, then the rows of the client-side result), cursor:N (a named, server-side
cursor read N rows at a time), copy (cursor.copy: COPY (SQL) TO STDOUT, one block per row).
Run it with the project's virtual environment: .tools/clients/pgpb_psycopg does.
"""

from __future__ import annotations

import getopt
import os
import sys
from time import perf_counter as now  # monotonic

import pgpb_rowhash  # beside this file (sys.path[0]), as is pgpb_histogram
from pgpb_histogram import IterationHistogram

CLIENT = "pgpb_psycopg"
USAGE = (f"usage: {CLIENT} -c CONNINFO -s SQL [-k 0|1] [-n ITERATIONS] [-p 0|1] [-o DEST]\n"
         "       [-m normal|cursor:N|copy]   (see clients/CONTRACT.md)\n")
OUTBUF_SIZE = 1 << 20  # output is hashed and written in 1 MiB blocks, never per row
BATCH_ROWS = 10_000    # rows converted to Python objects at a time in normal mode (bounded memory)

# Escapes of COPY TO's text format (CopyAttributeOutText); every other character is kept.
ESCAPES = str.maketrans({"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                         "\v": "\\v"})
NEEDS_ESCAPE_BUT_TAB_NL = ("\\", "\b", "\f", "\r", "\v")


def usage_error(msg: str) -> None:
    sys.stderr.write(f"{CLIENT}: {msg}\n{USAGE}")
    sys.exit(2)


def server_error(what: str, exc: BaseException) -> None:
    msg = str(exc).strip()
    msg = msg[len(what) + 2:] if msg.startswith(what + ": ") else msg  # libpq 17+ says it already
    sys.stderr.write(f"{CLIENT}: {what}: {msg}\n")
    sys.exit(3)


def parse_int(opt: str, s: str, lo: int, hi: int) -> int:
    try:
        v = int(s, 10)
    except ValueError:
        v = None
    if v is None or not lo <= v <= hi or not s.strip().lstrip("+-").isdigit():
        usage_error(f"-{opt}: '{s}' is not an integer in {lo}..{hi}")
    return v


def load_hash_rows():
    """The contract's checksum loop (pgpb_rowhash.py) as hash_rows(state, data): data is the next piece
    of COPY text. In C unless the library is missing (a warning, then pure Python, slowly)."""
    lib_path = os.environ.get("PGPB_ROWHASH_LIB", str(pgpb_rowhash.LIB))
    c = pgpb_rowhash.load_c(lib_path)
    if c is None:
        sys.stderr.write(f"{CLIENT}: warning: {lib_path} missing or stale (scripts/build-clients builds it); "
                         "hashing in pure Python, slowly\n")
        return pgpb_rowhash.update_python
    return c[1]


class Output:
    """COPY text copied into one bytearray; at 1 MiB it is hashed and (with -p 1) written at once.
    (Copying each block at once, rather than keeping a list of blocks to join, lets psycopg's
    buffers be freed while still hot: measured 0.2 s instead of 0.4 s of CPU per 1M rows.)
    A block may end inside a row: the checksum's state carries the row begun to the next block."""

    def __init__(self, dest: str, printing: bool):
        self.file = open(dest, "wb", buffering=0)
        self.printing = printing
        self.hash_rows = load_hash_rows()
        self.buf = bytearray()
        self.state = pgpb_rowhash.new_state()
        self.nbytes = 0

    @property
    def checksum(self) -> int:
        return self.state[0]

    def add(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) >= OUTBUF_SIZE:
            self.flush()

    def flush(self) -> None:
        buf = self.buf
        self.hash_rows(self.state, buf)
        self.nbytes += len(buf)
        if self.printing:
            self.file.write(buf)
        buf.clear()

    def close(self) -> None:
        self.flush()
        self.file.close()


def render_rows(rows: list, ncols: int) -> bytes:
    """Rows as COPY text. Fast path: join everything, then prove no value needed escaping by
    counting separators and looking for the other escapable characters (C-speed scans); a
    NULL (TypeError in join) or any escapable character sends the batch to the slow path."""
    try:
        text = "\n".join(map("\t".join, rows))
        if (text.count("\t") == len(rows) * (ncols - 1) and text.count("\n") == len(rows) - 1
                and not any(c in text for c in NEEDS_ESCAPE_BUT_TAB_NL)):
            return (text + "\n").encode()
    except TypeError:
        pass
    return "".join("\t".join("\\N" if v is None else v.translate(ESCAPES) for v in row) + "\n"
                   for row in rows).encode()


def text_loaders_everywhere(psycopg) -> None:
    """Load every value as its text, as libpq (PQgetvalue) and JDBC (getString) hand it over:
    no client parses values into native types, and the rendering is PostgreSQL's own text.
    (psycopg swaps in its C TextLoader.)"""
    from psycopg.types.string import TextLoader
    for info in psycopg.postgres.types:
        for oid in (info.oid, getattr(info, "array_oid", 0)):
            if oid:
                psycopg.adapters.register_loader(oid, TextLoader)


class Options:
    """The contract's command line, parsed (-h prints the usage and exits 0)."""

    def __init__(self, argv: list[str]):
        self.conninfo = self.sql = None
        self.keep, self.iterations, self.printing, self.dest, self.mode = 1, 1, 0, "/dev/null", "normal"
        try:
            opts, rest = getopt.getopt(argv, "c:s:k:n:p:o:m:h")
        except getopt.GetoptError as e:
            usage_error(str(e))
        for opt, val in opts:
            self._set(opt, val)
        if rest:
            usage_error(f"unexpected argument '{rest[0]}'")
        if self.conninfo is None or self.sql is None:
            usage_error("-c CONNINFO and -s SQL are required")
        self.cursor_rows = 0
        if self.mode.startswith("cursor:"):
            self.cursor_rows = parse_int("m cursor:N, N", self.mode[7:], 1, 1_000_000_000)
        elif self.mode not in ("normal", "copy"):
            usage_error(f"-m {self.mode}: not a mode of this client (normal, cursor:N, copy)")

    def _set(self, opt: str, val: str) -> None:
        if opt == "-c": self.conninfo = val
        elif opt == "-s": self.sql = val
        elif opt == "-k": self.keep = parse_int("k", val, 0, 1)
        elif opt == "-n": self.iterations = parse_int("n", val, 1, 1_000_000_000)
        elif opt == "-p": self.printing = parse_int("p", val, 0, 1)
        elif opt == "-o": self.dest = val
        elif opt == "-m": self.mode = val
        elif opt == "-h":
            sys.stdout.write(USAGE)
            sys.exit(0)

    def query(self) -> str:
        """COPY (...) and DECLARE reject a trailing ';': strip it (and white space), as every client does."""
        query = self.sql.rstrip(" \t\r\n;")
        return f"COPY ({query}) TO STDOUT" if self.mode == "copy" else query


def import_psycopg(conninfo: str):
    """psycopg, imported after the usage checks (a usage error stays fast), with text loaders;
    a conninfo libpq cannot parse is a usage error."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as e:
        usage_error(f"-c: {str(e).strip()}")
    text_loaders_everywhere(psycopg)
    return psycopg


class Client:
    """The contract's loop over one connection per run (-k 1) or per iteration (-k 0)."""

    def __init__(self, psycopg, opts: Options, out: Output):
        self.psycopg, self.opts, self.out, self.query = psycopg, opts, out, opts.query()
        self.rows = 0
        self.connect_s = self.exec_s = self.fetch_s = 0.0
        self.connect_began = 0.0  # the perf_counter read that began the last connection
        self.iteration_us = IterationHistogram()

    def connect(self):
        t = self.connect_began = now()
        try:
            # Named cursors need a transaction; the other modes run like libpq's, in autocommit.
            conn = self.psycopg.connect(self.opts.conninfo, client_encoding="UTF8",
                                        autocommit=not self.opts.cursor_rows)
        except self.psycopg.Error as e:
            server_error("connection failed", e)
        self.connect_s += now() - t
        return conn

    def run(self) -> None:
        keep = self.opts.keep
        conn = self.connect() if keep else None
        for _ in range(self.opts.iterations):
            if not keep:
                conn = self.connect()
            self.run_query(conn)
            if not keep:
                conn.close()
        if keep:
            conn.close()

    def run_query(self, conn) -> None:
        """One iteration's query: exec_s, fetch_s and its iteration time, from the same clock reads."""
        read = {"normal": self._normal, "copy": self._copy}.get(self.opts.mode, self._cursor)
        began = now()
        t = read(conn, began)  # when the rows began to be read
        ended = now()
        self.fetch_s += ended - t
        # -k 0: the iteration began with its connection
        self.iteration_us.record(began if self.opts.keep else self.connect_began, ended)

    def _executed(self, t: float) -> float:
        """The query returned (exec_s); reading its rows begins now."""
        self.exec_s += now() - t
        return now()

    def _read_batches(self, cur, batch_rows: int) -> None:
        ncols = len(cur.description)
        while batch := cur.fetchmany(batch_rows):
            self.out.add(render_rows(batch, ncols))
            self.rows += len(batch)

    def _normal(self, conn, t: float) -> float:
        cur = conn.cursor()
        cur.execute(self.query)  # returns with the whole result in memory
        t = self._executed(t)
        # fetchmany slices the same in-memory result fetchall would convert whole, but keeps
        # at most BATCH_ROWS rows as Python objects (10M rows would not fit otherwise).
        self._read_batches(cur, BATCH_ROWS)
        cur.close()
        return t

    def _copy(self, conn, t: float) -> float:
        cur = conn.cursor()
        out = self.out
        with cur.copy(self.query) as copy:  # entered at CopyOutResponse, before any row
            t = self._executed(t)
            buf, n = out.buf, 0
            for block in copy:  # one CopyData message, i.e. one row, per block (hashing takes any piece)
                buf += block  # out.add, inlined: this loop runs once per row
                n += 1
                if len(buf) >= OUTBUF_SIZE:
                    out.flush()
            self.rows += n
        cur.close()
        return t

    def _cursor(self, conn, t: float) -> float:
        cur = conn.cursor(name="pgpb_cursor")
        cur.itersize = self.opts.cursor_rows
        cur.execute(self.query)  # DECLARE; rows come with each FETCH
        t = self._executed(t)
        self._read_batches(cur, self.opts.cursor_rows)
        cur.close()
        conn.commit()
        return t


def print_result(psycopg, client: Client, total_s: float) -> None:
    """The contract's JSON line: the same key order and number format as the C clients' printf."""
    lib = psycopg.pq.version()
    version = f"psycopg {psycopg.__version__} ({psycopg.pq.__impl__}, libpq {lib // 10000}.{lib % 10000})"
    o, c = client.opts, client
    sys.stdout.write(
        f'{{"client":"psycopg","version":"{version}","mode":"{o.mode}","iterations":{o.iterations},'
        f'"rows":{c.rows},"bytes":{c.out.nbytes},"checksum":"{c.out.checksum:016x}",'
        f'"connect_s":{c.connect_s:.6f},"exec_s":{c.exec_s:.6f},"fetch_s":{c.fetch_s:.6f},"total_s":{total_s:.6f},'
        f'"iteration_us":{c.iteration_us.json()}}}\n')


def main(argv: list[str]) -> int:
    opts = Options(argv)
    psycopg = import_psycopg(opts.conninfo)
    try:
        out = Output(opts.dest, bool(opts.printing))
    except OSError as e:
        usage_error(f"-o: cannot open {opts.dest}: {e.strerror}")
    client = Client(psycopg, opts, out)

    t0 = now()
    try:
        client.run()
    except psycopg.Error as e:
        server_error("query failed", e)
    t = now()
    try:
        out.close()
    except OSError as e:
        sys.stderr.write(f"{CLIENT}: -o: cannot write {opts.dest}: {e.strerror}\n")
        return 1
    client.fetch_s += now() - t
    print_result(psycopg, client, now() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
