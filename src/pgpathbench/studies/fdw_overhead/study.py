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
imported), or with --script-tables T,... (tables of the user's own database on a user source, copied
into ours there: read, never written). The scripts' text is stored with the run's options, so a
resumed run runs the same.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Mapping

import psycopg

from ... import scratch
from ...evidence import Watched
from ...errors import CaseError, ServerRefused, UserError
from ...procs import password_env
from ...matrix import Case, StudyOptions, cross, not_applicable
from ...report import Plot, Table
from ...results.model import StudyResult
from ...servers import copy_tables, fdw, guc, parse_check, pgbouncer, tls
from ...servers.network import time_statement
from ...servers.paths import DIRECT, NetworkPath, pooler_hop
from ...servers.topology import Server
from ...tools import pgbench, pgbench_log, pgbench_script
from ..base import Declared, Setup, StudyEnv, check_tls_given, evidence_on, latencies_with_direct, \
    links_requested, tls_values, user_roles
from .fdw_targets import SERVER
from . import fdw_targets, pooled, report as study_report, roof, spec, statements
from .spec import HOP, ISOLATIONS, POOLER, REMOTE_TARGETS, SOURCE_ROLE, TABLES
from .statements import TRACK

# The FDW hop probe (probe()): stored beside the links' round trips as <path id>+fdw_scan (spec.HOP).
HOP_SCAN, HOP_SCANS = "SELECT abalance FROM pgbench_accounts WHERE aid = 1", 20
# pg_stat_statements on every server: what postgres_fdw sent to the source is evidence, counted in
# untimed passes (statements.py); the timed runs track nothing. Room for a pass's statements: on 15
# each DECLARE CURSOR keeps its constant (one entry per account read), and an entry evicted during
# a pass takes its calls with it. track_wal_io_timing: the evidence's WAL flush time (a commit's cost).
STATEMENTS = {"shared_preload_libraries": "pg_stat_statements", TRACK: "none", "pg_stat_statements.max": "20000",
              "track_wal_io_timing": "on"}
# Not read around a timed run, which tracks no statement: the passes count them.
UNTRACKED = ("statements", "evictions")
SCRIPT_FIX = "fix the script (pgbench's syntax: SQL commands ending in ';', and \\ meta-commands)"


@dataclass
class FdwOverheadState:
    """What prepare() makes for one major's measurements (StudyEnv.state), and what they count."""
    source: Server                                      # holds the pgbench tables, database "source"
    targets: dict[tuple[str, str, str], tuple[Server, str]]  # pooled.target_key -> where pgbench connects
    scripts: tuple[tuple[str, int], ...]                # --script: (file, weight) as pgbench runs them
    copied: dict[str, int] = field(default_factory=dict)       # --script-tables: table -> rows copied
    last_tps: dict[str, float] = field(default_factory=dict)   # case id -> its last measurement's TPS
    logged_runs: dict[str, int] = field(default_factory=dict)  # case id -> its measurements so far
    closed_tps: dict[str, float] = field(default_factory=dict)  # closed-loop case id -> the TPS rate shares take
    pooled_cases: list[Case] = field(default_factory=list)     # the cases through a PgBouncer
    pooler_counters: dict = field(default_factory=dict)        # their poolers' counters before a measurement


