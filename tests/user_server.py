"""A PostgreSQL server pgpathbench does not manage, set up as a user's would be (issue 12's tests).

Not pgpathbench's Cluster: its own initdb and postmaster (resolve(15)'s binaries, run as OsUser's
unprivileged user). It holds the "user's" data (database userdb, table public.accounts, owned by
the login role app), which a run must leave untouched, and logs every statement with its user and
database, so that a test can check what the tool did there. Roles: dba (superuser, the fixture's
own) and app (LOGIN CREATEDB NOSUPERUSER NOCREATEROLE NOREPLICATION: what a user gives the tool),
each with a random password. TCP needs scram-sha-256 (ssl=True: TLS only, plain TCP rejected);
the unix socket, in a private 0700 directory, is trust (peer would not map root, who runs the
tests, to dba). "Another host" is another loopback address (address="127.0.0.2": Linux routes all
of 127/8 to lo), enough to tell two servers apart; or, as root, a host of a test LAN (lan=, a
network namespace on a bridge: tests/user_lan.py), so that traffic crosses its veth.

What a DBA does so that a non-superuser role (app) can use an extension in the databases it
creates itself (CREATE DATABASE copies template1; databases that exist already are not changed):
  postgres_fdw (not a trusted extension) -- as a superuser, in template1:
      CREATE EXTENSION postgres_fdw;
      GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO app;
    The grant lives in template1's own pg_foreign_data_wrapper and is copied with it. app may then
    CREATE SERVER and CREATE USER MAPPING; a non-superuser's mapping must hold a password, which
    the remote server must ask for (password or scram-sha-256 in its pg_hba.conf, not trust).
  pg_stat_statements -- shared_preload_libraries = 'pg_stat_statements' (a restart), then as a
    superuser in template1: CREATE EXTENSION pg_stat_statements. Any role reads the view (others'
    query texts only with pg_read_all_stats); pg_stat_statements_reset() stays the superuser's
    unless granted (GRANT EXECUTE ON FUNCTION pg_stat_statements_reset TO app).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from decimal import Decimal
from hashlib import md5
from pathlib import Path
from typing import Iterator, NamedTuple

import psycopg
from psycopg import sql

from pgpathbench.files import write_atomically
from pgpathbench.procs import OsUser
from pgpathbench.servers.binaries import resolve

from user_lan import LanHost

DBA, APP, USERDB, ROWS = "dba", "app", "userdb", 1000
_DATA_SQL = ("INSERT INTO public.accounts SELECT i, 'owner-' || lpad((i % 37)::text, 2, '0'), i * 1.25 "
             f"FROM generate_series(1, {ROWS}) i")
_FINGERPRINT_SQL = ("SELECT count(*), md5(string_agg(id || ':' || owner || ':' || balance, ',' ORDER BY id)) "
                    "FROM public.accounts")
# '%m [%p] %u@%d ' then 'LOG:  statement: ...' (simple protocol) or 'LOG:  execute <name>: ...'
# (extended); a statement's further lines follow, each starting with a tab.
_STATEMENT = re.compile(r"^.*? \[\d+\] (\S*)@(\S*) LOG:  (?:statement|execute [^:]*): (.*)$")
_USERS = "nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"   # not the system's schemas
_SESSION = re.compile(r"(BEGIN|START TRANSACTION|COMMIT|END|ROLLBACK|SET|RESET|SHOW|DISCARD)\b", re.I)


Statement = NamedTuple("Statement", [("user", str), ("database", str), ("text", str)])


def expected_fingerprint() -> tuple[int, str]:
    """user_data_fingerprint() of the untouched data, computed here rather than read back."""
    rows = ",".join(f"{i}:owner-{i % 37:02d}:{Decimal(i) * Decimal('1.25')}" for i in range(1, ROWS + 1))
    return ROWS, md5(rows.encode()).hexdigest()


class UserServer:
    """with UserServer(root) as s: ... -- initdb, start, the user's roles and data; then stop and remove."""

    def __init__(self, root: Path, name: str = "user-server", address: str = "127.0.0.1",
                 ssl: bool = False, pg_stat_statements: bool = False, lan: LanHost | None = None):
        """lan: on that host of a test LAN (root only), listening on its LAN address, port 5432 (so
        traffic to it, the tool's and another server's postgres_fdw, crosses its veth)."""
        self.dir, self.address, self.ssl, self.pg_stat_statements = Path(root) / name, address, ssl, pg_stat_statements
        self.netns = lan.netns if lan is not None else None
        if lan is not None:
            self.address = lan.address
        self.bins, self.user = resolve(15), OsUser.for_servers()
        self.data, self.logfile = self.dir / "data", self.dir / "server.log"
        self.root_cert, self.pgpass_file = self.dir / "root.crt", self.dir / "pgpass"
        self.port: int | None = None
        self.sockdir: Path | None = None
        self._passwords = {DBA: secrets.token_urlsafe(24), APP: secrets.token_urlsafe(24)}
        self._proc: subprocess.Popen | None = None
        self._made_dir, self._log_mark = False, 0

    def __enter__(self) -> "UserServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "UserServer":
        try:
            self._initdb()
            self._configure()
            self._launch()
            write_atomically(self.pgpass_file, "".join(
                f"{self.address}:{self.port}:*:{u}:{p}\n" for u, p in self._passwords.items()), private=True)
            self._set_up_as_dba()
        except BaseException:
            self.stop()
            raise
        self.mark_log()     # the set-up's own statements (app creating its data) are not a run's
        return self

    def _initdb(self) -> None:
        self.dir.mkdir(parents=True)        # never an existing directory: stop() removes it
        self._made_dir = True
        self.sockdir = Path(tempfile.mkdtemp(prefix="pgpb-user-"))   # short: sun_path is 108 bytes
        for d in (self.dir, self.sockdir):
            os.chmod(d, 0o700)
            self.user.chown(d)
        pwfile = self.dir / "initdb.pw"     # the password never on a command line (/proc is world-readable)
        write_atomically(pwfile, self._passwords[DBA] + "\n", private=True)
        self.user.chown(pwfile)
        try:
            res = self.user.run([str(self.bins.path("initdb")), "-D", str(self.data), "-U", DBA,
                                 f"--pwfile={pwfile}", "--auth-local=trust", "--auth-host=scram-sha-256",
                                 "-E", "UTF8", "--locale=C", "--no-sync"], capture_output=True, text=True)
        finally:
            pwfile.unlink(missing_ok=True)
        if res.returncode != 0:
            raise RuntimeError(f"initdb failed: {res.stderr.strip()}")

    def _configure(self) -> None:
        conf = {"listen_addresses": self.address, "unix_socket_directories": str(self.sockdir),
                "unix_socket_permissions": "0700", "logging_collector": "off", "log_destination": "stderr",
                "log_statement": "all", "log_line_prefix": "%m [%p] %u@%d "}
        if self.pg_stat_statements:
            conf["shared_preload_libraries"] = "pg_stat_statements"
            # On 15 each foreign scan's DECLARE keeps its constant: a 1 s FDW run adds up to ~4,000
            # entries here, and at the default 5,000 the first external pass was evicted or not by
            # the shuffled order (4 failures in 10 here). With 20,000, 6 of 6 passed; eviction is
            # still said after.
            conf["pg_stat_statements.max"] = "20000"
        if self.netns:      # on a host of its own, who connects from where (clients_seen()) tells the path
            conf["log_connections"] = "on"
        tcp = "host all all 0.0.0.0/0 scram-sha-256\n"    # connections to 127.0.0.2 come from 127.0.0.1
        if self.ssl:
            conf["ssl"] = "on"                              # server.crt and server.key in the data dir
            tcp = "hostnossl all all 0.0.0.0/0 reject\nhostssl all all 0.0.0.0/0 scram-sha-256\n"
            self._make_certificate()
        with open(self.data / "postgresql.conf", "a") as f:   # appending keeps the file postgres's
            f.write("\n# user-server fixture\n" + "".join(f"{k} = '{v}'\n" for k, v in conf.items()))
        (self.data / "pg_hba.conf").write_text("local all all trust\n" + tcp)

    def _make_certificate(self) -> None:
        crt, key = self.data / "server.crt", self.data / "server.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={self.address}",
                        "-addext", f"subjectAltName=IP:{self.address}", "-days", "2",
                        "-keyout", str(key), "-out", str(crt)], check=True, capture_output=True)
        for f in (crt, key):
            os.chmod(f, 0o600)              # the server refuses a key others can read
            self.user.chown(f)
        shutil.copyfile(crt, self.root_cert)

    def _launch(self) -> None:
        for _ in range(5):                  # a port taken between probe and bind is retried
            self.port = 5432 if self.netns else _free_port(self.address)   # a namespace's stack is its own
            with open(self.logfile, "ab") as log:   # the postmaster's stderr: the server log
                # SIGINT (fast shutdown) when the test process dies, however it dies.
                self._proc = self.user.spawn([str(self.bins.path("postgres")), "-D", str(self.data),
                                              "-p", str(self.port)], stdout=log, stderr=subprocess.STDOUT,
                                             netns=self.netns)
            if self._ready():
                return
            if "could not bind" not in self.logfile.read_text(errors="replace"):
                break
        raise RuntimeError(f"server did not start:\n{self.logfile.read_text(errors='replace')[-3000:]}")

    def _ready(self, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._proc.poll() is None:
            try:
                self.connect(DBA, "postgres", connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        return False

    def _set_up_as_dba(self) -> None:
        with self.connect(DBA, "postgres") as c:
            c.execute("SET log_statement = 'none'")          # keeps app's password out of the log
            c.execute(sql.SQL("CREATE ROLE app LOGIN CREATEDB NOSUPERUSER NOCREATEROLE NOREPLICATION "
                              "PASSWORD {}").format(sql.Literal(self._passwords[APP])))
            c.execute("RESET log_statement")
            c.execute("CREATE DATABASE userdb OWNER app")   # before template1 gets extensions
        with self.connect(APP, USERDB) as c:
            c.execute("CREATE TABLE public.accounts (id int PRIMARY KEY, owner text, balance numeric)")
            c.execute(_DATA_SQL)
        with self.connect(DBA, "template1") as c:           # closed: CREATE DATABASE needs template1 idle
            c.execute("CREATE EXTENSION postgres_fdw")
            c.execute("GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO app")
            if self.pg_stat_statements:
                c.execute("CREATE EXTENSION pg_stat_statements")

    def stop(self) -> None:
        """Fast shutdown, waited for, then its directories removed."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            for sig, wait in ((signal.SIGINT, 60), (signal.SIGQUIT, 10), (signal.SIGKILL, 10)):
                proc.send_signal(sig)
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._made_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        if self.sockdir is not None:
            shutil.rmtree(self.sockdir, ignore_errors=True)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def password(self, user: str = APP) -> str:
        return self._passwords[user]

    def dsn(self, user: str = APP, dbname: str = USERDB) -> str:
        """libpq conninfo, without the password (from pgpass_file, by PGPASSFILE or passfile=)."""
        tls = f" sslmode=verify-full sslrootcert={self.root_cert}" if self.ssl else ""
        return f"host={self.address} port={self.port} user={user} dbname={dbname}{tls}"

    def connect(self, user: str = APP, dbname: str = USERDB, **kw) -> psycopg.Connection:
        return psycopg.connect(self.dsn(user, dbname), password=self._passwords[user], autocommit=True, **kw)

    def ours(self, prefix: str = "pgpathbench") -> list[str]:
        """The databases whose names start with the tool's prefix (none before or after a run)."""
        with self.connect(DBA, "postgres") as c:
            return [r[0] for r in c.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)",
                                            (prefix,))]

    def user_data_fingerprint(self) -> tuple[int, str]:
        """(rows, md5 of every row in id order) of userdb's accounts, read as dba."""
        with self.connect(DBA, USERDB) as c:
            return tuple(c.execute(_FINGERPRINT_SQL).fetchone())

    def known_objects(self) -> dict:
        """Databases, roles, tablespaces; per database (as dba) schemas, extensions, foreign servers
        and relations outside the system schemas: compare before and after a run."""
        q = lambda c, s: [r[0] for r in c.execute(s)]   # noqa: E731
        with self.connect(DBA, "postgres") as c:
            found = {"databases": q(c, "SELECT datname FROM pg_database ORDER BY 1"),
                     "roles": q(c, "SELECT rolname FROM pg_roles ORDER BY 1"),
                     "tablespaces": q(c, "SELECT spcname FROM pg_tablespace ORDER BY 1")}
            reachable = q(c, "SELECT datname FROM pg_database WHERE datallowconn ORDER BY 1")
        for db in reachable:
            with self.connect(DBA, db) as c:
                found[db] = {
                    "schemas": q(c, "SELECT nspname FROM pg_namespace ORDER BY 1"),
                    "extensions": q(c, "SELECT extname FROM pg_extension ORDER BY 1"),
                    "foreign_servers": q(c, "SELECT srvname FROM pg_foreign_server ORDER BY 1"),
                    "relations": q(c, "SELECT nspname || '.' || relname FROM pg_class JOIN pg_namespace n "
                                      f"ON n.oid = relnamespace WHERE {_USERS} ORDER BY 1")}
        return found

    def assert_as_found(self, known_before: dict) -> None:
        """After a run: the user's rows and catalog (known_objects() before it) as they were, no
        database of the tool left, no statement of its login outside its own databases."""
        assert self.user_data_fingerprint() == expected_fingerprint()
        assert self.known_objects() == known_before
        assert self.ours() == []
        assert self.foreign_statements() == []

    def mark_log(self) -> None:
        """statements_log() starts here (start() marks the end of the fixture's own set-up)."""
        self._log_mark = self.logfile.stat().st_size

    def _log_since_mark(self, since_mark: bool = True) -> str:
        with open(self.logfile, "rb") as f:
            f.seek(self._log_mark if since_mark else 0)
            return f.read().decode(errors="replace")

    def clients_seen(self) -> set[str]:
        """The addresses TCP connections came from since the mark (a server on a LAN host logs them)."""
        return set(re.findall(r"LOG:  connection received: host=(\S+) port=", self._log_since_mark()))

    def statements_log(self, since_mark: bool = True) -> list[Statement]:
        """The log's statements (log_statement = 'all') as (user, database, statement text)."""
        text = self._log_since_mark(since_mark)
        found: list[Statement] = []
        current = False                     # whether the last prefixed line was a statement
        for line in text[:text.rfind("\n") + 1].splitlines():   # whole lines only: the server may be writing
            if line.startswith("\t") and current:
                found[-1] = found[-1]._replace(text=found[-1].text + "\n" + line[1:])
                continue
            m = _STATEMENT.match(line)
            current = m is not None
            if m:
                found.append(Statement(*m.groups()))
        return found

    def foreign_statements(self, created_prefix: str = "pgpathbench_") -> list[Statement]:
        """app's statements in databases whose names do not start with created_prefix (the tool's
        own), except those that change nothing there and read nothing of the user's:
          - session and transaction control (BEGIN/COMMIT/ROLLBACK, SET/RESET/SHOW, DISCARD): a
            connection's own state, gone when it closes;
          - CREATE/ALTER/DROP DATABASE of a name with the prefix: issued from another database;
          - a SELECT (no INTO, no FOR UPDATE/SHARE) naming no relation or function of the user's
            in that database (version(), settings, pg_database, ...): the checks before a run.
            Function calls are matched by name only; a catalog function with side effects (say
            pg_terminate_backend) would pass."""
        prefix = re.escape(created_prefix)
        mine = re.compile(rf'(CREATE|ALTER|DROP) DATABASE (IF EXISTS )?"?{prefix}', re.I)
        users_names: dict[str, set[str]] = {}
        foreign = []
        for st in self.statements_log():
            text = " ".join(st.text.split())
            if st.user != APP or st.database.startswith(created_prefix) or _SESSION.match(text) or mine.match(text):
                continue
            if re.match(r"SELECT\b", text, re.I) and not re.search(r"\bINTO\b|\bFOR (UPDATE|SHARE|NO KEY|KEY)\b",
                                                                 text, re.I):
                if st.database not in users_names:
                    users_names[st.database] = self._user_names(st.database)
                if not users_names[st.database] & set(re.findall(r"[a-z_][a-z0-9_$]*", text.lower())):
                    continue
            foreign.append(st)
        return foreign

    def _user_names(self, dbname: str) -> set[str]:
        """Names of the relations and functions of a database outside the system schemas."""
        try:
            with self.connect(DBA, dbname) as c:
                return {r[0] for r in c.execute(
                    f"SELECT relname FROM pg_class JOIN pg_namespace n ON n.oid = relnamespace WHERE {_USERS} "
                    f"UNION SELECT proname FROM pg_proc JOIN pg_namespace n ON n.oid = pronamespace WHERE {_USERS}")}
        except psycopg.OperationalError:
            return set()                    # gone: nothing of the user's left to read there


