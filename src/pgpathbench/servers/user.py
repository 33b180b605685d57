"""A server that already exists (`--server ROLE=DSN`): the user's PostgreSQL, touched only inside
objects pgpathbench creates and marks as its own.

What we write there: databases `pgpathbench_<tag>_<name>` (CREATE DATABASE, then a COMMENT naming
the run), and everything inside them. Each is recorded in the workspace's ledger (ledger.py)
before it is made, so that `clean` finds what a killed run left. Nothing else: no ALTER SYSTEM,
no ALTER DATABASE or ROLE on anything not ours, no VACUUM, TRUNCATE, DROP or ANALYZE outside our
databases. Connections to the DSN's own database (to read catalogs and create ours) are
read-only by default_transaction_read_only, so that a slip would fail rather than write.

The DSN is completed from the user's libpq environment once, when it is parsed (clientenv.py:
where the server is, who logs in and how; the DSN's own parameters win), and used as it then is:
every connection to it, ours and our programs', gets explicit parameters in an environment
without the user's libpq variables. The password (the DSN's, PGPASSWORD's, or the one libpq read
from PGPASSFILE's file or ~/.pgpass) is held in memory, given to in-process connections as a
keyword, to child programs by a 0600 password file (PGPASSFILE) and to postgres_fdw by the user
mapping it needs; never in a conninfo we show, store or put on a command line.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .. import clientenv, validate
from ..errors import UserError
from ..procs import password_env, write_passfile
from ..evidence import Watched
from .guc import pgoptions
from .ledger import Ledger, MARK

CONNECT_TIMEOUT_S = 10
SECRET_KEYS = ("password", "sslpassword")
# What postgres_fdw's foreign server takes from the user's DSN (besides host, port, dbname): TLS.
FDW_KEYS = ("sslmode", "sslrootcert", "sslcrl", "sslcompression", "sslsni", "requiressl",
            "channel_binding", "gssencmode", "krbsrvname", "target_session_attrs")


@dataclass(frozen=True)
class UserDsn:
    """One `--server ROLE=DSN`: the role, the DSN's parameters without a secret, and the password."""
    role: str
    params: Mapping[str, str]
    password: str | None = field(default=None, repr=False)
    fdw_address: tuple[str, int] | None = None    # --fdw-host: where postgres_fdw reaches it instead
    passfile: str | None = None                   # the user's password file (the DSN's or PGPASSFILE)
    from_env: tuple[str, ...] = ()                # the user's libpq variables that completed the DSN

    @property
    def shown(self) -> str:
        """The DSN as we show, store and record it: without any password."""
        return make_conninfo(**self.params)

    @property
    def host(self) -> str:
        return self.params.get("host") or self.params.get("hostaddr") or "localhost"

    @property
    def port(self) -> int:
        return int(self.params.get("port") or "5432")

    @property
    def dbname(self) -> str | None:
        return self.params.get("dbname")

    @property
    def over_socket(self) -> bool:
        """Whether libpq reaches it by a unix socket: a host that is a directory (or @abstract), or
        neither host nor hostaddr (libpq's default socket); hostaddr always means TCP."""
        if self.params.get("hostaddr"):
            return False
        host = self.params.get("host", "").split(",")[0]
        return not host or host.startswith(("/", "@"))

    def conninfo(self, dbname: str | None = None, **extra: str) -> str:
        params = {**self.params, **({"dbname": dbname} if dbname else {}), **extra}
        return make_conninfo(**params)

    def connect(self, dbname: str | None = None, read_only: bool = False, untimed: bool = False,
                **kw) -> psycopg.Connection:
        """A new autocommit connection (the DSN's database unless dbname); read_only: nothing
        written however it is used (the user's own database); untimed: free of the role's
        statement and lock timeouts from its start (a SET after connecting runs under them, and
        a 1ms timeout cancelled it now and then)."""
        ours = {**({"default_transaction_read_only": "on"} if read_only else {}),
                **({"statement_timeout": "0", "lock_timeout": "0"} if untimed else {})}
        # Appended to the DSN's own options (a later -c wins), never in their place.
        options = " ".join(filter(None, [self.params.get("options"), pgoptions(ours)]))
        extra = {"options": options} if ours else {}
        if self.password is not None:
            kw["password"] = self.password
        elif self.passfile is not None:
            kw["passfile"] = self.passfile
        return psycopg.connect(self.conninfo(dbname, **extra), autocommit=True,
                               connect_timeout=CONNECT_TIMEOUT_S, **kw)


