"""fdw-overhead (seeds 000, 001): pgbench over a local table vs postgres_fdw.

Two managed instances, as in the seeds: `source` holds the pgbench tables (database source)
and a database localfdw whose foreign tables reach source on the same instance (FDW_local);
`external` holds databases external and external_ro whose foreign tables reach the source
instance (FDW_external, FDW_ext_ro with updatable 'false', Snippet 2). Snippet 1 is followed
(IMPORT FOREIGN SCHEMA of the four tables over TCP).

What we know now that the seeds did not say: pgbench always runs with -n, because without it
pgbench TRUNCATEs pgbench_history and postgres_fdw (14+) sends that TRUNCATE to the source; the
source is instead vacuumed directly before every read-write measurement (what -n skips).
All transactions run at REPEATABLE READ, as in the seeds (postgres_fdw uses it remotely), so
several read-write clients meet serialization failures: pgbench retries them (--max-tries) and
failures and retries are kept with each measurement.

Remote links (--latency, --bandwidth): the external instance reaches the source through an
emulated link per requested latency (a database per link: external_5ms, external_ro_5ms);
local and fdw_local never cross one and are measured once, at 0ms. Every path's round trip is
measured before and after each round, and the report reads the overhead against it.

Knobs: --protocol (pgbench -M) and --fdw-option NAME=V1,V2 (postgres_fdw options, dimensions
fdw.NAME). The options are set on the foreign server of the case's database by ALTER SERVER
... OPTIONS (SET ...) before each measurement (untimed): pgbench's sessions are new ones, so
they plan with the options in force, and one database per (target, latency) serves every
combination (a database per combination would multiply the foreign tables and the connections
for nothing). The local target has no foreign server: its cases carry '-' for every option.

Your workload: --script FILE[@WEIGHT] (pgbench -f, through local and every FDW target) with
--init FILE (SQL run on the source after pgbench -i; every table of its public schema is then
imported). The scripts' text is stored with the run's options, so a resumed run runs the same.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Mapping

from psycopg import sql

from ...evidence import Watched, remote_metrics
from ...errors import UserError
from ...matrix import Case, cross, not_applicable
from ...report import Plot, Table
from ...results.model import StudyResult
from ...servers import fdw, guc
from ...servers.paths import DIRECT, NetworkPath
from ...servers.topology import Server
from ...tools import pgbench
from ..base import Declared, Setup, StudyEnv, StudyOptions, evidence_on, latencies_with_direct, links_requested
from . import report as study_report, spec
from .spec import ISOLATIONS, REMOTE_TARGETS, SOURCE_ROLE, TABLES

SERVER = "source_server"    # the foreign server, in every database with foreign tables
# pg_stat_statements on every server: what postgres_fdw sent to the source is evidence (evidence/).
# Room for one measurement's statements: on 15 each DECLARE CURSOR keeps its constant (one entry
# per account read), and an entry evicted during a measurement takes its calls with it.
STATEMENTS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "top",
              "pg_stat_statements.max": "20000"}


class FdwOverhead(Declared):
    vocabulary = spec.VOCABULARY

    # -- the matrix -------------------------------------------------------------------------
    def refine(self, options: StudyOptions, given: set[str]) -> StudyOptions:
        """With --script, the workload is the scripts (script:NAME); --init goes with --script."""
        p = options.params
        if p.get("init") and not p.get("script"):
            raise UserError("--init: creates the tables your --script reads; give --script FILE too")
        if not p.get("script"):
            return options
        if "workload" in given:
            raise UserError("--workload: not with --script, whose scripts are the workload; leave --workload out")
        return dataclasses.replace(options, dims={**options.dims, "workload": (spec.script_workload(p["script"]),)})

    def check(self, options: StudyOptions, bins) -> None:
        """--set (see Declared), and the user's scripts, parsed by pgbench itself (a dry parse: see
        tools/pgbench.dry_parse)."""
        super().check(options, bins)
        given = options.params.get("script")
        if given:
            error = pgbench.dry_parse(bins.path("pgbench"), [(s["path"], s["weight"]) for s in given])
            if error is not None:
                raise UserError(f"--script: pgbench cannot parse it: {error}; fix the script "
                                "(pgbench's syntax: SQL lines and \\ meta-commands)")
        if options.params.get("init"):
            bins.require("psql")

    def cases(self, options: StudyOptions) -> list[Case]:
        requested = options.dims["latency"]
        dims = {**options.dims, "latency": latencies_with_direct(requested)}

        def exclude(d: dict[str, str]) -> bool:
            # updatable 'false' foreign tables cannot take pgbench's writes: RO only, as in seed 001.
            if d["workload"] == "rw" and d["target"] == "fdw_external_ro":
                return True
            # Only the external targets cross a link; the others are always measured, directly.
            if d["target"] in REMOTE_TARGETS:
                return d["latency"] not in requested
            return d["latency"] != DIRECT

        # postgres_fdw's options have no effect on the local table: its cases carry '-' for them.
        return not_applicable(cross(self.name, self.dimensions, dims, exclude), fdw.FAMILY.owns,
                              lambda c: c["target"] != "local")

    def path(self, case: Case) -> NetworkPath | None:
        return spec.network_path(case["target"], case["latency"], case["pg"])

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> Setup:
        p = env.options.params
        t0 = time.monotonic()
        # With links requested, the source is a remote role: on its own network stack when possible.
        source = env.servers.server(SOURCE_ROLE, STATEMENTS, remote=links_requested(env.options),
                                    bandwidth_kbit=p.get("bandwidth"))
        needs_external = any(t in REMOTE_TARGETS for t in env.options.dims["target"])
        external = env.servers.server("external", STATEMENTS) if needs_external else None
        if external is not None and not external.managed:
            _warn_logged_password(env, external)
        env.log(f"servers up in {time.monotonic() - t0:.1f} s")

        t0 = time.monotonic()
        source.create_database("source")
        for cluster in filter(None, (source, external)):
            if cluster.managed:   # a user's server: only where its DBA made it available (template1)
                cluster.execute("postgres", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        pgbench.initialize(env.bins.path("pgbench"), *source.client_args("source"), p["scale"],
                           _passfile(source))
        env.log(f"pgbench data at scale {p['scale']} loaded in {time.monotonic() - t0:.1f} s")
        env.state["scripts"] = _script_files(p.get("script") or [])
        if p.get("init"):
            t0 = time.monotonic()
            _run_init(env, source, p["init"])
            env.log(f"--init {p['init']['name']} run on the source in {time.monotonic() - t0:.1f} s")

        isolation = ISOLATIONS[p["isolation"]]
        _set_isolation(source, "source", isolation)
        env.state["source"] = source
        env.state["targets"] = self._targets(env, source, external, isolation, imported=bool(p.get("init")))
        cases = [c for c in self.cases(env.options) if c["pg"] == env.major]
        facts = {"scale": p["scale"], "isolation": isolation,
                 "pgbench_flags": "-n always; -M per case (--protocol); -j min(clients, cores); --max-tries",
                 "foreign_server": "postgres_fdw over TCP (scram-sha-256), direct or through an emulated link",
                 # The command each case runs (its log prefix aside) and the options in force per case.
                 "pgbench_commands": {c.case_id: " ".join(self._run(env, c).command("pgbench")) for c in cases}}
        knobs = {c.case_id: c.knobs(fdw.FAMILY) for c in cases if c.knobs(fdw.FAMILY)}
        if knobs:
            facts["fdw_options"] = knobs
        if p.get("script"):
            facts["scripts"] = [{k: s[k] for k in ("name", "weight", "path")} for s in p["script"]]
        if p.get("init"):
            facts["init"] = {k: p["init"][k] for k in ("name", "path")}
        return Setup(tools={"pgbench": pgbench.version(env.bins.path("pgbench"))}, facts=facts)

    @staticmethod
    def _targets(env: StudyEnv, source: Server, external: Server | None, isolation: str,
                 imported: bool) -> dict[tuple[str, str], tuple[Server, str]]:
        """(target, latency) -> (cluster, database) pgbench connects to, foreign tables made."""
        bandwidth = env.options.params.get("bandwidth")
        targets = {("local", DIRECT): (source, "source")}
        # fdw_local's path to the source is the direct loopback one: probed like every link.
        env.servers.path(NetworkPath(env.major, SOURCE_ROLE, DIRECT), source)
        for target in env.options.dims["target"]:
            if target == "fdw_local":
                # Inside the source's own network stack: loopback, whatever stack that is.
                _foreign_tables(source, "localfdw", (source.self_host, source.port), source, isolation,
                                readonly=False, imported=imported)
                targets[(target, DIRECT)] = (source, "localfdw")
            elif target in REMOTE_TARGETS:
                base = {"fdw_external": "external", "fdw_external_ro": "external_ro"}[target]
                for latency in env.options.dims["latency"]:
                    link = env.servers.path(NetworkPath(env.major, SOURCE_ROLE, latency), source, bandwidth)
                    db = base if latency == DIRECT else f"{base}_{latency}"
                    _foreign_tables(external, db, source.reached_at(link), source, isolation,
                                    readonly=target == "fdw_external_ro", imported=imported)
                    targets[(target, latency)] = (external, db)
        return targets

    # -- one measurement --------------------------------------------------------------------
    def before_measure(self, env: StudyEnv, case: Case) -> None:
        source = env.state["source"]
        if case["workload"] == "rw":
            # What pgbench -n skips, done on the source itself: never through a foreign table.
            source.execute("source", "VACUUM pgbench_branches", "VACUUM pgbench_tellers", "TRUNCATE pgbench_history")
        if case["target"] != "local" and evidence_on(env.options) and source.managed:
            # The earlier measurements' entries out of the way: this one's must not be evicted.
            source.execute("postgres", "SELECT pg_stat_statements_reset()")
        if case["target"] != "local":
            # The case's postgres_fdw options and --set session settings in force for pgbench's (new) sessions.
            cluster, db = env.state["targets"][(case["target"], case["latency"])]
            fdw.set_case_options(env, case, cluster, db, [SERVER])

    def watched(self, env: StudyEnv, case: Case) -> list[Watched]:
        """The server pgbench connects to, and the source behind a foreign table."""
        cluster, db = env.state["targets"][(case["target"], case["latency"])]
        source = env.state["source"]
        if cluster is source:   # local, or fdw_local: one server, both databases
            return [source.watched(SOURCE_ROLE, *dict.fromkeys((db, "source")))]
        return [cluster.watched("external", db), source.watched(SOURCE_ROLE, "source")]

    def evidence_metrics(self, env: StudyEnv, case: Case, metrics: Mapping, evidence: Mapping) -> dict:
        """What postgres_fdw sent to the source, per pgbench transaction (pg_stat_statements)."""
        if case["target"] == "local":
            return {}
        return remote_metrics(evidence, SOURCE_ROLE, env.state["source"].dbname("source"), metrics.get("transactions"))

    @staticmethod
    def _run(env: StudyEnv, case: Case) -> pgbench.TimedRun:
        p = env.options.params
        cluster, db = env.state["targets"][(case["target"], case["latency"])]
        clients = int(case["clients"])
        return pgbench.TimedRun(*cluster.client_args(db), clients=clients, passfile=_passfile(cluster),
                                duration_s=int(p["duration"]), select_only=case["workload"] == "ro",
                                max_tries=int(p["max_tries"]), threads=min(clients, os.cpu_count() or 1),
                                protocol=case.get("protocol", "simple"), scripts=env.state["scripts"],
                                pgoptions=guc.pgoptions(guc.session(env, case)))

    def measure(self, env: StudyEnv, case: Case) -> dict:
        return pgbench.run(env.bins.path("pgbench"), self._run(env, case), log=evidence_on(env.options))

    # -- the report -------------------------------------------------------------------------
    def report(self, result: StudyResult) -> list[Table]:
        return study_report.tables(result)

    def plots(self, result: StudyResult) -> list[Plot]:
        return study_report.plots(result)


def _passfile(server: Server) -> str | None:
    """The password file a client program needs: none through a managed server's private socket."""
    return None if server.managed else (str(server.passfile) if server.passfile else None)


