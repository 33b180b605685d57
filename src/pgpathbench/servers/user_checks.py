"""User servers checked before a run and by `doctor --server`: reading only, nothing written anywhere.

Each requirement a study's role may name (studies/base.Role.needs) is one check here, with the
fix a DBA would apply; a run refuses a server that misses one (one line, exit 2) before it
writes anything, to the results database included.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Callable, Mapping

import psycopg

from .. import clientenv
from ..errors import UserError
from . import guc
from .network import measure_rtt
from .user import UserDsn


@dataclass(frozen=True)
class Facts:
    """What a user server says of itself and of our login there."""
    user: str
    version_num: int
    superuser: bool
    createdb: bool
    available: frozenset[str]           # extensions the server could install
    template1_fdw: bool | None          # postgres_fdw in template1 with USAGE for us (None: template1 unreadable)
    template1_extensions: frozenset[str]
    tls: bool
    extensions: frozenset[str] = frozenset()   # those of the DSN's own database
    create_schema: bool = False                 # whether our login may create schemas there


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def inspect(dsn: UserDsn) -> Facts:
    """Connect (read-only) and read the facts; UserError naming the option if it cannot."""
    try:
        with dsn.connect(read_only=True) as conn:
            user, num, superuser, createdb = conn.execute(
                "SELECT current_user, current_setting('server_version_num')::int, rolsuper, rolcreatedb "
                "FROM pg_roles WHERE rolname = current_user").fetchone()
            available = frozenset(r[0] for r in conn.execute("SELECT name FROM pg_available_extensions"))
            tls = conn.pgconn.ssl_in_use
            own = frozenset(r[0] for r in conn.execute("SELECT extname FROM pg_extension"))
            create_schema = conn.execute("SELECT has_database_privilege(current_database(), 'CREATE')").fetchone()[0]
    except psycopg.Error as e:
        raise UserError(f"--server {dsn.role}: cannot connect ({_one_line(e)}); check the DSN, and give the "
                        "password in it, by PGPASSWORD or in ~/.pgpass") from None
    fdw, installed = None, frozenset()
    try:
        with dsn.connect("template1", read_only=True) as conn:
            row = conn.execute("SELECT has_foreign_data_wrapper_privilege(oid, 'USAGE') FROM pg_foreign_data_wrapper "
                               "WHERE fdwname = 'postgres_fdw'").fetchone()
            fdw = bool(row and row[0])
            installed = frozenset(r[0] for r in conn.execute("SELECT extname FROM pg_extension"))
    except psycopg.Error:
        pass
    return Facts(user, num, superuser, createdb, available, fdw, installed, tls, own, create_schema)


def _createdb(f: Facts) -> str | None:
    if f.superuser or f.createdb:
        return None
    return (f"role {f.user} may not create databases, and pgpathbench works only in databases of its own; "
            f"a DBA runs: ALTER ROLE {f.user} CREATEDB")


def _postgres_fdw(f: Facts) -> str | None:
    if f.template1_fdw or (f.superuser and "postgres_fdw" in f.available):
        return None
    if "postgres_fdw" not in f.available:
        return "postgres_fdw is not installed on that server (Debian: the postgresql-contrib files of its version)"
    return (f"postgres_fdw is not usable by {f.user} in the databases it creates; a DBA runs, in template1: "
            f"CREATE EXTENSION postgres_fdw; GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO {f.user}")


def _citus(f: Facts) -> str | None:
    """A Citus coordinator: citus in the DSN's own database (its metadata is per database), where our
    schemas go."""
    if "citus" not in f.extensions:
        return ("the DSN's database has no citus extension; give the DSN of your Citus coordinator's database "
                "(where CREATE EXTENSION citus was run)")
    if not f.create_schema:
        return (f"role {f.user} may not create schemas in the DSN's database, where pgpathbench's tables go; a "
                f"DBA runs there: GRANT CREATE ON DATABASE <the DSN's database> TO {f.user}")
    return None


REQUIREMENTS: Mapping[str, Callable[[Facts], str | None]] = {"createdb": _createdb, "postgres_fdw": _postgres_fdw,
                                                             "citus": _citus}


def evidence_note(f: Facts) -> str:
    """pg_stat_statements: optional (remote statements per transaction come from it)."""
    if "pg_stat_statements" in f.template1_extensions:
        return "pg_stat_statements in template1: remote statements are counted"
    return ("no pg_stat_statements in template1: remote statements are not counted (a DBA preloads it and "
            "runs CREATE EXTENSION pg_stat_statements in template1)")


def is_local(dsn: UserDsn) -> bool:
    """Whether the server is on this machine's loopback (or its socket): it can reach our loopback."""
    host = dsn.host.split(",")[0]
    if host.startswith("/") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def preflight(study, options, dsns: Mapping[str, UserDsn], bins) -> dict[str, Facts]:
    """Every --server checked for its role in `study`, before anything is written."""
    if dsns and len(options.dims.get("pg", ())) > 1:
        raise UserError("--pg: one major with --server (a user's server has its own version; --pg is the managed "
                        "servers'); give one --pg value")
    _session_settings_only(options, bins, dsns)
    if dsns:
        clientenv.refuse_for_user_servers(f"--server {next(iter(dsns))}")
    found = {}
    for role, dsn in dsns.items():
        spec = study.roles[role]
        if spec.needs is None:
            raise UserError(f"--server {role}: the {role} role of {study.name} cannot be a user server: {spec.why_not}")
        found[role] = facts = inspect(dsn)
        for need, when in spec.needs_for(options.dims):
            problem = REQUIREMENTS[need](facts)
            if problem and when:
                dim, _, value = when.partition("=")
                raise UserError(f"--server {role}: for --{dim} {value}, {problem}; or leave {value} out of --{dim}")
            if problem:
                raise UserError(f"--server {role}: {problem}")
    _reachable(study, options, dsns)
    study.check_user_servers(options, found, dsns)
    return found