def parse_server(text: str, roles: Mapping[str, object] | None = None, of: str = "this study") -> UserDsn:
    """`ROLE=DSN` of --server (a libpq conninfo or URI), completed from the user's libpq environment
    (clientenv.complete). The password is taken out of it (the DSN's, else PGPASSWORD's), and the
    password file (the DSN's passfile, else PGPASSFILE's): libpq reads it, or ~/.pgpass, itself.
    Error messages never repeat the DSN's text."""
    role, sep, dsn = text.partition("=")
    role = role.strip()
    if not sep or not role or not dsn.strip():
        raise UserError("--server: give ROLE=DSN, e.g. --server source='host=db1 dbname=app user=bench'")
    if roles is not None and role not in roles:
        raise UserError(f"--server {role}: not a role of {of}; choose from {', '.join(roles)} "
                        "('pgpathbench studies' lists each study's roles)")
    try:
        params = conninfo_to_dict(dsn.strip())
    except psycopg.ProgrammingError:
        raise UserError(f"--server {role}: not a libpq connection string (key=value ...) or URI "
                        "(postgresql://user@host:port/dbname); check its quoting") from None
    params, from_env = clientenv.complete({k: str(v) for k, v in params.items()})
    password, passfile = params.pop("password", None) or None, params.pop("passfile", None) or None
    for key in SECRET_KEYS[1:]:
        params.pop(key, None)
    return UserDsn(role, params, password, passfile=passfile, from_env=from_env)


def passwords_given(given: list[str] | None) -> list[str]:
    """The roles whose --server DSN holds a password (on our command line, for all to see)."""
    return [t.partition("=")[0].strip() for t in given or () if "password" in conninfo_to_dict(t.partition("=")[2])]


def parse_servers(given: list[str] | None, roles: Mapping[str, object], of: str = "this study") -> dict[str, UserDsn]:
    out: dict[str, UserDsn] = {}
    for text in given or ():
        dsn = parse_server(text, roles, of)
        if dsn.role in out:
            raise UserError(f"--server {dsn.role}: given twice; name each role once")
        out[dsn.role] = dsn
    return out


