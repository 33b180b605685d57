"""TLS between clients and managed servers (the `tls` dimension): a run's CA, each server's
certificate, the server settings and the client options, in one place each.

A run with TLS cases gets a CA of its own (servers/RUN/tls/: made with the `cryptography` package,
never by an openssl command line, in certificates.py) and every managed server a certificate signed by it whose
subject alternative names are the addresses and names clients reach it by: 127.0.0.1, localhost,
and its network namespace's address. Keys are 0600 and belong to the servers' OS user; nothing is
written outside the run's directory, so what removes a run's files (its end, `clean`, a resumed
run's start) removes them, and a resumed run makes them anew.

A server with TLS has ssl=on and still accepts clients without it: the case says which (its
client options: sslmode=disable for off, verify-full against the run's CA for on). It logs each
connection (log_connections), whose line carries the TLS the connection negotiated (the values
pg_stat_ssl shows while it lives): connections_seen() reads that for a measurement, so the TLS of
clients that connect and leave within it is the server's record, not a guess.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..procs import OsUser

OFF, ON = "off", "on"
VALUES = (OFF, ON)
LOCAL_NAMES = ("127.0.0.1", "localhost")   # a server's loopback (and a proxy's address on it)


@dataclass(frozen=True)
class ServerFiles:
    """A server's certificate and key (PEM), as ssl_cert_file and ssl_key_file name them."""
    cert: Path
    key: Path


class Authority:
    """A run's CA in `directory` (made on first use), which signs its servers' certificates."""

    def __init__(self, directory: Path, user: OsUser):
        self.directory, self.user = directory, user

    @property
    def root_cert(self) -> Path:
        """What clients verify servers against (sslrootcert)."""
        return self.directory / "ca.crt"

    def _load(self) -> tuple[bytes, bytes]:
        """The CA's key and certificate (PEM), made now if missing."""
        from . import certificates   # cryptography only where a run makes certificates
        key_path = self.directory / "ca.key"
        if not key_path.exists() or not self.root_cert.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            os.chmod(self.directory, 0o700)
            self.user.chown(self.directory)
            key, cert = certificates.new_ca()
            self._write(key_path, key)
            self._write(self.root_cert, cert, mode=0o644)
            return key, cert
        return key_path.read_bytes(), self.root_cert.read_bytes()

    def issue(self, name: str, hosts: tuple[str, ...]) -> ServerFiles:
        """A certificate for server `name` valid for `hosts` (addresses or names) besides loopback."""
        from . import certificates
        key, cert = certificates.issue(*self._load(), name, tuple(dict.fromkeys((*LOCAL_NAMES, *hosts))))
        files = ServerFiles(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        self._write(files.key, key)
        self._write(files.cert, cert, mode=0o644)
        return files

    def _write(self, path: Path, data: bytes, mode: int = 0o600) -> None:
        """Created with `mode` (a key is never readable by others, not even for a moment), the servers' user's."""
        path.unlink(missing_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        self.user.chown(path)


# -- the server's side and the client's ---------------------------------------------------------
def server_settings(files: ServerFiles | None) -> dict[str, str]:
    """A managed server's TLS settings (held: --set may not vary them): off without files."""
    if files is None:
        return {"ssl": "off"}
    return {"ssl": "on", "ssl_cert_file": str(files.cert), "ssl_key_file": str(files.key), "log_connections": "on"}


def client_options(tls: str, root_cert: Path) -> dict[str, str]:
    """libpq's options (and postgres_fdw's, which takes libpq's) for a case's TLS value: the server
    verified against the run's CA, host name included, or no TLS at all (libpq's default, prefer,
    would take it where the server offers it)."""
    if tls == ON:
        return {"sslmode": "verify-full", "sslrootcert": str(root_cert)}
    return {"sslmode": "disable"}


def conninfo(base: str, tls: str, root_cert: Path) -> str:
    """A conninfo (keyword form) with the case's TLS options after the others (libpq takes the last)."""
    return base + "".join(f" {k}={v}" for k, v in client_options(tls, root_cert).items())


# -- what the server saw --------------------------------------------------------------------------
_AUTHORIZED = re.compile(r"connection authorized: user=(\S+) database=(\S+)(?: application_name=(.*?))?"
                         r"(?: SSL enabled \(protocol=(\S+), cipher=(\S+), bits=(\d+)\))?$")


def log_offset(logfile: Path) -> int:
    try:
        return logfile.stat().st_size
    except FileNotFoundError:
        return 0


def connections_seen(logfile: Path, offset: int, database: str, application_name: str | None = None) -> list[str]:
    """The TLS of every connection to `database` (of `application_name`, when given) the server
    authorized since `offset` of its log: 'TLSv1.3 TLS_AES_256_GCM_SHA384 256' or 'off' each."""
    with open(logfile, "rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    seen = []
    for line in lines:
        m = _AUTHORIZED.search(line)
        if m and m.group(2) == database and (application_name is None or m.group(3) == application_name):
            seen.append(f"{m.group(4)} {m.group(5)} {m.group(6)}" if m.group(4) else OFF)
    return seen


def sessions_seen(conn, database: str, application_name: str) -> list[str]:
    """The TLS of the live sessions of `application_name` in `database`, from pg_stat_ssl (what a
    connection that stays, as a kept session's postgres_fdw one, negotiated): as connections_seen()."""
    rows = conn.execute("SELECT s.ssl, s.version, s.cipher, s.bits FROM pg_stat_ssl s JOIN pg_stat_activity a "
                        "USING (pid) WHERE a.datname = %s AND a.application_name = %s",
                        (database, application_name)).fetchall()
    return [f"{version} {cipher} {bits}" if ssl else OFF for ssl, version, cipher, bits in rows]


def backends_seen(conn, pids: list[int]) -> list[str]:
    """The TLS of the server's backends `pids` (a pooler's server connections), from pg_stat_ssl."""
    rows = conn.execute("SELECT ssl, version, cipher, bits FROM pg_stat_ssl WHERE pid = ANY(%s)", (pids,)).fetchall()
    return [f"{version} {cipher} {bits}" if ssl else OFF for ssl, version, cipher, bits in rows]


def check_seen(seen: list[str], tls: str, what: str) -> str:
    """The TLS the case's connections negotiated (one value), or ValueError when one of them is not the
    case's (on: every connection encrypted; off: none), or none was seen."""
    if not seen:
        raise ValueError(f"the server logged no connection of {what}")
    wrong = [s for s in seen if (s == OFF) == (tls == ON)]
    if wrong:
        raise ValueError(f"{len(wrong)} of {len(seen)} connections of {what} were "
                         f"{'not encrypted' if tls == ON else 'encrypted'}, with tls {tls}")
    return ", ".join(sorted(set(seen)))
