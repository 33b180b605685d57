"""A managed PostgreSQL cluster: init, configure, start, restart, stop, connect.

Never as root: data, socket and log directories belong to an unprivileged user. The server
listens on 127.0.0.1 only (and, in a network namespace, on its address there), on a free port found
at start and kept by restart(), and admits our superuser only; each start reads that back from the
server (_check_held). Its unix socket sits in a private 0700 directory (trust there, since only its
owner can reach it); TCP needs a
generated password kept 0600 beside the data, checked by scram-sha-256 (or md5, when a run asks:
`tcp_auth`), and a 0600 password file in libpq's format beside it (`passfile`). No conninfo of
ours holds the password: a client gets it from that file, named by PGPASSFILE in its environment
(`client_env`) or by libpq's `passfile` keyword in-process, so that it never appears on a command
line (/proc/PID/cmdline is world-readable; a 0600 file is not). The postmaster is our child with
PDEATHSIG=SIGINT, so a fast shutdown follows the tool wherever it dies.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import psycopg
import psycopg.sql

from ..errors import ServerRefused, UserError
from ..evidence import Watched
from ..files import write_atomically
from ..procs import OsUser, password_env, write_passfile
from . import template
from .binaries import PgBinaries
from .postmaster import START_TIMEOUT_S, STOP_TIMEOUT_S, postmaster_pid, release_ipc, stop_pid
from .tls import ServerFiles, server_settings

SUPERUSER = "pgpathbench"
RESTART_BIND_TRIES = 5
TCP_AUTH = ("scram-sha-256", "md5")   # what a TCP client's password is checked by (pg_hba.conf's method)
MAX_SOCKET_DIR = 107 - len("/.s.PGSQL.65535") - 1  # sun_path is 108 bytes with its NUL


def socket_dir(root: Path) -> Path:
    """A cluster's private socket directory: beside its data, or in /tmp when that path is too long
    (removed with the cluster; `clean` and a resumed run remove those a killed run left)."""
    beside = root / "sock"
    if len(str(beside)) <= MAX_SOCKET_DIR:
        return beside
    return Path("/tmp") / f"pgpb-{hashlib.sha1(str(root).encode()).hexdigest()[:12]}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Statements:
    """What a managed server, here or on a host, does over its own connect()."""

    def execute(self, dbname: str, *statements: str) -> None:
        with self.connect(dbname) as conn:
            for sql in statements:
                conn.execute(sql)

    def create_database(self, dbname: str) -> None:
        with self.connect() as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
                conn.execute(f'CREATE DATABASE "{dbname}"')


@dataclass
class Cluster(Statements):
    name: str
    root: Path                      # everything of this cluster lives below
    bins: PgBinaries
    user: OsUser
    settings: dict[str, str] = field(default_factory=dict)
    port: int | None = None
    netns: dict | None = None       # when the server sits on its own network stack (see network.py)
    tcp_auth: str = TCP_AUTH[0]     # pg_hba.conf's method for TCP, and the stored password's form
    # The password to initialise with (None: a new one): the nodes of one Citus cluster share one,
    # which pg_dist_authinfo gives Citus's connections between them (servers/citus.py).
    secret: str | None = field(default=None, repr=False)
    template: Path | None = None    # where pristine data directories are copied from (template.py); None: initdb
    tls: ServerFiles | None = None   # its certificate and key when a run has TLS cases (tls.py); None: ssl off
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    # -- paths ------------------------------------------------------------------------------
    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def sockdir(self) -> Path:
        return socket_dir(self.root)

    @property
    def logfile(self) -> Path:
        return self.root / "server.log"

    @property
    def password_file(self) -> Path:
        return self.root / "password"

    @property
    def password(self) -> str:
        return self.password_file.read_text().strip()

    @property
    def passfile(self) -> Path:
        """The password in libpq's password file format (`*:*:*:USER:PASSWORD`, 0600), which libpq,
        psql, pgbench, psycopg, psqlODBC (through libpq) and pgjdbc read from PGPASSFILE. Any host and
        port: a link (network.py) reaches the server at another address. Written when missing (a
        cluster initialised by an earlier version has only the password file)."""
        path = self.root / "pgpass"
        if not path.exists() and self.password_file.exists():
            write_passfile(path, self.password, SUPERUSER)
        return path

    def client_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a program connecting to this server over TCP (base: os.environ): PGPASSFILE
        names the password file; PGPASSWORD, if set, is dropped (libpq would prefer it)."""
        return password_env(self.passfile, base)

    # -- life cycle -------------------------------------------------------------------------
    def ensure_initialised(self) -> None:
        if (self.data / "PG_VERSION").exists():
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"--workspace: cannot create {self.root} ({e.strerror}); choose a writable directory") from None
        for d in (self.root, self.sockdir):
            d.mkdir(exist_ok=True)
            os.chmod(d, 0o700)
            self.user.chown(d)
        secret = self.secret or secrets.token_urlsafe(24)
        write_atomically(self.password_file, secret + "\n", private=True)
        (self.root / "pgpass").unlink(missing_ok=True)    # the passfile property writes it anew
        # Made aside and renamed once whole: an initdb killed half-way leaves no cluster that looks made.
        staging = self.root / "data.initdb"
        for half_made in (staging, self.data):
            shutil.rmtree(half_made, ignore_errors=True)
        if self.template is None:
            res = self._initdb(staging, secret)
        else:   # a copy has no password: it gets this one at its first start (_store_password_for_auth)
            res = template.copy_pristine(self.template, self.bins, self.user, SUPERUSER, staging)
        if res.returncode != 0:
            raise _failed(f"initdb of {self.name}", res.returncode, res.stderr)
        staging.rename(self.data)

    def _initdb(self, staging: Path, secret: str) -> subprocess.CompletedProcess:
        pwfile = self.root / "initdb.pw"
        write_atomically(pwfile, secret + "\n", private=True)
        self.user.chown(pwfile)
        try:
            return template.initdb(self.bins, self.user, staging, SUPERUSER, f"--pwfile={pwfile}")
        finally:
            pwfile.unlink(missing_ok=True)

    @property
    def tcp_host(self) -> str:
        """Where TCP clients on the host reach the server: loopback, or its namespace's address."""
        return self.netns["ns_addr"] if self.netns else "127.0.0.1"

    @property
    def listen(self) -> str:
        """Where the server listens: loopback, and its namespace's own address when it has one."""
        return "127.0.0.1" + (f",{self.netns['ns_addr']}" if self.netns else "")

    def _held(self) -> dict[str, str]:
        """The settings that hold the server's isolation, as pg_settings shows them (--set may not vary them:
        guc.HELD; _check_held reads them back after each start)."""
        return {"listen_addresses": self.listen, "port": str(self.port), "unix_socket_directories": str(self.sockdir),
                "unix_socket_permissions": "0700", **server_settings(self.tls)}

    def _write_settings(self) -> None:
        # Only our superuser: over loopback TCP (and from the host's end of the namespace's veth) with a
        # password, over the socket in its private directory by trust.
        hba = f"local all {SUPERUSER} trust\nhost all {SUPERUSER} 127.0.0.1/32 {self.tcp_auth}\n"
        if self.netns:
            hba += f"host all {SUPERUSER} {self.netns['host_addr']}/32 {self.tcp_auth}\n"
        (self.data / "pg_hba.conf").write_text(hba)
        conf = {**{k: f"'{v}'" for k, v in self._held().items()}, "logging_collector": "off",
                **{k: _quote(v) for k, v in self.settings.items()}}
        path = self.data / "pgpathbench.conf"
        path.write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
        self.user.chown(path)

    def _check_held(self) -> None:
        """The server's own word that it listens where we chose and nowhere else (a postgresql.auto.conf
        could override pgpathbench.conf): RuntimeError naming the setting if not."""
        held = self._held()
        with self.connect() as conn:
            found = dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(held),)))
        wrong = [f"{k} is {found.get(k)!r}, not {v!r}" for k, v in held.items() if found.get(k) != v]
        if wrong:
            self.stop()
            raise RuntimeError(f"server {self.name} does not run as configured: {'; '.join(wrong)}")

    def start(self) -> "Cluster":
        self.ensure_initialised()
        self.stop_orphan()
        for _attempt in range(5):
            self.port = free_port()
            if self._launch():
                self._store_password_for_auth()
                return self
            if "could not bind" not in self.log_tail():  # a port race is retried, anything else is not
                break
        raise _failed(f"the start of server {self.name}", self._proc.returncode if self._proc else None,
                      self.log_tail(), self.logfile)

    def restart(self) -> "Cluster":
        """Stop and start again on the same port and network stack (what ALTER SYSTEM of a
        postmaster setting needs): foreign servers, links and conninfos made since name the port."""
        if self.port is None:
            raise RuntimeError(f"server {self.name} was never started")
        self.stop()
        for _attempt in range(RESTART_BIND_TRIES):
            if self._launch():
                return self
            if "could not bind" not in self.log_tail():
                break
            time.sleep(0.5)   # the port is still held (by a process of someone else: we give up soon)
        raise RuntimeError(f"server {self.name} did not restart on port {self.port}; log {self.logfile}:\n"
                           f"{self.log_tail()}")

    def _launch(self) -> bool:
        """The postmaster spawned on self.port (in its namespace, if any); whether it became ready."""
        self._write_settings()
        log = open(self.logfile, "ab")
        self.user.chown(self.logfile)
        self._proc = self.user.spawn([str(self.bins.path("postgres")), "-D", str(self.data)],
                                     netns=self.netns["netns"] if self.netns else None,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if not self._wait_ready():
            return False
        self._check_held()
        return True

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            try:
                psycopg.connect(self.conninfo(), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        self.stop()
        return False

    def _store_password_for_auth(self) -> None:
        """The password stored in the form tcp_auth checks: md5 checks by md5 only a stored md5 hash
        (a SCRAM secret makes PostgreSQL use SCRAM whatever pg_hba.conf says), and a copy of a template
        has none yet. libpq computes the form here, so that the password never reaches the server in
        clear, and the statement is not logged."""
        with self.connect() as conn:
            stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (SUPERUSER,)).fetchone()[0]
            if stored and stored.startswith("md5" if self.tcp_auth == "md5" else "SCRAM-SHA-256$"):
                return
            secret = conn.pgconn.encrypt_password(self.password.encode(), SUPERUSER.encode(), self.tcp_auth.encode())
            conn.execute("SET log_statement = 'none'")
            conn.execute(psycopg.sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                psycopg.sql.Identifier(SUPERUSER), psycopg.sql.Literal(secret.decode())))

    def stop(self, immediate: bool = False) -> None:
        """Fast shutdown (immediate: no shutdown checkpoint, for data about to be removed), waited
        for; then nothing of this server remains running."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        steps = ((signal.SIGINT, STOP_TIMEOUT_S), (signal.SIGQUIT, 10), (signal.SIGKILL, 10))
        for sig, wait in steps[1:] if immediate else steps:
            proc.send_signal(sig)
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def stop_orphan(self) -> bool:
        """Stop a postmaster left by an earlier process of ours (recorded in postmaster.pid)."""
        pid = postmaster_pid(self.data)
        if pid is None or (self._proc and self._proc.pid == pid):
            return False
        stop_pid(pid)
        return True

    def remove(self) -> None:
        self.stop(immediate=True)
        self.stop_orphan()
        release_ipc(self.data, self.bins, self.user)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.sockdir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_reason(self) -> str | None:
        """How the server ended when it died on its own ('killed by SIGKILL', 'exit code 1');
        None while it runs, and after stop()."""
        if self._proc is None or self._proc.poll() is None:
            return None
        rc = self._proc.returncode
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exit code {rc}"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    # -- connecting -------------------------------------------------------------------------
    # What a study asks of any server, managed or the user's (servers/user.py answers the same).
    managed = True
    user = SUPERUSER
    transports = ("unix", "tcp")   # how clients on this machine reach it: its private socket, loopback TCP
    self_host = "127.0.0.1"   # where the server reaches itself over TCP (its own stack's loopback)

    def dbname(self, name: str) -> str:
        """The database a study calls `name`: the same name here (a user server prefixes ours)."""
        return name

    def client_args(self, name: str) -> tuple[str, str, int, str]:
        """dbname, host, port, user for a client program (-h -p -U): the private socket, trusted."""
        return name, str(self.sockdir), self.port, SUPERUSER

    @staticmethod
    def reached_at(link) -> tuple[str, int]:
        """Where postgres_fdw on another server reaches this one through `link`."""
        return link.host, link.port

    def fdw_target(self, name: str) -> tuple[dict[str, str], str, str | None]:
        """How postgres_fdw reaches database `name` here: server options, user, password."""
        return {"dbname": name}, SUPERUSER, self.password

    def writable_dir(self, name: str) -> str:
        """A directory of the run's that the server writes files to (COPY TO), made once."""
        directory = self.root / name
        if not directory.exists():
            directory.mkdir()
            self.user.chown(directory)
        return str(directory)

    @staticmethod
    def server_paths(files: Mapping[str, Path]) -> dict[str, str]:
        """Where the server reads these files of this machine (file_fdw's): where they are."""
        return {name: str(path) for name, path in files.items()}

    def conninfo(self, dbname: str = "postgres", transport: str = "unix") -> str:
        """Never with the password: over TCP, the client reads it from `passfile` (client_env)."""
        host = self.sockdir if transport == "unix" else self.tcp_host
        return f"host={host} port={self.port} user={SUPERUSER} dbname={dbname}"

    def connect(self, dbname: str = "postgres", **kw) -> psycopg.Connection:
        return psycopg.connect(self.conninfo(dbname), autocommit=True, **kw)

    def watched(self, role: str, *databases: str) -> Watched:
        """This server as the evidence collector reads it: SQL, and its processes in /proc."""
        return Watched(role, self.connect, postmaster_pid(self.data), databases)

    def fingerprint(self) -> dict:
        """What of this server changes a result: its build (version, binaries), what it preloads,
        every non-default setting, and Citus's settings when it runs Citus."""
        with self.connect() as conn:
            found = fingerprint_of(conn)
        return {**found, "major": self.bins.major, "bindir": str(self.bins.bindir),
                "binaries": getattr(self.bins, "origin", str(self.bins.bindir)),
                "client_tools_major": getattr(self.bins, "client_major", self.bins.major),
                "auth": {"local": "trust (private 0700 socket dir)", "tcp": self.tcp_auth}}


