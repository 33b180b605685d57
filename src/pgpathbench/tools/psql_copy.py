"""The reference every native client is held to: what `psql -c 'COPY (SQL) TO STDOUT'` prints.

psql runs through the measured spawn (tools/spawn.py), in the clients' session environment
(synchronize_seqscans off); its COPY text is streamed through a pipe and hashed here as it
comes, never held whole (the paper's t10m is 2.8 GB): rows, bytes and the contract's checksum
(clients/CONTRACT.md: the sum of each row's hash, so row order does not matter).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .clients import RowChecksum, repeated_checksum, session_env
from .spawn import spawn_measured


class CopyFailed(RuntimeError):
    """psql failed or took too long; `detail` is its last line (or the timeout), without the SQL."""

    def __init__(self, message: str, detail: str):
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class Reference:
    """What psql's COPY (SQL) TO STDOUT prints for one query: every client must return the same."""
    rows: int
    bytes: int
    checksum: str               # the contract's checksum of one iteration's rows

    def repeated(self, iterations: int) -> tuple[int, int, str]:
        """Rows, bytes and checksum of the query run `iterations` times (the checksum sums row hashes)."""
        return (self.rows * iterations, self.bytes * iterations,
                f"{repeated_checksum(int(self.checksum, 16), iterations):016x}")

    def brief(self) -> str:
        return f"rows {self.rows}, bytes {self.bytes}, checksum {self.checksum}"

    def to_json(self) -> dict:
        return {"rows": self.rows, "bytes": self.bytes, "checksum": self.checksum}


class _Hasher(threading.Thread):
    """Reads a pipe to its end, counting rows and bytes and summing row hashes."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.fd, self.rows, self.size, self.checksum = fd, 0, 0, RowChecksum()

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 20):
                self.checksum.update(chunk)
                self.rows += chunk.count(b"\n")
                self.size += len(chunk)


def copy_reference(psql: Path, conninfo: str, sql: str, timeout: float = 3600, read_only: bool = False,
                   env: Mapping[str, str] | None = None) -> Reference:
    """psql -c 'COPY (sql) TO STDOUT' through the measured spawn, its output hashed as it streams
    (read_only: in a read-only transaction, so that a query that writes fails instead; env: the
    clients' environment, PGPASSFILE included, else session_env()).
    CopyFailed (with psql's last line) when psql fails or takes longer than `timeout` seconds."""
    env = dict(session_env() if env is None else env)
    if read_only:
        env["PGOPTIONS"] += " -c default_transaction_read_only=on"
    read_end, write_end = os.pipe()
    hasher = _Hasher(read_end)
    hasher.start()
    try:
        m = spawn_measured([str(psql), "-X", "-q", "-d", conninfo, "-c", f"COPY ({sql}\n) TO STDOUT"], timeout,
                           env=env, stdout=write_end)
    finally:
        os.close(write_end)      # psql has exited (or was killed): the hasher reaches the end
        hasher.join()
    if m.timed_out:
        raise CopyFailed(f"psql COPY of '{sql}' took more than {timeout:g} s", f"took more than {timeout:g} s")
    if m.returncode != 0:
        lines = [line for line in m.stderr.splitlines() if line.strip()]
        # psql's ERROR line, not the LINE and caret lines after it
        detail = next((line.strip() for line in lines if "ERROR:" in line or "FATAL:" in line),
                      lines[-1] if lines else f"exit {m.returncode}")
        detail = " ".join(detail.split())
        raise CopyFailed(f"psql COPY of '{sql}' failed: {detail}", detail)
    return Reference(hasher.rows, hasher.size, f"{hasher.checksum.value:016x}")