class UserServer:
    """What a study sees of a user server: the same calls as a managed Cluster (connect, execute,
    create_database, watched, fingerprint...), with its databases named ours."""
    managed = False
    netns = None          # its network stack is its own: nothing of ours to shape
    running = True        # its life is not ours to watch
    tls = None            # no certificate of ours: its TLS is its DSN's (--tls is refused)

    def __init__(self, dsn: UserDsn, run_id: str, root: Path, ledger: Ledger):
        self.dsn, self.run_id, self.ledger = dsn, run_id, ledger
        self.name = dsn.role
        self.tag = run_id.rsplit("-", 1)[-1][:6].lower()
        self.root = root
        self._password = dsn.password
        self.created: list[str] = []

    # -- where it is -------------------------------------------------------------------------
    @property
    def tcp_host(self) -> str:
        return self.dsn.host

    @property
    def port(self) -> int:
        return self.dsn.port

    @property
    def transports(self) -> tuple[str, ...]:
        """How clients on this machine reach it: its DSN's way only (we have no socket of our own there)."""
        return ("unix",) if self.dsn.over_socket else ("tcp",)

    @functools.cached_property
    def user(self) -> str:
        with self.dsn.connect(read_only=True) as conn:
            return conn.info.user

    @property
    def self_host(self) -> str:
        """Where the server reaches itself over TCP (fdw_local): its DSN's address, or --fdw-host's."""
        return self.dsn.fdw_address[0] if self.dsn.fdw_address else self.tcp_host

    def reached_at(self, link) -> tuple[str, int]:
        """Where postgres_fdw on another server reaches this one through `link`: --fdw-host's address
        on the direct path (the address this machine uses may not be the FDW side's)."""
        if self.dsn.fdw_address and link.kind.startswith("direct"):
            return self.dsn.fdw_address
        return link.host, link.port

    def client_args(self, name: str) -> tuple[str, str, int, str]:
        """dbname (a conninfo, TLS options included, no password), host, port, user for a client program."""
        return self.conninfo(name), self.tcp_host, self.port, self.user

    def dbname(self, name: str) -> str:
        """Our database for the study's name ('source' -> pgpathbench_1a2b_source)."""
        return f"pgpathbench_{self.tag}_{name}"[:63]

    def _real(self, name: str) -> str | None:
        return None if name == "postgres" else self.dbname(name)

    # -- secrets -----------------------------------------------------------------------------
    @property
    def password(self) -> str | None:
        """The password in force (libpq tells which it used, ~/.pgpass included)."""
        if self._password is None:
            with self.dsn.connect(read_only=True) as conn:
                self._password = conn.info.password or None
        return self._password

    @property
    def passfile(self) -> Path | None:
        """A 0600 libpq password file for child programs (PGPASSFILE), when there is a password."""
        if self.password is None:
            return None
        path = self.root / f"{self.name}.pgpass"
        if not path.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            write_passfile(path, self.password)
        return path

    def client_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        return password_env(self.passfile, base)

    # -- connecting ----------------------------------------------------------------------------
    def conninfo(self, dbname: str = "postgres", transport: str = "tcp") -> str:
        """Never with the password. transport is the DSN's own, whatever is asked."""
        return self.dsn.conninfo(self._real(dbname))

    def connect(self, dbname: str = "postgres", **kw) -> psycopg.Connection:
        """Our database `dbname`; 'postgres' is the DSN's own database, read-only."""
        real = self._real(dbname)
        return self.dsn.connect(real, read_only=real is None, **kw)

    def execute(self, dbname: str, *statements: str) -> None:
        with self.connect(dbname) as conn:
            for statement in statements:
                conn.execute(statement)

    def create_database(self, name: str) -> None:
        """CREATE DATABASE pgpathbench_<tag>_<name>, recorded in the ledger first, marked by a COMMENT."""
        real = self.dbname(name)
        if real in self.created:
            return
        self.ledger.add(self.run_id, self.name, self.dsn.shown, real)
        with self.dsn.connect() as conn:
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(real)))
            except psycopg.Error:
                self.ledger.forget(self.run_id, real, self.dsn.shown)   # the name may be someone else's
                raise
        with self.dsn.connect(real) as conn:   # from inside it: nothing but CREATE runs in the user's database
            conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(real),
                                                                       sql.Literal(self.mark(real))))
        self.created.append(real)

    # -- the DSN's own database (a Citus coordinator's: its metadata is per database) ----------------
    def connect_own(self, **kw) -> psycopg.Connection:
        """The DSN's own database, writable: only for a role whose objects are schemas of ours there
        (record_schema), never anything else of the user's."""
        return self.dsn.connect(**kw)

    def mark(self, name: str) -> str:
        """The COMMENT that marks an object of ours (a database, a schema) as this run's."""
        return f"{MARK} {self.run_id}, role {self.name}: removed when the run ends, or by 'pgpathbench clean'"

    def record_schema(self, schema: str) -> None:
        """A schema of ours in the DSN's own database, recorded in the ledger before it is made (the
        study makes it, with COMMENT ON SCHEMA ... IS mark()); dropped with the databases."""
        self.ledger.add(self.run_id, self.name, self.dsn.shown, self.dsn.dbname, schema=schema)
        self.created.append(schema)

    def watched_own(self, role: str, host: str | None = None, port: int | None = None) -> Watched:
        """The DSN's own database as the evidence collector reads it (our schemas' activity); at
        host:port instead, the same database and login on another node of the user's (a Citus worker)."""
        # another node: the password libpq found for the DSN (the nodes of a Citus cluster share a role's)
        dsn = self.dsn if host is None else replace(self.dsn, params={**self.dsn.params, "host": host,
                                                                      "port": str(port)}, password=self.password)
        with self.dsn.connect(read_only=True) as conn:
            own = conn.info.dbname
        return Watched(role, lambda: dsn.connect(read_only=True), None, (own,))

    def watched(self, role: str, *databases: str) -> Watched:
        """Read through our first database (pg_stat_statements is there if template1 has it); its
        processes are not ours to see."""
        first = databases[0] if databases else "postgres"
        return Watched(role, lambda: self.connect(first), None, tuple(self.dbname(d) for d in databases))

    def fdw_target(self, name: str) -> tuple[dict[str, str], str, str | None]:
        """How postgres_fdw reaches our database `name` here: server options, user, password."""
        options = {k: v for k, v in self.dsn.params.items() if k in FDW_KEYS}
        return {**options, "dbname": self.dbname(name)}, self.user, self.password

    # -- the end -------------------------------------------------------------------------------
    def drop_databases(self) -> list[str]:
        """DROP every database and schema of ours here (ledger entries of this run and role)."""
        return self.ledger.drop(self.run_id, self.name, self.dsn.connect)

    def exit_reason(self) -> None:
        return None

    def fingerprint(self) -> dict:
        """From SQL only: what the server says of itself; the host's facts are unknown from here."""
        with self.dsn.connect(read_only=True) as conn:
            version, num, addr, port, superuser = conn.execute(
                "SELECT version(), current_setting('server_version_num')::int, host(inet_server_addr()), "
                "inet_server_port(), current_setting('is_superuser')").fetchone()
            settings = dict(conn.execute(
                "SELECT name, setting FROM pg_settings WHERE source NOT IN ('default', 'override') "
                "ORDER BY name").fetchall())
            extensions = dict(conn.execute("SELECT name, default_version FROM pg_available_extensions "
                                           "ORDER BY name").fetchall())
            auth = self._auth(conn)
        return {"version": version, "major": num // 10000, "settings": settings, "user_server": True,
                "dsn": self.dsn.shown, "address": f"{addr}:{port}" if addr else "unix socket",
                "superuser": superuser == "on", "available_extensions": extensions, "auth": auth,
                "host": "unknown (a user server: its machine is not visible from here)"}

    def _auth(self, conn: psycopg.Connection) -> dict[str, str]:
        """Which of the user's sources gave the password and the TLS settings (names, never a secret)."""
        dsn = self.dsn
        if dsn.password is not None:
            password = "PGPASSWORD" if "PGPASSWORD" in dsn.from_env else "the DSN"
        elif not conn.pgconn.used_password:
            password = "none asked"
        else:
            password = ("PGPASSFILE's file" if "PGPASSFILE" in dsn.from_env else
                        "the DSN's passfile" if dsn.passfile else "~/.pgpass")
        tls = f"{'on' if conn.pgconn.ssl_in_use else 'off'} (sslmode {dsn.params.get('sslmode', 'prefer')})"
        return {"password": password, "tls": tls, "from the environment": ", ".join(dsn.from_env) or "nothing"}