class FdwOverhead(Declared):
    vocabulary = spec.VOCABULARY

    # -- the matrix -------------------------------------------------------------------------
    def refine(self, options: StudyOptions, given: set[str]) -> StudyOptions:
        """With --script, the workload is the scripts (script:NAME); --init and --script-tables go with
        --script, --script-tables with a user source; --rate's (roof.refine)."""
        options = roof.refine(options, given)
        p = options.params
        pooled.check(options, given)
        if p.get("init") and not p.get("script"):
            raise UserError("--init: creates the tables your --script reads; give --script FILE too")
        if p.get("script_tables") and not (p.get("script") and SOURCE_ROLE in user_roles(options)):
            raise UserError("--script-tables: copies tables of your own source server for your --script; give "
                            "--script FILE and --server source=DSN too")
        check_tls_given(options, given)
        if not p.get("script"):
            return options
        if "workload" in given:
            raise UserError("--workload: not with --script, whose scripts are the workload; leave --workload out")
        return dataclasses.replace(options, dims={**options.dims, "workload": (spec.script_workload(p["script"]),)})

    def check_user_servers(self, options: StudyOptions, facts, dsns) -> None:
        """--script-tables: each table readable in the source DSN's database (read-only)."""
        names = tuple(options.params.get("script_tables") or ())
        if names:
            with dsns[SOURCE_ROLE].connect(read_only=True) as conn:
                copy_tables.check_readable(conn, names, "--script-tables")

    def check(self, options: StudyOptions, bins) -> None:
        """--set (see Declared), and the user's scripts, parsed by pgbench itself (a dry parse: see
        tools/pgbench_script.dry_parse); the server's parse of their SQL is user_sql's."""
        super().check(options, bins)
        given = options.params.get("script")
        if given:
            error = pgbench_script.dry_parse(bins.path("pgbench"), [(s["name"], s["text"], s["weight"]) for s in given])
            if error is not None:
                name, line, why = error
                path = {s["name"]: s["path"] for s in given}.get(name, given[0]["path"])
                raise UserError(f"--script {path}: {f'line {line}: ' if line else ''}pgbench cannot parse it ({why}); "
                                f"{SCRIPT_FIX}")
        if options.params.get("init"):
            bins.require("psql")
        for option in ("via", "fdw_via"):
            if POOLER in options.dims.get(option, ()):
                pgbouncer.require(f"--{option.replace('_', '-')}")

    def check_space(self, options: StudyOptions, workspace) -> None:
        """pgbench -i's tables on a managed source: --scale against the workspace's free space."""
        if SOURCE_ROLE in user_roles(options):
            return
        scale, free = options.params["scale"], workspace.free_bytes()
        need = spec.disk_needed(scale)
        if need > free:
            raise UserError(f"--scale: pgbench's tables at scale {scale} need about {need / 1e9:.1f} GB free in the "
                            f"workspace ({workspace.root}), {free / 1e9:.1f} GB are; give a smaller --scale, free "
                            "some space, or choose another --workspace")

    def user_sql(self, options: StudyOptions) -> list[parse_check.Sql]:
        """Each --script's SQL commands and --init's statements, for the server's parse."""
        p = options.params
        out = [parse_check.Sql(f"--script {s['path']}", s["text"], tuple(pgbench_script.sql_commands(s["text"])),
                               SCRIPT_FIX) for s in p.get("script") or ()]
        if p.get("init"):
            out.append(parse_check.Sql(f"--init {p['init']['path']}", p["init"]["text"], ((0, p["init"]["text"]),),
                                       "give SQL statements only, as the server parses them (no psql meta-commands)"))
        return out

    def cases(self, options: StudyOptions) -> list[Case]:
        requested, with_tls = options.dims["latency"], tls_values(options)
        dims = {**options.dims, "latency": latencies_with_direct(requested)}
        if "pool_mode" in dims:
            dims["pool_mode"] = pooled.pool_modes(options)
        if "tls" in options.dims:   # local has no FDW hop: measured without TLS whatever --tls says
            dims["tls"] = tuple(dict.fromkeys((tls.OFF, *with_tls)))

        def exclude(d: dict[str, str]) -> bool:
            # updatable 'false' foreign tables cannot take pgbench's writes: RO only, as in seed 001.
            if d["workload"] == "rw" and d["target"] == "fdw_external_ro":
                return True
            if pooled.excluded(d):
                return True
            if d.get("tls", tls.OFF) not in ((tls.OFF,) if d["target"] == "local" else with_tls):
                return True
            # Only the external targets cross a link; the others are always measured, directly.
            if d["target"] in REMOTE_TARGETS:
                return d["latency"] not in requested
            return d["latency"] != DIRECT

        # postgres_fdw's options have no effect on the local table: its cases carry '-' for them.
        return not_applicable(cross(self.name, self.dimensions, dims, exclude), fdw.FAMILY.owns,
                              lambda c: c["target"] != "local")

    def path(self, case: Case) -> NetworkPath | None:
        return spec.case_path(case)

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> Setup:
        p = env.options.params
        t0 = time.monotonic()
        # With links requested, the source is a remote role: on its own network stack when possible.
        source = env.servers.server(SOURCE_ROLE, STATEMENTS, remote=links_requested(env.options),
                                    bandwidth_kbit=p.get("bandwidth"), tls=tls.ON in tls_values(env.options))
        needs_external = any(t in REMOTE_TARGETS for t in env.options.dims["target"])
        external = env.servers.server("external", STATEMENTS) if needs_external else None
        if external is not None and not external.managed:
            fdw.warn_logged_password(env.log, external)
        env.log(f"servers up in {time.monotonic() - t0:.1f} s")

        t0 = time.monotonic()
        source.create_database("source")
        for cluster in filter(None, (source, external)):
            if cluster.managed:   # a user's server: only where its DBA made it available (template1)
                cluster.execute("postgres", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        pgbench.initialize(env.bins.path("pgbench"), *source.client_args("source"), p["scale"],
                           _passfile(source))
        env.log(f"pgbench data at scale {p['scale']} loaded in {time.monotonic() - t0:.1f} s")
        copied: dict[str, int] = {}
        if p.get("script_tables"):
            t0 = time.monotonic()
            with source.connect("postgres") as theirs, source.connect("source") as ours:   # theirs: read-only
                copied = copy_tables.copy_tables(theirs, ours, tuple(p["script_tables"]))
            env.log(f"--script-tables: {', '.join(f'{t} ({n:,} rows)' for t, n in copied.items())} copied into "
                    f"our database in {time.monotonic() - t0:.1f} s")
        if p.get("init"):
            t0 = time.monotonic()
            _run_init(env, source, p["init"])
            env.log(f"--init {p['init']['name']} run on the source in {time.monotonic() - t0:.1f} s")

        isolation = ISOLATIONS[p["isolation"]]
        fdw_targets.set_isolation(source, "source", isolation)
        with source.connect("source") as conn:   # the scripts' tables too: ours in public, no extension's
            tables = fdw.own_relations(conn) if p.get("init") or p.get("script_tables") else TABLES
        env.state = FdwOverheadState(source, fdw_targets.targets(env, source, external, isolation, tables),
                                     _script_files(p.get("script") or []), copied)
        cases = [c for c in self.cases(env.options) if c["pg"] == env.major]
        env.state.pooled_cases = [c for c in cases if pooled.pooled(c.as_dict())]
        for case in env.state.pooled_cases:   # every pooler and alias up before the first round
            pooled.poolers_of(env, case)
        pinned = roof.closed_loop_tps(env, cases, lambda twin: self._closed_tps(env, twin))
        facts = self._facts(env, cases, isolation, copied)
        tools = {"pgbench": pgbench.version(env.bins.path("pgbench")),
                 **({"pgbouncer": pgbouncer.version()} if env.state.pooled_cases else {})}
        return Setup(tools=tools, facts=facts, pinned=pinned)

    def _facts(self, env: StudyEnv, cases: list[Case], isolation: str, copied: dict[str, int]) -> dict:
        """What the run's setup records: pgbench's flags and each case's command, the knobs, the
        user's scripts, the rates' closed loops, the poolers."""
        p = env.options.params
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
        if p.get("script_tables"):
            facts["script_tables"] = copied
        if env.state.closed_tps:
            facts["rate_closed_tps"] = env.state.closed_tps
        if env.state.pooled_cases:
            facts["poolers"] = "PgBouncer: pgbench over its unix socket (trust, as the server's); postgres_fdw " \
                "over loopback TCP (scram-sha-256); the pooler reaches its server by the server's socket" + \
                ("; with --tls on, the FDW hop's pooler its source over TCP: both legs TLS, verify-full"
                 if tls.ON in tls_values(env.options) else "")
            facts["excluded"] = pooled.EXCLUDED
        return facts

    def _closed_tps(self, env: StudyEnv, twin: Case) -> float:
        """A closed-loop case's TPS, untimed (pgbench -T duration): what --rate's shares are of."""
        self.before_measure(env, twin)
        return pgbench.run(env.bins.path("pgbench"), self._run(env, twin), log=False)["tps"]

    # -- one measurement --------------------------------------------------------------------
    def probe(self, env: StudyEnv) -> list[dict]:
        """The FDW hop from the external server to the source, per path: a one-row foreign scan
        (postgres_fdw's cursor and transaction round trips over the path), timed on the external."""
        out = []
        for (target, latency, hop), (cluster, db) in env.state.targets.items():
            if target == "fdw_external":
                with cluster.connect(db) as conn:
                    timing = time_statement(conn, HOP_SCAN, HOP_SCANS, warmup=3)
                hops = () if hop == "direct" else (pooler_hop(hop, fdw=True),)
                out.append({"link": NetworkPath(env.major, SOURCE_ROLE, latency, hops).id + HOP, **timing})
        return out + pooled.probes(env)

    def expected_measurement_s(self, options: StudyOptions) -> float:
        """pgbench -T, and about a second around it: its start, the evidence, the store."""
        return int(options.params["duration"]) + 1.0

    def before_measure(self, env: StudyEnv, case: Case) -> None:
        source = env.state.source
        if case["workload"] == "rw":
            # What pgbench -n skips, done on the source itself: never through a foreign table.
            source.execute("source", "VACUUM pgbench_branches", "VACUUM pgbench_tellers", "TRUNCATE pgbench_history")
        if case["target"] != "local":
            # The case's postgres_fdw options and --set session settings in force for pgbench's (new) sessions.
            cluster, db = env.state.targets[pooled.target_key(case)]
            fdw.set_case_options(env, case, cluster, db, [SERVER], hop=pooled.fdw_hop_options(env, case))
        if evidence_on(env.options):
            pooled.before(env, case)

    def watched(self, env: StudyEnv, case: Case) -> list[Watched]:
        """The server pgbench connects to, and the source behind a foreign table (their statements
        apart: see evidence_metrics)."""
        cluster, db = env.state.targets[pooled.target_key(case)]
        source = env.state.source
        if cluster is source:   # local, or fdw_local: one server, both databases
            watched = [source.watched(SOURCE_ROLE, *dict.fromkeys((db, "source")))]
        else:
            watched = [cluster.watched("external", db), source.watched(SOURCE_ROLE, "source")]
        return [dataclasses.replace(w, skip=UNTRACKED) for w in watched]

    def evidence_metrics(self, env: StudyEnv, case: Case, metrics: Mapping, evidence: dict) -> dict:
        """What postgres_fdw sends the source per pgbench transaction, counted in untimed passes
        after the measurement (statements.py), which the evidence keeps."""
        if not evidence_on(env.options):
            return {}
        figures = pooled.after(env, case, evidence)   # before the passes below, which cross the poolers too
        if case["target"] == "local":
            return figures
        source = env.state.source
        record, why = statements.count(env, self._run(env, roof.closed_twin(case)), metrics["tps"],
                                       source.watched(SOURCE_ROLE, "source"), source.managed)
        if record is None:
            evidence["missing"][f"{SOURCE_ROLE}.statement_pass"] = why
            return figures
        evidence["statement_pass"] = record
        return {**figures, **statements.metrics(record)}

    @staticmethod
    def _run(env: StudyEnv, case: Case) -> pgbench.TimedRun:
        p = env.options.params
        cluster, db = env.state.targets[pooled.target_key(case)]
        pooler, name = pooled.client_pooler(env, case, cluster, db)
        clients = int(case["clients"])
        return pgbench.TimedRun(*(pooler or cluster).client_args(name), clients=clients, passfile=_passfile(cluster),
                                duration_s=int(p["duration"]), select_only=case["workload"] == "ro",
                                max_tries=int(p["max_tries"]), threads=min(clients, os.cpu_count() or 1),
                                # a run stored before --protocol, resumed, keeps its case ids: none has one
                                protocol=case.get("protocol", spec.DEFAULT_PROTOCOL), scripts=env.state.scripts,
                                pgoptions=guc.pgoptions(guc.session(env, case)),
                                rate=roof.offered(case, env.state.closed_tps), latency_limit_ms=p.get("latency_limit"),
                                connect_each=p.get("connect") == "each")

    def measure(self, env: StudyEnv, case: Case) -> dict:
        """pgbench; its log as the case's last TPS and earlier runs in this process demand
        (pgbench_log.next_log: every transaction, a sample, or the aggregate log)."""
        spec = self._run(env, case)
        source = env.state.source
        # the FDW hop's TLS, at the closed loop or a rate: as the source logged postgres_fdw's connections,
        # or the pooler on the hop
        through = pooled.fdw_pooler(env, case) if case.get("fdw_via") == POOLER else None
        hop_log = tls.log_offset((through[0] if through else source).logfile) \
            if source.tls and case["target"] != "local" else None
        if spec.rate:   # a rate step: its p99 is the point, from a sample of at most roof's lines a second
            metrics = roof.measure_rate(env, case, spec)
        else:
            last_tps, logged = env.state.last_tps, env.state.logged_runs
            plan = pgbench_log.next_log(last_tps.get(case.case_id), spec.threads, logged.get(case.case_id, 0))
            metrics = pgbench.run(env.bins.path("pgbench"), dataclasses.replace(spec, log=plan),
                                  log=evidence_on(env.options))
            last_tps[case.case_id] = metrics["tps"]
            logged[case.case_id] = logged.get(case.case_id, 0) + 1
        if hop_log is not None:
            metrics.update(_fdw_tls(source, hop_log, case, through))
        return metrics

    # -- the report -------------------------------------------------------------------------
    def report(self, result: StudyResult) -> list[Table]:
        return study_report.tables(result) + roof.tables(result)

    def plots(self, result: StudyResult) -> list[Plot]:
        return study_report.plots(result) + roof.plots(result)

    def findings(self, result: StudyResult) -> dict:
        return roof.findings(result)


def _fdw_tls(source: Server, log_offset: int, case: Case, through: tuple | None) -> dict[str, str]:
    """The TLS postgres_fdw's connections to the source negotiated during the measurement, as the source
    logged them; through a pooler (pooler, alias) both legs' (Pooler.legs). CaseError when one of them is
    not the case's."""
    case_tls = case.get("tls", tls.OFF)
    try:
        if through is not None:
            return through[0].legs(log_offset, through[1], case_tls)
        seen = tls.connections_seen(source.logfile, log_offset, source.dbname("source"), "postgres_fdw")
        return {"tls": tls.check_seen(seen, case_tls, "postgres_fdw")}
    except (OSError, ValueError, psycopg.Error) as e:
        raise CaseError(f"tls {case_tls}: {e}") from None


def _passfile(server: Server) -> str | None:
    """The password file a client program needs: none through a managed server's private socket (a
    placed server has none here: TCP to its host)."""
    private_socket = server.managed and "unix" in server.transports
    return None if private_socket else (str(server.passfile) if server.passfile else None)


def _script_files(given: list[dict]) -> tuple[tuple[str, int], ...]:
    """The scripts' stored text written to a private directory for pgbench -f (removed at exit):
    what runs is what the run stored, even when the files changed since."""
    if not given:
        return ()
    directory = scratch.make_dir("scripts")
    atexit.register(shutil.rmtree, directory, True)
    out = []
    for s in given:
        path = directory / f"{s['name']}.sql"
        path.write_text(s["text"])
        out.append((str(path), int(s["weight"])))
    return tuple(out)


def _run_init(env: StudyEnv, source: Server, init: dict) -> None:
    """--init's SQL on the source's database through psql (stopping at the first error)."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix=scratch.prefix("init")) as f:
        f.write(init["text"])
        f.flush()
        dbname, host, port, user = source.client_args("source")
        res = subprocess.run([str(env.bins.path("psql")), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", f.name,
                              "-h", host, "-p", str(port), "-U", user, dbname], capture_output=True, text=True,
                             env=password_env(_passfile(source)))
    if res.returncode != 0:
        raise ServerRefused.of(f"--init {init['name']} on the source", res.stderr, res.returncode)
