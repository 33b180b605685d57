"""A managed PgBouncer (Debian's `pgbouncer`, 1.18 on Debian 12) in front of a managed server.

It runs as the servers' OS user, never root, from its own directory in the run's server directory
(config, hba, auth file, log, pid file), on a free port found at start like a server's, and dies
with the tool (PDEATHSIG=SIGTERM, PgBouncer's immediate shutdown); `clean` and a resumed run stop a
killed run's pooler by its pid file (Servers.clear_leftovers), and its directory goes with the run's.

Authentication is the fronted server's own policy: trust on the pooler's private unix socket
(0700 directory), scram-sha-256 over TCP against a generated secret kept in the auth file (0600,
its SCRAM verifier only) and in a libpq password file (0600) that TCP clients name by PGPASSFILE:
never on a command line. The pooler reaches its server through the server's private socket
(trust; the same OS user), so no server password is in its files.

Every database it serves is an alias per pool mode (`source__transaction` -> database source in
transaction mode; `source__fdw_transaction`, a pool of postgres_fdw's own): one pooler serves every
pool mode of a run. Its admin console (SHOW STATS,
SHOW POOLS), reached over its socket, is the tool's evidence of what it pooled.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from ..errors import ServerRefused, UserError
from ..procs import OsUser, cmdline, end_process, password_env, pid_alive
from . import guc
from .cluster import SUPERUSER, Cluster, _pgpass_escape, _write_private, free_port, socket_dir

POOL_MODES = ("session", "transaction")
PID_FILE = "pgbouncer.pid"
START_TIMEOUT_S = 20
STOP_STEPS = ((signal.SIGTERM, 10), (signal.SIGKILL, 10))   # SIGTERM: 1.18's immediate shutdown
ADMIN_DB = "pgbouncer"
# What clients send that PgBouncer 1.18 refuses to take: pgJDBC's extra_float_digits (its default, 3, is the
# server's default from 12 on), and libpq's PGOPTIONS (`options`), lost on the way: a study that needs a
# session setting through a pooler sets it on its database instead, and --set is refused with a pooler.
IGNORED_STARTUP = "extra_float_digits,options"


def binary() -> str | None:
    return shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None)


def require(option: str) -> None:
    if binary() is None:
        raise UserError(f"{option} pgbouncer: needs PgBouncer (Debian's pgbouncer package); run make bootstrap "
                        "or apt-get install pgbouncer")


def refuse_session_settings(options, option: str) -> None:
    """--set with a pooler: its session settings travel as startup options, which PgBouncer drops;
    --tls on with a pooler: its TLS legs (client to pooler, pooler to server) are not built yet."""
    named = sorted(guc.chosen(options))
    if named:
        raise UserError(f"--set {named[0]}: not with {option} pgbouncer, which drops the session "
                        f"settings a client sends at connection; leave --set or {option} pgbouncer out")
    if "on" in options.dims.get("tls", ()):
        raise UserError(f"--tls on: not with {option} pgbouncer yet (the pooler's TLS legs are not built); "
                        f"measure TLS and the pooler in separate runs")


def version() -> str:
    out = subprocess.run([binary() or "pgbouncer", "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0].strip() if out else "unknown"


def alias(dbname: str, pool_mode: str, pool: str = "") -> str:
    """The pooler's name of database `dbname` served in `pool_mode`, in a pool of its own when named."""
    return f"{dbname}__{pool + '_' if pool else ''}{pool_mode}"