def _session_settings_only(options, bins, dsns) -> None:
    if not dsns:
        return
    gucs = guc.describe(str(bins.path("postgres")))
    for name in guc.chosen(options):
        context = gucs[name].context if name in gucs else "user"
        if context not in guc.SESSION:
            raise UserError(f"--set {name}: a {context} setting, applied by ALTER SYSTEM, which pgpathbench never "
                            "runs on a user server; leave it out, or vary session settings only with --server")


def _reachable(study, options, dsns) -> None:
    """A user server that connects to another role's (postgres_fdw) must reach it: a managed one, or an
    emulated link, listens on this machine's loopback only."""
    links = any(v != "0ms" for v in options.dims.get("latency", ()))
    for role, dsn in dsns.items():
        for other in study.roles[role].reaches:
            if (other not in dsns or links) and not is_local(dsn) and not dsn.fdw_address:
                where = "an emulated link (--latency)" if links else f"a managed {other}"
                raise UserError(f"--server {role}: {where} listens on this machine's loopback, which a server at "
                                f"{dsn.host} cannot reach; give --server {other}=DSN too (and no --latency)")


def doctor_rows(dsns: Mapping[str, UserDsn]) -> list[tuple[str, bool, str, bool]]:
    """(check, ok, detail, required) per user server, for `doctor --server`."""
    rows = []
    for role, dsn in dsns.items():
        name = f"server {role}"
        try:
            clientenv.refuse_for_user_servers(f"--server {role}")
            rows.append((f"{name}: environment", True, f"from it: {', '.join(dsn.from_env) or 'nothing'}", False))
            f = inspect(dsn)
        except UserError as e:
            rows.append((name, False, str(e), True))
            continue
        rows.append((name, True, f"{dsn.shown}: PostgreSQL {f.version_num // 10000} ({f.version_num}), "
                                 f"as {f.user}" + (", TLS" if f.tls else ", no TLS"), True))
        for need, check in REQUIREMENTS.items():
            problem = check(f)
            # a Citus coordinator is one role of one study: a note for any other server
            rows.append((f"server {role}: {need}", problem is None, problem or "ok", need != "citus"))
        rows.append((f"server {role}: pg_stat_statements", "pg_stat_statements" in f.template1_extensions,
                     evidence_note(f), False))
        rtt = measure_rtt(dsn.conninfo(), 50, dsn.passfile, dsn.password)
        rows.append((f"server {role}: round trip", True, f"median {rtt['median_ms']:.3f} ms, p95 "
                                                         f"{rtt['p95_ms']:.3f} ms (50 SELECT 1 from here)", False))
    return rows
