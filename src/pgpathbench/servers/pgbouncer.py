"""A managed PgBouncer (Debian's `pgbouncer`, 1.18 on Debian 12) in front of a server: a managed one,
or the user's (`--server ROLE=DSN`).

It runs as the servers' OS user, never root, from its own directory in the run's server directory
(config, hba, auth file and password files 0600; log, pid file), on a free port found at start like a server's, and
dies with the tool (PDEATHSIG=SIGTERM, PgBouncer's immediate shutdown); `clean` and a resumed run stop
a killed run's pooler by its pid file (Servers.clear_leftovers), and its directory goes with the run's.

Authentication, in front of a managed server: trust on the pooler's private unix socket (0700
directory), scram-sha-256 over TCP against the server's own generated secret, kept in the auth file
(0600: its SCRAM verifier only, or the secret itself when the pooler logs in over TCP) and in a
libpq password file (0600) that TCP clients name by PGPASSFILE: never on a command line. Without TLS
the pooler reaches its server through the server's private socket (trust; the same OS user). In
front of a user's server, clients log in as the DSN's user with the DSN's password, and the pooler
logs in to the server with it: the auth file holds it (PgBouncer needs the secret itself to log in
for a client); the admin console is reached over the private socket by trust.

TLS legs (`--tls on`: `tls` set, a certificate of the run's CA for the pooler's addresses): clients
must come by TLS (client_tls_sslmode=require; they verify-full as against servers), and the pooler
reaches its server over TCP with server_tls_sslmode=verify-full against the run's CA, logging in with
the server's own secret. A run with `--tls off,on` has two poolers per server, one per value: 1.18's
TLS settings are the whole pooler's. In front of a user's server the server leg follows the DSN
(its sslmode and sslrootcert). What each leg negotiated is read per measurement: the client's from
the pooler's log (each login says its TLS), the server's from the server's pg_stat_ssl for the
backends SHOW SERVERS names (remote_pid).

Every database it serves is an alias per pool mode (`source__transaction` -> database source in
transaction mode; `source__fdw_transaction`, a pool of postgres_fdw's own): one pooler serves every
pool mode of a run. Its admin console (SHOW STATS, SHOW POOLS, SHOW SERVERS), reached over its socket,
is the tool's evidence of what it pooled.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from ..errors import ServerRefused, UserError
from ..files import write_atomically
from ..procs import OsUser, cmdline, end_process, password_env, pid_alive, write_passfile
from . import guc, tls as tls_
from .cluster import SUPERUSER, free_port, socket_dir
from .tls import ServerFiles

if TYPE_CHECKING:
    from .cluster import Cluster
    from .user import UserServer

POOL_MODES = ("session", "transaction")
PID_FILE = "pgbouncer.pid"
START_TIMEOUT_S = 20
STOP_STEPS = ((signal.SIGTERM, 10), (signal.SIGKILL, 10))   # SIGTERM: 1.18's immediate shutdown
ADMIN_DB = "pgbouncer"
# What clients send that PgBouncer 1.18 refuses to take: pgJDBC's extra_float_digits (its default, 3, is the
# server's default from 12 on), and libpq's PGOPTIONS (`options`), lost on the way: a study that needs a
# session setting through a pooler sets it on its database instead, and --set is refused with a pooler.
IGNORED_STARTUP = "extra_float_digits,options"
# 1.18 logs each client's login with its TLS: "login attempt: db=D user=U tls=TLSv1.3/TLS_AES_256_GCM_SHA384" or tls=no
_LOGIN = re.compile(r"login attempt: db=(\S+) user=\S+ tls=(\S+)")


def binary() -> str | None:
    return shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None)


def require(option: str) -> None:
    if binary() is None:
        raise UserError(f"{option} pgbouncer: needs PgBouncer (Debian's pgbouncer package); run make bootstrap "
                        "or apt-get install pgbouncer")


def refuse_session_settings(options, option: str) -> None:
    """--set with a pooler: its session settings travel as startup options, which PgBouncer drops."""
    named = sorted(guc.chosen(options))
    if named:
        raise UserError(f"--set {named[0]}: not with {option} pgbouncer, which drops the session "
                        f"settings a client sends at connection; leave --set or {option} pgbouncer out")


def check_user_dsn(dsn, option: str) -> None:
    """A pooler in front of a user's server verifies it as the DSN says: verify-ca/verify-full need the
    DSN's sslrootcert (PgBouncer has no default root certificate file as libpq has)."""
    if dsn.params.get("sslmode", "").startswith("verify") and not dsn.params.get("sslrootcert"):
        raise UserError(f"{option} pgbouncer: your server's DSN (--server {dsn.role}) has sslmode="
                        f"{dsn.params['sslmode']} without sslrootcert, which the pooler needs to verify the "
                        "server; add sslrootcert=FILE to the DSN")


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
    server: Cluster | UserServer     # the server it pools: a managed one, or the user's
    tls: ServerFiles | None = None   # its certificate: both legs TLS (clients must, it verifies its server)
    root_cert: Path | None = None    # the run's CA, which it verifies its server against (with tls)
    port: int | None = None
    databases: dict[str, tuple[str, str]] = field(default_factory=dict)   # alias -> (dbname, pool mode)
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    # -- files --------------------------------------------------------------------------------
    @property
    def sockdir(self) -> Path:
        return socket_dir(self.root)

    @property
    def login(self) -> str:
        """Who clients (and the tool, at the admin console) log in as: our superuser, or a user's
        server's DSN user (whom the pooler logs in as there)."""
        return SUPERUSER if self.server.managed else self.server.user

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
        """Where TCP clients reach it: beside a managed server, and on loopback in front of a user's."""
        return self.server.tcp_host if self.server.managed else "127.0.0.1"

    @property
    def server_ca(self) -> Path:
        """A copy of a user's server's sslrootcert the pooler (the servers' OS user) can read."""
        return self.root / "server_ca.crt"

    def _server(self, dbname: str) -> str:
        """Where and as whom it logs in to its server for `dbname`: a user's by the DSN, a managed one by
        its socket, or with TLS over TCP (with a password: the auth file's, see _make_secret)."""
        s = self.server
        if not s.managed:
            return f"host={s.tcp_host} port={s.port} dbname={s.dbname(dbname)} user={s.user}"
        if self.tls is None:
            return f"host={s.sockdir} port={s.port} dbname={dbname} user={SUPERUSER}"
        return f"host={s.self_host} port={s.port} dbname={dbname} user={SUPERUSER}"

    def tls_settings(self) -> dict[str, object]:
        """Its legs' TLS: both required and verified with `tls`; a user's server's leg as its DSN says."""
        if not self.server.managed:
            params = self.server.dsn.params
            ca = {"server_tls_ca_file": self.server_ca} if params.get("sslrootcert") else {}
            return {"server_tls_sslmode": params.get("sslmode", "prefer"), **ca}   # prefer: libpq's default
        if self.tls is None:
            return {}
        return {"client_tls_sslmode": "require", "client_tls_key_file": self.tls.key,
                "client_tls_cert_file": self.tls.cert, "server_tls_sslmode": "verify-full",
                "server_tls_ca_file": self.root_cert}

    def config(self) -> str:
        """pgbouncer.ini: the one place its settings are written."""
        dbs = "".join(f"{a} = {self._server(db)} pool_mode={mode}\n" for a, (db, mode) in sorted(self.databases.items()))
        settings = {"listen_addr": self.listen, "listen_port": self.port, "unix_socket_dir": self.sockdir,
                    "unix_socket_mode": "0700", "auth_type": "hba", "auth_hba_file": self.root / "hba.conf",
                    "auth_file": self.root / "userlist.txt", "admin_users": self.login, "stats_users": self.login,
                    "pidfile": self.root / PID_FILE, "logfile": self.logfile, "max_client_conn": 1000,
                    "default_pool_size": 100, "ignore_startup_parameters": IGNORED_STARTUP,
                    "server_lifetime": 86400, "server_idle_timeout": 0, **self.tls_settings()}
        return "[databases]\n" + dbs + "[pgbouncer]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())

    def _write_files(self) -> None:
        login = self.login
        hba = f"local all {login} trust\nhost all {login} 127.0.0.1/32 scram-sha-256\n"
        if self.server.netns:
            hba += f"host all {login} {self.server.netns['host_addr']}/32 scram-sha-256\n"
        for name, text in (("hba.conf", hba), ("pgbouncer.ini", self.config())):
            write_atomically(self.root / name, text, private=True)
            self.user.chown(self.root / name)

    def _make_secret(self) -> None:
        """The clients' secret, the server's own (a managed server's generated one, a user's DSN's), in the
        password files the tool and its clients read and in the auth file: its SCRAM verifier (computed by
        libpq) when the pooler reaches a managed server by its socket, the password itself when it logs in
        over TCP (TLS, a user's server), since PgBouncer logs in for a client with the auth file's entry (a
        verifier of other salt fails there: it passes the client's SCRAM keys on). One secret for both
        poolers of a server (TLS off and on): postgres_fdw's user mapping to them is one."""
        secret = kept = self.server.password or ""
        if self.server.managed and self.tls is None:
            with self.server.connect() as conn:
                kept = conn.pgconn.encrypt_password(secret.encode(), SUPERUSER.encode(), b"scram-sha-256").decode()
        elif not self.server.managed and self.server.dsn.params.get("sslrootcert"):
            shutil.copyfile(self.server.dsn.params["sslrootcert"], self.server_ca)
            self.user.chown(self.server_ca)
        write_atomically(self.root / "password", secret + "\n", private=True)
        write_passfile(self.passfile, secret, self.login)
        quoted = [v.replace('"', '""') for v in (self.login, kept)]
        write_atomically(self.root / "userlist.txt", '"{}" "{}"\n'.format(*quoted), private=True)
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
        return name, str(self.sockdir), self.port, self.login

    def conninfo(self, name: str, transport: str = "unix") -> str:
        """Never with the secret: over TCP a client reads it from `passfile` (client_env)."""
        host = self.sockdir if transport == "unix" else self.tcp_host
        return f"host={host} port={self.port} user={self.login} dbname={name}"

    def fdw_target(self, name: str) -> tuple[dict[str, str], str, str | None]:
        """How postgres_fdw reaches alias `name` here: server options, user, the pooler's secret."""
        return {"dbname": name}, self.login, self.password

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
        legs = {k: v for k, v in self.tls_settings().items() if k.endswith("sslmode")}
        return {"version": version(), "databases": {a: {"dbname": d, "pool_mode": m}
                                                    for a, (d, m) in sorted(self.databases.items())},
                "auth": {"local": "trust (private 0700 socket dir)", "tcp": "scram-sha-256"},
                "server": self.server.name, "tls": legs or "off (both legs plain)"}

    # -- what each leg negotiated -----------------------------------------------------------------
    def log_offset(self) -> int:
        return tls_.log_offset(self.logfile)

    def logins_seen(self, offset: int, name: str) -> list[str]:
        """The TLS of every client login to alias `name` since `offset` of its log, as tls.connections_seen
        gives a server's ('TLSv1.3 TLS_AES_256_GCM_SHA384' or 'off')."""
        with open(self.logfile, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        return [tls_.OFF if m.group(2) == "no" else m.group(2).replace("/", " ")
                for m in _LOGIN.finditer(text) if m.group(1) == name]

    def server_legs_seen(self, name: str) -> list[str]:
        """The TLS of its server connections for alias `name`, from the server's pg_stat_ssl of the backends
        SHOW SERVERS names (remote_pid): what the pooler to server leg negotiated."""
        pids = [int(r["remote_pid"]) for r in self.admin("SHOW SERVERS") if r["database"] == name]
        with self.server.connect() as conn:
            return tls_.backends_seen(conn, pids)

    def legs(self, offset: int, name: str, case_tls: str) -> dict[str, str]:
        """Both legs' TLS for a measurement since `offset`: {"tls": client's, "pooler_server_tls": server's};
        ValueError when a connection of either is not what the case says (tls.check_seen)."""
        return {"tls": tls_.check_seen(self.logins_seen(offset, name), case_tls, f"clients of PgBouncer {name}"),
                "pooler_server_tls": tls_.check_seen(self.server_legs_seen(name), case_tls,
                                                     f"PgBouncer {self.name} to its server")}


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