def parse_fdw_hosts(given: list[str] | None, dsns: Mapping[str, UserDsn]) -> dict[str, UserDsn]:
    """--fdw-host ROLE=HOST[:PORT] onto the role's --server (the DSN's port unless given)."""
    out = dict(dsns)
    for text in given or ():
        role, sep, address = text.partition("=")
        if not sep or not role.strip() or not address.strip():
            raise UserError("--fdw-host: give ROLE=HOST[:PORT], e.g. --fdw-host source=10.0.0.5:5432")
        role = role.strip()
        try:
            host, port = validate.host_port(address)
        except ValueError as e:
            raise UserError(f"--fdw-host {validate.printable(role[:40])}: {e}; give ROLE=HOST[:PORT], e.g. "
                            "--fdw-host source=10.0.0.5:5432 or source=[fd00::5]:5432") from None
        if role not in dsns:
            raise UserError(f"--fdw-host {role}: give --server {role}=DSN too (managed servers are reached where "
                            "they listen)")
        if out[role].fdw_address is not None:
            raise UserError(f"--fdw-host {role}: given twice; name each role once")
        out[role] = replace(dsns[role], fdw_address=(host, port or dsns[role].port))
    return out


def stored(dsns: Mapping[str, UserDsn]) -> dict:
    """What a run stores of its user servers (for resume and the report): DSNs without a password."""
    return {"servers": {r: d.shown for r, d in dsns.items()},
            "fdw_hosts": {r: f"{d.fdw_address[0]}:{d.fdw_address[1]}" for r, d in dsns.items() if d.fdw_address}}


def from_stored(params: Mapping) -> dict[str, UserDsn]:
    """A stored run's user servers, for resume: the password from PGPASSWORD or ~/.pgpass now."""
    dsns = {r: parse_server(f"{r}={shown}") for r, shown in (params.get("servers") or {}).items()}
    return parse_fdw_hosts([f"{r}={a}" for r, a in (params.get("fdw_hosts") or {}).items()], dsns)