@contextlib.contextmanager
def source_and_external(root: Path) -> Iterator[tuple[UserServer, UserServer]]:
    """The two servers of a user's the issue 12 tests run against: on 127.0.0.2 (scram,
    pg_stat_statements in template1) and on 127.0.0.3 (TLS only, verify-full)."""
    with UserServer(root, "src", "127.0.0.2", pg_stat_statements=True) as src, \
            UserServer(root, "ext", "127.0.0.3", ssl=True) as ext:
        yield src, ext


def use_passfile(monkeypatch, path: Path, *servers: UserServer) -> None:
    """The servers' passwords (app's and dba's) in one libpq password file at `path`, named by
    PGPASSFILE for the rest of the test (its lines are per host:port)."""
    write_atomically(path, "".join(s.pgpass_file.read_text() for s in servers), private=True)
    monkeypatch.setenv("PGPASSFILE", str(path))


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def assert_left_as_found(servers, before: dict, ws: Path) -> None:
    """After a run: each server as found (assert_as_found, known_objects() by dsn() before it), and
    the workspace's ledger empty."""
    for s in servers:
        s.assert_as_found(before[s.dsn()])
    assert json.loads((ws / "user-objects.json").read_text()) == []


def assert_no_secret(secrets, places: dict[str, str]) -> None:
    """No password in any of the places (name -> what a user could read there)."""
    for secret in secrets:
        for where, content in places.items():
            assert secret not in content, where
