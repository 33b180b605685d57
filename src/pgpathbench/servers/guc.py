"""`--set NAME=V1,V2` on every study: a server setting (a GUC) as a knob dimension `set.NAME`.

Checked before anything is written (check()): the name against `postgres --describe-config`
of the binaries at hand (every GUC of the major, with its context and type: no server needed),
its context (what --set can vary), each value's form for booleans and numbers, then each value
as PostgreSQL judges it without a server (`postgres -C NAME -c NAME=VALUE` over an empty
configuration directory: units, ranges, enums). The server itself has the last word, in prepare (verify()): the name in its pg_settings, each value accepted
(set_config in a transaction rolled back, or ALTER SYSTEM SET then RESET, which checks a value's
form and range; a postmaster setting the machine cannot honour, huge_pages=on without huge pages,
fails at the first restart, with the server's log) - a refusal is a UserError naming the option,
the run failed with nothing measured.

Applied per case, by context:
- user, superuser (SESSION): in the case's own sessions: PGOPTIONS `-c NAME=VALUE` for the
  programs a study runs (pgbench, the native clients, psql: session_env()), SET (set_config)
  on the in-process connections a study keeps (set_session()), and libpq's `options` on the
  study's foreign servers for the sessions postgres_fdw opens (fdw.set_case_options()).
- sighup (RELOAD) and postmaster (RESTART): ALTER SYSTEM SET on every managed server of the
  major before each measurement whose values differ from those in force, then pg_reload_conf()
  and a wait until new sessions see them, or, when a postmaster setting changed, a restart of
  every one on its own port (apply_server_settings()). The case measured after a restart reads
  cold shared buffers and caches: said in the run's log before the first measurement, and in
  the Setup facts. The rounds' shuffled order is kept (fewer restarts would cost honest
  interleaving). Kept connections are closed before a restart (StudyEnv.close_kept()).
- backend contexts (fixed at connection start) and internal ones are refused, one line naming
  the setting and its context; so is, by name and whatever the major, what holds a managed
  server's isolation, layout and identity (HELD: where it listens, who it admits, its files, its
  log, its libraries; TLS). A sighup or postmaster value is in force only when the server says so
  after the reload or restart (_confirm: pg_file_settings), else the measurement fails.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import subprocess
import tempfile
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable, Mapping

import psycopg
from psycopg import sql

from .. import scratch
from ..at_once import at_once
from ..clientenv import child_env
from ..errors import CaseError, UserError
from ..procs import OsUser
from ..matrix import NOT_APPLICABLE, Case, KnobFamily

SESSION = ("user", "superuser")
RELOAD = ("sighup",)
RESTART = ("postmaster",)
REFUSED = {
    "backend": "it is fixed when a session starts",
    "superuser-backend": "it is fixed when a session starts",
    "internal": "it cannot be changed",
}
_SESSIONS = ("PGOPTIONS -c for the programs run, SET on kept connections, libpq options -c on the foreign "
             "servers (postgres_fdw's remote sessions)")
HOW = {"user": f"per session: {_SESSIONS}",
       "superuser": f"per session (as superuser): {_SESSIONS}",
       "sighup": "ALTER SYSTEM SET and pg_reload_conf() on every managed server, before each measurement",
       "postmaster": "ALTER SYSTEM SET and a restart of every managed server (same port) before each measurement "
                     "whose value differs: that measurement reads cold shared buffers"}
# What holds a managed server's isolation, layout and identity (servers/cluster.py sets or relies on it):
# never a knob, whatever the major. Left to --set on purpose: cluster_name and update_process_title
# (process titles only: the tool finds its servers by their data directories), archive_* (the
# user's own commands, as the servers' user), the settings of resources (shared_buffers, huge_pages...).
_WHERE = "a managed server listens only where its run's topology chose: loopback, or its network namespace's address"
_SOCKET = "a managed server's unix socket sits in its own private 0700 directory"
_WHO = "a managed server admits only its run's own user, from its own addresses (its pg_hba.conf)"
_FILES = "a managed server's files stay in its directory of the workspace"
_ADVERTISED = "a managed server is never advertised on the network (Bonjour)"
_LOG = "pgpathbench reads a managed server's log from its standard error, server.log beside its data"
_LIBRARIES = ("a managed server loads its binaries' libraries and the studies' (pg_stat_statements for the "
              "evidence), as the fingerprint records them")
HELD = {"listen_addresses": _WHERE, "port": "each managed server gets a free port, found at its start",
        "unix_socket_directories": _SOCKET, "unix_socket_group": _SOCKET, "unix_socket_permissions": _SOCKET,
        "hba_file": _WHO, "ident_file": _WHO, "krb_server_keyfile": _WHO, "krb_caseins_users": _WHO,
        "gss_accept_delegation": _WHO, "db_user_namespace": _WHO, "oauth_validator_libraries": _WHO,
        "bonjour": _ADVERTISED, "bonjour_name": _ADVERTISED,
        "data_directory": _FILES, "config_file": _FILES, "external_pid_file": _FILES,
        "logging_collector": _LOG, "log_destination": _LOG, "log_directory": _LOG, "log_filename": _LOG,
        "shared_preload_libraries": _LIBRARIES, "session_preload_libraries": _LIBRARIES,
        "local_preload_libraries": _LIBRARIES, "dynamic_library_path": _LIBRARIES, "jit_provider": _LIBRARIES,
        "allow_alter_system": "--set applies server settings by ALTER SYSTEM"}
_TLS = ("--tls off,on turns TLS on a managed server on, with a certificate of the run's CA (a user server's TLS "
        "is its DSN's)")
_NAME = re.compile(r"[a-z_][a-z0-9_.]*")
_VALUE = re.compile(r"[A-Za-z0-9_.+:/-]+")
_BOOL = {"on", "off", "true", "false", "yes", "no", "1", "0"}
_INTEGER = re.compile(r"[+-]?\d+\s*[A-Za-z]*")
_REAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*[A-Za-z]*")


def _value(v: str) -> str:
    if not _VALUE.fullmatch(v):
        raise ValueError(f"'{v}' is not a setting value --set takes: letters, digits and . + - : / _ only")
    return v


def _any_name(name: str) -> Callable[[str], str]:
    if not _NAME.fullmatch(name):
        raise ValueError(f"'{name}' is not a setting name (letters, digits, '_' and '.'); see SHOW ALL")
    return _value


FAMILY = KnobFamily("set", "--set", "a server setting as a knob dimension: NAME=V1,V2 (sessions get it by "
                    "PGOPTIONS or SET; sighup settings by ALTER SYSTEM and a reload, postmaster ones by a "
                    "restart between cases)", {},
                    any_name=_any_name, example="work_mem")


@dataclass(frozen=True)
class Guc:
    name: str
    context: str
    vartype: str          # BOOLEAN, INTEGER, REAL, ENUM, STRING


@functools.lru_cache(maxsize=8)
def describe(postgres: str) -> dict[str, Guc]:
    """Every setting of these binaries (`postgres --describe-config`: name, context, group, type...)."""
    out = subprocess.run([postgres, "--describe-config"], capture_output=True, text=True, env=child_env(),
                         timeout=30)
    gucs = {}
    for line in out.stdout.splitlines():
        fields = line.split("\t")
        if len(fields) >= 4:
            gucs[fields[0].lower()] = Guc(fields[0].lower(), fields[1], fields[3])
    return gucs


def chosen(options) -> dict[str, tuple[str, ...]]:
    """The run's --set settings: {NAME: values}."""
    return {FAMILY.knob_name(d): v for d, v in options.dims.items() if FAMILY.owns(d)}