def fingerprint_of(conn: psycopg.Connection) -> dict:
    """A managed server's own word on its build: version, preloads, non-default settings, Citus's."""
    version, preload = conn.execute("SELECT version(), current_setting('shared_preload_libraries')").fetchone()
    settings = dict(conn.execute(
        "SELECT name, setting FROM pg_settings WHERE source NOT IN ('default', 'override') "
        "AND name NOT IN ('port', 'unix_socket_directories', 'data_directory', 'config_file', "
        "'hba_file', 'ident_file') ORDER BY name").fetchall())
    citus = dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name LIKE 'citus.%' ORDER BY name"))
    loaded = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'citus'").fetchone() \
        if citus else None
    return {"version": version, "settings": settings, "preload": preload,
            **({"citus": loaded[0], "citus_settings": citus} if citus else {})}


def _failed(what: str, returncode: int | None, output: str, log: Path | None = None) -> ServerRefused:
    """One line: why initdb or a postmaster's start failed, and what to do. A SIGKILL comes from
    outside (the kernel's OOM killer, another process), and says nothing of its own."""
    # initdb reports its own postgres killed as "child process exited with exit code 137" (the shell's 128 + 9)
    if returncode == -signal.SIGKILL or re.search(r"\bexit code 137\b|signal 9\b", output):
        return ServerRefused(f"{what} failed: killed by SIGKILL, by the kernel's OOM killer (dmesg says) or by "
                             "another process; free memory or stop that process")
    where = f" (log {log})" if log else ""
    if returncode is None:
        return ServerRefused(f"{what} failed: not ready within {START_TIMEOUT_S} s{where}")
    return ServerRefused.of(what + where, output, returncode)


def _quote(value: str) -> str:
    return value if value.replace(".", "").isdigit() else "'" + value.replace("'", "''") + "'"