def _warn_logged_password(env: StudyEnv, external: Server) -> None:
    """A user's external server that logs DDL, where we may not turn that off, logs the source's
    password with CREATE USER MAPPING (postgres_fdw keeps it there): said before it happens."""
    with external.connect() as conn:
        if fdw.logs_statements(conn) and conn.info.parameter_status("is_superuser") != "on":
            env.log("warning: the external server logs statements (log_statement or log_min_duration_statement) "
                    f"and {conn.info.user} may not turn that off: its log will hold the source's password, sent "
                    "by CREATE USER MAPPING (postgres_fdw keeps it there)")


def _set_isolation(server: Server, db: str, isolation: str) -> None:
    """ALTER DATABASE of ours (never of a user's: see servers/user.py)."""
    with server.connect(db) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = {}").format(
            sql.Identifier(server.dbname(db)), sql.Literal(isolation)))


def _foreign_tables(cluster: Server, db: str, address: tuple[str, int], source: Server, isolation: str,
                    readonly: bool, imported: bool = False) -> None:
    """Database `db` on `cluster` with the four pgbench tables as foreign tables of the source at
    `address` (imported: every table of the source's public schema, those of --init too)."""
    cluster.create_database(db)
    options, user, password = source.fdw_target("source")
    with cluster.connect(db) as conn:
        fdw.create_server(conn, SERVER, *address, options.pop("dbname"), user, password, options)
        fdw.import_schema(conn, SERVER, "public", "public", None if imported else TABLES)
    _set_isolation(cluster, db, isolation)
    with cluster.connect(db) as conn:
        if readonly:  # seed 000, Snippet 2
            tables = [r[0] for r in conn.execute("SELECT foreign_table_name FROM information_schema.foreign_tables "
                                                 "WHERE foreign_table_schema = 'public' ORDER BY 1")]
            fdw.alter_tables(conn, tables, {"updatable": "false"})


def _script_files(given: list[dict]) -> tuple[tuple[str, int], ...]:
    """The scripts' stored text written to a private directory for pgbench -f (removed at exit):
    what runs is what the run stored, even when the files changed since."""
    if not given:
        return ()
    directory = Path(tempfile.mkdtemp(prefix="pgpathbench-scripts-"))
    atexit.register(shutil.rmtree, directory, True)
    out = []
    for s in given:
        path = directory / f"{s['name']}.sql"
        path.write_text(s["text"])
        out.append((str(path), int(s["weight"])))
    return tuple(out)


def _run_init(env: StudyEnv, source: Server, init: dict) -> None:
    """--init's SQL on the source's database through psql (stopping at the first error)."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="pgpathbench-init-") as f:
        f.write(init["text"])
        f.flush()
        dbname, host, port, user = source.client_args("source")
        res = subprocess.run([str(env.bins.path("psql")), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", f.name,
                              "-h", host, "-p", str(port), "-U", user, dbname], capture_output=True, text=True,
                             env=pgbench.password_env(_passfile(source)))
    if res.returncode != 0:
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        raise RuntimeError(f"--init {init['name']} failed on the source: {lines[-1] if lines else res.returncode}")