def held(name: str) -> str | None:
    """Why --set may not vary `name` (HELD, and TLS), whatever its context and major; None if it may."""
    why = _TLS if name == "ssl" or name.startswith("ssl_") else HELD.get(name)
    return None if why is None else f"--set {name}: not a knob: {why}; leave it out"


def refusal(name: str, context: str) -> str | None:
    why = REFUSED.get(context)
    if why is None:
        return held(name)
    return (f"--set {name}: a {context} setting ({why}); leave it out: --set varies settings of contexts "
            "user, superuser, sighup and postmaster only")


def check(options, bins) -> None:
    """Names, contexts and value forms against the binaries at hand (no server, nothing written).
    A name those binaries do not know is refused when their major is one the run uses; dotted
    names (an extension's settings) and other majors' are left to verify()."""
    settings = chosen(options)
    if not settings:
        return
    major = str(bins.major)
    gucs = describe(str(bins.path("postgres")))
    for name, values in settings.items():
        guc = gucs.get(name)
        if held(name):
            raise UserError(held(name))
        if guc is None:
            if "." not in name and major in options.dims.get("pg", (major,)):
                # --describe-config leaves out internal settings and those of connection start-up.
                raise UserError(f"--set: unknown setting '{name}' for PostgreSQL {major}; see SHOW ALL "
                                "(--set takes settings of contexts user, superuser, sighup and postmaster)")
            continue
        message = refusal(name, guc.context)
        if message:
            raise UserError(message)
        for v in values:
            _check_form(guc, v)
    _check_values(str(bins.path("postgres")), major, {n: v for n, v in settings.items() if n in gucs})