@dataclass
class Pooler:
    name: str
    root: Path                       # everything of this pooler lives below
    user: OsUser
    server: Cluster                  # the managed server it pools
    port: int | None = None
    databases: dict[str, tuple[str, str]] = field(default_factory=dict)   # alias -> (dbname, pool mode)
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    tls = None   # no TLS on its legs yet (--tls on with a pooler is refused): clients ask it for none

    # -- files --------------------------------------------------------------------------------
    @property
    def sockdir(self) -> Path:
        return socket_dir(self.root)

    @property
    def password(self) -> str:
        return (self.root / "password").read_text().strip()

    @property
    def passfile(self) -> Path:
        """libpq's password file for TCP clients (PGPASSFILE), 0600."""
        return self.root / "pgpass"

    @property
    def logfile(self) -> Path:
        return self.root / "pgbouncer.log"

    @property
    def listen(self) -> str:
        """Where it listens: loopback, and its server's namespace address when the server has one."""
        return "127.0.0.1" + (f",{self.server.netns['ns_addr']}" if self.server.netns else "")

    @property
    def tcp_host(self) -> str:
        return self.server.tcp_host

    def config(self) -> str:
        """pgbouncer.ini: the one place its settings are written (TLS legs go here too)."""
        dbs = "".join(f"{a} = host={self.server.sockdir} port={self.server.port} dbname={db} user={SUPERUSER} "
                      f"pool_mode={mode}\n" for a, (db, mode) in sorted(self.databases.items()))
        settings = {"listen_addr": self.listen, "listen_port": self.port, "unix_socket_dir": self.sockdir,
                    "unix_socket_mode": "0700", "auth_type": "hba", "auth_hba_file": self.root / "hba.conf",
                    "auth_file": self.root / "userlist.txt", "admin_users": SUPERUSER, "stats_users": SUPERUSER,
                    "pidfile": self.root / PID_FILE, "logfile": self.logfile, "max_client_conn": 1000,
                    "default_pool_size": 100, "ignore_startup_parameters": IGNORED_STARTUP,
                    "server_lifetime": 86400, "server_idle_timeout": 0}
        return "[databases]\n" + dbs + "[pgbouncer]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())

    def _write_files(self) -> None:
        hba = f"local all {SUPERUSER} trust\nhost all {SUPERUSER} 127.0.0.1/32 scram-sha-256\n"
        if self.server.netns:
            hba += f"host all {SUPERUSER} {self.server.netns['host_addr']}/32 scram-sha-256\n"
        for name, text in (("hba.conf", hba), ("pgbouncer.ini", self.config())):
            _write_private(self.root / name, text)
            self.user.chown(self.root / name)

    def _make_secret(self) -> None:
        """A new secret: its SCRAM verifier (computed by libpq) in the auth file, the secret in the
        password files the tool and its clients read."""
        secret = secrets.token_urlsafe(24)
        _write_private(self.root / "password", secret + "\n")
        _write_private(self.passfile, f"*:*:*:{SUPERUSER}:{_pgpass_escape(secret)}\n")
        with self.server.connect() as conn:
            verifier = conn.pgconn.encrypt_password(secret.encode(), SUPERUSER.encode(), b"scram-sha-256").decode()
        _write_private(self.root / "userlist.txt", f'"{SUPERUSER}" "{verifier}"\n')
        self.user.chown(self.root / "userlist.txt")

    # -- life cycle ---------------------------------------------------------------------------
    def serve(self, dbname: str, pool_mode: str, pool: str = "") -> str:
        """The alias of `dbname` in `pool_mode`, served from now on (a running pooler reloads). A named
        pool keeps its server connections apart: what one kind of client SETs for its session (postgres_fdw's
        search_path = pg_catalog) stays on the server connections of its pool in transaction mode."""
        name = alias(dbname, pool_mode, pool)
        if name not in self.databases:
            self.databases[name] = (dbname, pool_mode)
            if self.running:
                self._write_files()
                self.admin("RELOAD")
        return name

    def start(self) -> "Pooler":
        self.remove()
        for d in (self.root, self.sockdir):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o700)
            self.user.chown(d)
        self._make_secret()
        for _attempt in range(5):
            self.port = free_port()
            self._write_files()
            if self._launch():
                return self
            if "Address already in use" not in self.log_tail():
                break
        raise ServerRefused(f"the start of PgBouncer {self.name} failed (log {self.logfile}): "
                            f"{self.log_tail(3) or 'no message'}")

    def _launch(self) -> bool:
        self.logfile.touch()
        self.user.chown(self.logfile)
        self._proc = self.user.spawn([binary() or "pgbouncer", str(self.root / "pgbouncer.ini")],
                                     stop_signal=signal.SIGTERM,
                                     netns=self.server.netns["netns"] if self.server.netns else None,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            try:
                self.admin("SHOW VERSION")
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        self.stop()
        return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            end_process(proc.pid, STOP_STEPS)
            proc.wait()

    def remove(self) -> None:
        self.stop()
        stop_recorded(self.root)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.sockdir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_reason(self) -> str | None:
        if self._proc is None or self._proc.poll() is None:
            return None
        return f"exit code {self._proc.returncode}"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    # -- connecting ---------------------------------------------------------------------------
    def client_args(self, name: str) -> tuple[str, str, int, str]:
        """dbname, host, port, user for a client program: the private socket, trusted."""
        return name, str(self.sockdir), self.port, SUPERUSER

    def conninfo(self, name: str, transport: str = "unix") -> str:
        """Never with the secret: over TCP a client reads it from `passfile` (client_env)."""
        host = self.sockdir if transport == "unix" else self.tcp_host
        return f"host={host} port={self.port} user={SUPERUSER} dbname={name}"

    def fdw_target(self, name: str) -> tuple[dict[str, str], str, str | None]:
        """How postgres_fdw reaches alias `name` here: server options, user, the pooler's secret."""
        return {"dbname": name}, SUPERUSER, self.password

    def client_env(self, base=None) -> dict[str, str]:
        return password_env(self.passfile, base)

    def admin(self, command: str) -> list[dict]:
        """A command of the admin console (simple query protocol: all it speaks), its rows."""
        with psycopg.connect(self.conninfo(ADMIN_DB), autocommit=True, connect_timeout=2,
                             cursor_factory=psycopg.ClientCursor) as conn:
            cur = conn.execute(command)
            if cur.description is None:
                return []
            names = [d.name for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

    def counters(self, name: str) -> dict:
        """SHOW STATS and SHOW POOLS of one alias, now: {"stats": {...}, "pools": {...}}."""
        stats = next((r for r in self.admin("SHOW STATS") if r["database"] == name), {})
        pools = next((r for r in self.admin("SHOW POOLS") if r["database"] == name), {})
        return {"stats": stats, "pools": pools}

    def fingerprint(self) -> dict:
        return {"version": version(), "databases": {a: {"dbname": d, "pool_mode": m}
                                                    for a, (d, m) in sorted(self.databases.items())},
                "auth": {"local": "trust (private 0700 socket dir)", "tcp": "scram-sha-256"},
                "server": self.server.name}


def stop_recorded(root: Path) -> str | None:
    """A PgBouncer a killed run left in `root` (its pid file), stopped; what was done, or None."""
    try:
        pid = int((root / PID_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if "pgbouncer" not in cmdline(pid) or not pid_alive(pid):
        return None
    end_process(pid, STOP_STEPS)
    return f"stopped PgBouncer {root.name} (pid {pid})"
