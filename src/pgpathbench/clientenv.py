"""The user's libpq and driver environment: kept from everything the tool connects to its own
servers with, honoured for the user's servers in what reaches and authenticates them.

libpq reads PGHOST, PGPASSWORD, PGSSLMODE, PGOPTIONS, PGSERVICE... from the process environment for
every connection that does not set the parameter itself, in this process (psycopg) and in every
program we start (psql, pgbench, the native clients, postgres_fdw inside a server), and it prefers
PGPASSWORD to the password file we name. The JVM reads JAVA_TOOL_OPTIONS, unixODBC ODBCSYSINI, the
dynamic linker LD_PRELOAD. So the CLI takes all of them out of its own environment first
(`isolated()`), and every program it starts gets `child_env()`: ours without them. What the user
set is kept here, for the user's own servers (--server, --results-dsn) only:

- HONOURED: where the server is, who logs in and how (password, TLS, GSS) complete the server's
  DSN as libpq would (the DSN's own parameters win); the run records which variables it used.
- REFUSED (with --server): variables that would change the sessions measured there, or that not
  every client we run can honour; one line naming the variable, exit 2.
- Anything else (PGAPPNAME, PGCONNECT_TIMEOUT, the drivers' variables...): never passed on; the
  fingerprint names them (`ignored()`).
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterable, Iterator, Mapping

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .errors import UserError

OURS = ("PGPATHBENCH_", "PGPB_")     # the tool's own variables (workspace, the ODBC driver's path)
# libpq's variable -> its connection parameter, for what a user server's DSN may leave to the environment.
HONOURED = {"PGHOST": "host", "PGHOSTADDR": "hostaddr", "PGPORT": "port", "PGDATABASE": "dbname",
            "PGUSER": "user", "PGPASSWORD": "password", "PGPASSFILE": "passfile",
            "PGCHANNELBINDING": "channel_binding", "PGSSLMODE": "sslmode", "PGSSLCOMPRESSION": "sslcompression",
            "PGSSLCERT": "sslcert", "PGSSLKEY": "sslkey", "PGSSLROOTCERT": "sslrootcert", "PGSSLCRL": "sslcrl",
            "PGSSLCRLDIR": "sslcrldir", "PGSSLSNI": "sslsni", "PGREQUIREPEER": "requirepeer",
            "PGSSLMINPROTOCOLVERSION": "ssl_min_protocol_version",
            "PGSSLMAXPROTOCOLVERSION": "ssl_max_protocol_version", "PGGSSENCMODE": "gssencmode",
            "PGKRBSRVNAME": "krbsrvname", "PGGSSLIB": "gsslib"}
_SESSION = "it would change the sessions measured there"
_NEWER = "libpq 15 (psql, pgbench, the C and ODBC clients) does not know it, so not every client would honour it"
REFUSED = {"PGOPTIONS": f"{_SESSION}; give session settings by --set",
           "PGTARGETSESSIONATTRS": f"{_SESSION} (which of the DSN's hosts answers)",
           "PGLOADBALANCEHOSTS": f"{_SESSION} (which of the DSN's hosts answers)",
           "PGDATESTYLE": _SESSION, "PGTZ": _SESSION, "PGGEQO": _SESSION,
           "PGCLIENTENCODING": f"{_SESSION} (pgpathbench's clients read UTF8)",
           "PGSERVICE": "a service can set any parameter, read by libpq 15 and 18 from different files; give the "
                        "server's parameters in the DSN",
           "PGSERVICEFILE": "a service file can set any parameter; give the server's parameters in the DSN",
           "PGSYSCONFDIR": "its service file can set any parameter; give the server's parameters in the DSN",
           "PGREQUIRESSL": "libpq 16+ no longer knows it; set PGSSLMODE=require instead",
           **dict.fromkeys(("PGREQUIREAUTH", "PGSSLCERTMODE", "PGSSLNEGOTIATION", "PGGSSDELEGATION",
                            "PGMINPROTOCOLVERSION", "PGMAXPROTOCOLVERSION"), _NEWER)}
# What else would change what the tool's clients measure: their drivers' and runtimes' set-up.
DRIVERS = frozenset({"ODBCINI", "ODBCSYSINI", "ODBCINSTINI", "ODBCSEARCH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
                     "JDK_JAVA_OPTIONS", "CLASSPATH", "PSYCOPG_IMPL", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"})

_taken: dict[str, str] | None = None   # what isolated() took out of os.environ, while it holds


def is_users(name: str) -> bool:
    """A variable of the user's libpq, PostgreSQL programs or drivers (not the tool's own)."""
    return (name.startswith(("PG", "PSQL")) and not name.startswith(OURS)) or name in DRIVERS


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """This process without the user's variables (libpq in-process reads os.environ), restored after."""
    global _taken
    taken = {k: v for k, v in os.environ.items() if is_users(k)}
    for name in taken:
        del os.environ[name]
    _taken = taken
    try:
        yield
    finally:
        _taken = None
        os.environ.update(taken)


def users() -> Mapping[str, str]:
    """The user's variables: as isolated() found them, else (a library use) the environment's now."""
    return dict(_taken) if _taken is not None else {k: v for k, v in os.environ.items() if is_users(k)}


def child_env(**extra: str) -> dict[str, str]:
    """The environment of every program the tool starts: its own without the user's variables, plus extra."""
    return {**{k: v for k, v in os.environ.items() if not is_users(k)}, **extra}


def complete(params: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """A user server's DSN parameters completed from the HONOURED variables as libpq would (the DSN's
    own win), and the names of those used."""
    found = users()
    used = tuple(v for v, key in HONOURED.items() if found.get(v) and key not in params)
    return {**params, **{HONOURED[v]: found[v] for v in used}}, used


def user_conninfo(dsn: str) -> str:
    """A user's DSN (--results-dsn) completed from the HONOURED variables, its password included (in
    this process only: never shown, stored or put on a command line)."""
    return make_conninfo(**complete({k: str(v) for k, v in conninfo_to_dict(dsn).items()})[0])


def refuse_for_user_servers(option: str) -> None:
    """UserError for the first REFUSED variable set, when a run measures a user server (`option`)."""
    found = users()
    for name, why in REFUSED.items():
        if found.get(name):
            raise UserError(f"{option}: {name} is set in the environment and {why}; pgpathbench takes only where "
                            f"a server is, who logs in and how from it (host, port, user, dbname, password, TLS): "
                            f"unset {name}")


def ignored(used: Iterable[str] = ()) -> list[str]:
    """The names of the user's variables no connection or program of the tool got, but those `used` for
    a user server's DSN (values never: a password may be among them)."""
    return sorted(set(users()) - set(used))