def _check_values(postgres: str, major: str, settings: Mapping[str, tuple[str, ...]]) -> None:
    """Each value as PostgreSQL itself judges it, without a server: `postgres -C NAME -c NAME=VALUE`
    over an empty configuration directory (its range, unit and enum checks), run as the servers'
    user (postgres refuses root). Where there is no such user, verify() in prepare has the word."""
    try:
        user = OsUser.for_servers()
    except UserError:
        return
    with tempfile.TemporaryDirectory(prefix=scratch.prefix("set")) as d:
        user.chown(Path(d))
        (Path(d) / "postgresql.conf").touch()
        for name, values in settings.items():
            for v in values:
                res = user.run([postgres, "-D", d, "-C", name, "-c", f"{name}={v}"], capture_output=True,
                               text=True, timeout=30)
                if res.returncode != 0:
                    said = [line.split("FATAL:", 1)[1].strip() for line in res.stderr.splitlines() if "FATAL:" in line]
                    raise UserError(f"--set {name}: PostgreSQL {major} refuses '{v}': "
                                    f"{said[0] if said else 'invalid value'}; give values it accepts (SHOW {name})")


def _check_form(guc: Guc, v: str) -> None:
    ok = {"BOOLEAN": lambda: v.lower() in _BOOL, "INTEGER": lambda: bool(_INTEGER.fullmatch(v)),
          "REAL": lambda: bool(_REAL.fullmatch(v))}.get(guc.vartype, lambda: True)()
    if not ok:
        kind = {"BOOLEAN": "on or off", "INTEGER": "a whole number, with a unit if it has one (64kB)",
                "REAL": "a number"}[guc.vartype]
        raise UserError(f"--set {guc.name}: '{v}' is not {kind}; give values the server takes (SHOW {guc.name})")


def _ident(name: str) -> sql.Composable:
    return sql.SQL(".").join(sql.Identifier(part) for part in name.split("."))


def verify(conn: psycopg.Connection, options, major: str) -> dict:
    """Every --set setting and value checked by a server of the major (autocommit connection, as
    superuser); the facts for the fingerprint: {NAME: {context, applied, values}}."""
    facts = {}
    for name, values in chosen(options).items():
        row = conn.execute("SELECT context FROM pg_settings WHERE name = %s", (name,)).fetchone()
        if row is None:
            raise UserError(f"--set: unknown setting '{name}' for PostgreSQL {major}; see SHOW ALL")
        message = refusal(name, row[0])
        if message:
            raise UserError(message)
        for v in values:
            try:
                if row[0] in SESSION:
                    with conn.transaction(force_rollback=True):
                        conn.execute("SELECT set_config(%s, %s, true)", (name, v))
                else:
                    conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(_ident(name), sql.Literal(v)))
                    conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(_ident(name)))
            except psycopg.Error as e:
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise UserError(f"--set {name}: PostgreSQL {major} refuses '{v}': {first}; give values "
                                f"it accepts (SHOW {name})") from None
        facts[name] = {"context": row[0], "applied": HOW[row[0]], "values": list(values)}
    return facts


@dataclass
class KnobState:
    """What the knobs of one major keep between measurements (StudyEnv.knobs)."""
    server_settings: dict[str, dict] = field(default_factory=dict)   # --set NAME -> verify()'s facts
    in_force: dict[str, str] = field(default_factory=dict)           # sighup and postmaster settings applied
    restarts: int = 0                                                # of the managed servers, for --set
    # (server, database, foreign server) -> the --fdw-option options it has (servers/fdw.py)
    fdw_options_in_force: dict[tuple[str, str, str], dict] = field(default_factory=dict)


def contexts(env) -> dict[str, str]:
    """NAME -> context of the run's settings, as verify() found them for this major."""
    return {n: f["context"] for n, f in env.knobs.server_settings.items()}


def session(env, case: Case) -> dict[str, str]:
    """The case's session-level settings, {NAME: VALUE}."""
    ctx = contexts(env)
    return {n: v for n, v in case.knobs(FAMILY).items() if ctx.get(n) in SESSION}


def pgoptions(settings: Mapping[str, str]) -> str:
    """`-c NAME=VALUE ...` for PGOPTIONS (values have no space or backslash: see _value)."""
    return " ".join(f"-c {n}={v}" for n, v in settings.items())


def set_session(conn: psycopg.Connection, env, case: Case) -> None:
    """The case's session-level settings in force on a kept connection (SET, by set_config)."""
    for name, value in session(env, case).items():
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))


def server_wide(env, case: Case) -> dict[str, str]:
    """The case's sighup and postmaster settings, {NAME: VALUE}: in force on every managed server."""
    ctx = contexts(env)
    return {n: v for n, v in case.knobs(FAMILY).items() if ctx.get(n) in RELOAD + RESTART and v != NOT_APPLICABLE}


def apply_server_settings(env, case: Case) -> None:
    """The case's sighup and postmaster settings on every managed server of the major, when they
    differ from those in force (env.knobs.in_force): ALTER SYSTEM SET, then a reload, or a
    restart when a postmaster setting changed (the sighup ones come with it)."""
    _apply(env, server_wide(env, case))


def reload_settings(env, settings: Mapping[str, str]) -> None:
    """A study's own settings that a reload changes (sighup, superuser), on every managed server of
    the major when they differ from those in force; kept in force alike with --set's."""
    _apply(env, settings)


def _apply(env, settings: Mapping[str, str]) -> None:
    in_force = env.knobs.in_force
    changed = {n: v for n, v in settings.items() if in_force.get(n) != v}
    if not changed:
        return
    restart = any(contexts(env).get(n) in RESTART for n in changed)
    clusters = env.servers.clusters()

    def alter(cluster) -> None:
        with cluster.connect() as conn:
            for n, v in changed.items():
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(_ident(n), sql.Literal(v)))
            since = conn.execute("SELECT now()").fetchone()[0]
            if not restart:
                conn.execute("SELECT pg_reload_conf()")
        if not restart:
            _wait_reloaded(cluster, since, changed)

    at_once(alter, clusters)   # fdw-overhead reloads twice a measurement: the servers' waits overlap
    if restart:
        _restart(env, clusters, changed)
        for cluster in clusters:
            with cluster.connect() as conn:
                _confirm(conn, cluster.name, changed)
    in_force.update(changed)


def _confirm(conn, server: str, changed: Mapping[str, str]) -> None:
    """The server's word that each changed setting is in force: its line of postgresql.auto.conf applied,
    without error (pg_file_settings); CaseError with the server's reason if not (the case is not labelled
    with a value its server does not run with)."""
    rows = conn.execute("SELECT name, applied, error FROM pg_file_settings WHERE name = ANY(%s) "
                        "AND sourcefile LIKE '%%postgresql.auto.conf' ORDER BY seqno", (list(changed),)).fetchall()
    last = {name: (applied, error) for name, applied, error in rows}
    wrong = [f"{n}={v} ({last[n][1] or 'not applied'})" if n in last else f"{n}={v} (not in postgresql.auto.conf)"
             for n, v in changed.items() if last.get(n, (False, None)) != (True, None)]
    if wrong:
        raise CaseError(f"--set: not in force on server {server}, as it says: {', '.join(wrong)}")


def _restart(env, clusters, changed: Mapping[str, str]) -> None:
    """Every managed server of the major restarted on its port, counted and said in the log. The
    connections studies keep would be ended by it: closed first, made again by the next case."""
    env.close_kept()
    t0 = time.monotonic()
    for cluster in clusters:
        cluster.restart()
    env.knobs.restarts += 1
    n = env.knobs.restarts
    env.log(f"restart {n} for --set {' '.join(f'{k}={v}' for k, v in changed.items())}: "
            f"{', '.join(c.name for c in clusters)} in {time.monotonic() - t0:.1f} s (cold shared buffers)")


def watch_settings(env, watched: list) -> list:
    """The evidence's servers (evidence.Watched), each told to read the run's sighup and
    postmaster settings with its after-snapshot: what was in force during the measurement."""
    names = tuple(n for n, c in contexts(env).items() if c in RELOAD + RESTART)
    return [dataclasses.replace(w, settings=names) for w in watched] if names else watched


def _wait_reloaded(cluster, since, changed: Mapping[str, str], timeout_s: float = 10.0) -> None:
    """Until a new session of the server has read the configuration again (pg_conf_load_time),
    then _confirm in that session."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with cluster.connect() as conn:
            if conn.execute("SELECT pg_conf_load_time() >= %s", (since,)).fetchone()[0]:
                _confirm(conn, cluster.name, changed)
                return
        time.sleep(0.01)   # the postmaster rereads it within milliseconds; fdw-overhead reloads twice a measurement
    raise RuntimeError(f"{cluster.name}: the configuration was not reloaded within {timeout_s:.0f} s")


def prepare(env) -> dict:
    """verify() on a managed server of the major, kept in env.knobs; the Setup facts."""
    if not chosen(env.options):
        return {}
    clusters = env.servers.clusters()
    if not clusters:
        return {}
    with clusters[0].connect() as conn:
        env.knobs.server_settings = verify(conn, env.options, env.major)
    restarting = [n for n, c in contexts(env).items() if c in RESTART]
    if restarting:   # the plan, before the first measurement: what a restart does to the next one
        env.log(f"--set: restart between cases for {', '.join(restarting)} (every managed server of PostgreSQL "
                f"{env.major}, same port; cold shared buffers after each restart)")
    return {"server_settings": env.knobs.server_settings}
