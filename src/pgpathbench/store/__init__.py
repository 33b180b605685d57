"""The results database: schema, writes (each committed at once), reads.

By default a persistent managed cluster under the workspace, running while any pgpathbench
process of the workspace uses it (keeper.py: several runs, `report` and `runs` at once share
it); --results-dsn names an existing database instead, where only the `pgpathbench` schema is
touched.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Iterable, Mapping

import psycopg
from psycopg.sql import SQL, Identifier, Literal
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..clientenv import child_env, user_conninfo
from ..errors import RunFailed, UserError
from ..matrix import Case
from ..procs import cmdline, end_process, pid_alive
from ..servers.binaries import PgBinaries
from ..servers.cluster import Cluster
from ..servers.postmaster import postmaster_pid, stop_pid
from ..workspace import Workspace
from . import keeper

if TYPE_CHECKING:
    from ..results.model import RunResult

RESULTS_DB = "pgpathbench"
_SCHEMA_LOCK = 7303  # advisory lock key: concurrent processes apply the schema one at a time


def _refused_schema(conn: psycopg.Connection, e: psycopg.Error) -> str:
    """--results-dsn's one line when its role may not keep the store there: what is missing, and
    the statement that grants it."""
    role, db, owner, may_create = conn.execute(
        "SELECT current_user, current_database(), (SELECT nspowner::regrole::text FROM pg_namespace WHERE "
        "nspname = 'pgpathbench'), has_database_privilege(current_database(), 'CREATE')").fetchone()
    if isinstance(e, psycopg.errors.ReadOnlySqlTransaction):
        return (f"--results-dsn: database {db} is read-only to role {role} (a standby, or "
                "default_transaction_read_only); give the DSN of a writable database")
    if owner is None and not may_create:
        return (f"--results-dsn: role {role} may not create schema pgpathbench in database {db} (it lacks CREATE "
                f"on the database); GRANT CREATE ON DATABASE {Identifier(db).as_string(conn)} TO "
                f"{Identifier(role).as_string(conn)}, or give a database where it has it")
    if owner is not None and owner != role:
        return (f"--results-dsn: schema pgpathbench in database {db} belongs to role {owner}, and role {role} may not "
                f"change it; give the DSN of role {owner}, which keeps the store there")
    return (f"--results-dsn: role {role} lacks a privilege the store needs in database {db} "
            f"({e.diag.message_primary}); give the DSN of the role that owns schema pgpathbench there")


class ResultsStore:
    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self._users = None        # our share of the managed results cluster (keeper.py), if we use it
        self._workspace: Workspace | None = None

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, dsn: str | None, workspace: Workspace, bins: PgBinaries, doing: str = "reading") -> "ResultsStore":
        """The store: --results-dsn's database, or the workspace's results cluster, joined as a
        process that is `doing` something (Workspace.enter: `clean --all` names it)."""
        if dsn:
            try:
                conn = psycopg.connect(user_conninfo(dsn), autocommit=True, connect_timeout=10)
            except psycopg.Error as e:   # the whole reason, on one line (libpq never repeats a password)
                reason = " ".join(str(e).split()).removeprefix("connection failed: ") or type(e).__name__
                raise UserError(f"--results-dsn: cannot connect ({reason}); check host, port, user and password") from None
            store = cls(conn)
            try:
                store._apply_schema()
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction) as e:
                message = _refused_schema(conn, e)
                conn.close()
                raise UserError(message) from None
            return store
        store = cls._open_managed(workspace, bins, doing)
        store._apply_schema()
        return store

    @classmethod
    def _open_managed(cls, workspace: Workspace, bins: PgBinaries, doing: str) -> "ResultsStore":
        """Join the workspace's results cluster, started by a keeper if nobody runs it (keeper.py)."""
        bins.require("initdb", "postgres")
        cluster = Cluster("results", workspace.results_dir, bins, workspace.server_user,
                          template=workspace.templates_dir)
        workspace.enter(doing)   # first: `clean --all` never removes a cluster we are joining
        users = open(workspace.root / keeper.USERS, "a")   # held (shared) while this store is open
        try:
            with open(workspace.root / keeper.LOCK, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                fcntl.flock(users, fcntl.LOCK_SH)
                cluster.port = _running_port(workspace, cluster) or _start_keeper(workspace, cluster)
            store = cls(cluster.connect(RESULTS_DB))
        except BaseException:
            _leave(workspace, users)
            raise
        store._users, store._workspace = users, workspace
        return store

    def _apply_schema(self) -> None:
        """schema.sql, unless the store has this one already (its digest is the schema's comment) and
        our role could apply it (owns the schema, in a writable database): a command that only reads
        then writes nothing, so it works on a full disk, and a role that may not keep the store there
        is refused as before."""
        text = resources.files(__package__).joinpath("schema.sql").read_text()
        digest = f"pgpathbench schema {hashlib.sha256(text.encode()).hexdigest()[:16]}"
        if self._has_schema(digest):
            return
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            self.conn.execute(text)
            self.conn.execute(SQL("COMMENT ON SCHEMA pgpathbench IS {}").format(Literal(digest)))

    def _has_schema(self, digest: str) -> bool:
        row = self.conn.execute(
            "SELECT obj_description(oid, 'pg_namespace') = %s AND pg_has_role(nspowner, 'USAGE') "
            "AND NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off' "
            "FROM pg_namespace WHERE nspname = 'pgpathbench'", (digest,)).fetchone()
        return bool(row and row[0])

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            users, self._users = self._users, None
            if users is not None:   # the keeper lingers for the next command (keeper.LINGER_S)
                try:
                    os.utime(users.fileno())
                finally:
                    users.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writes -----------------------------------------------------------------------------
    def create_run(self, run_id: str, study: str, preset: str | None, options: dict, seed: int) -> None:
        """A run of one study (the `studies` column is an array of one, as the first schema made it)."""
        self.conn.execute(
            "INSERT INTO pgpathbench.run (run_id, studies, preset, options, seed, pid, host) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (run_id, [study], preset, Jsonb(options), seed, os.getpid(), socket.gethostname()))

    def set_repeat(self, run_id: str, repeat: int) -> None:
        """The run's rounds, raised by a resume that adds rounds (run --resume RUN --repeat N)."""
        self.conn.execute("UPDATE pgpathbench.run SET options = jsonb_set(options, '{studies,0,repeat}', %s) "
                          "WHERE run_id = %s", (Jsonb(repeat), run_id))

    def pin_params(self, run_id: str, pinned: dict[str, dict]) -> None:
        """Parameters a study chose by measuring (Setup.pinned), merged into the run's options by
        key (one major's beside another's), so that a resumed run uses them."""
        for name, value in pinned.items():
            path = ["studies", "0", "params", name]
            self.conn.execute("UPDATE pgpathbench.run SET options = jsonb_set(options, %s, "
                              "coalesce(options #> %s, '{}') || %s) WHERE run_id = %s",
                              (path, path, Jsonb(value), run_id))

    def start_session(self, run_id: str, fingerprint: dict) -> int:
        """Record the environment of this start (or resume); returns the session number."""
        row = self.conn.execute(
            "UPDATE pgpathbench.run SET status = 'running', pid = %s, finished_at = NULL, "
            "environment = jsonb_set(environment, '{sessions}', "
            "  coalesce(environment->'sessions', '[]') || %s) "
            "WHERE run_id = %s RETURNING jsonb_array_length(environment->'sessions')",
            (os.getpid(), Jsonb([fingerprint]), run_id)).fetchone()
        return row[0]

    def update_session(self, run_id: str, session: int, fingerprint: dict) -> None:
        """Replace this session's fingerprint with what is known once servers run."""
        self.conn.execute(
            "UPDATE pgpathbench.run SET environment = jsonb_set(environment, %s, %s) WHERE run_id = %s",
            (["sessions", str(session - 1)], Jsonb(fingerprint), run_id))

    def add_cases(self, run_id: str, cases: Iterable[Case]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO pgpathbench.run_case (run_id, study, case_id, dims, planned_order) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(run_id, c.study, c.case_id, Jsonb(c.as_dict()), i) for i, c in enumerate(cases)])

    def add_measurement(self, run_id: str, case: Case, round_no: int, session: int, started_at: datetime,
                        duration_s: float | None, metrics: dict | None, error: str | None,
                        path: str | None = None, series: list | None = None, evidence: dict | None = None) -> None:
        """One measurement; one that failed before is replaced, its error kept in previous_errors."""
        self.conn.execute(
            "INSERT INTO pgpathbench.measurement AS m (run_id, study, case_id, round, session, started_at, "
            "ok, error, duration_s, metrics, path, series, evidence) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (run_id, study, case_id, round) DO UPDATE SET session = EXCLUDED.session, "
            "  started_at = EXCLUDED.started_at, ok = EXCLUDED.ok, error = EXCLUDED.error, "
            "  duration_s = EXCLUDED.duration_s, metrics = EXCLUDED.metrics, path = EXCLUDED.path, "
            "  series = EXCLUDED.series, evidence = EXCLUDED.evidence, "
            "  attempts = m.attempts + 1, "
            "  previous_errors = m.previous_errors || jsonb_build_array(jsonb_build_object("
            "    'session', m.session, 'started_at', m.started_at, 'error', m.error)) "
            "WHERE NOT m.ok",
            (run_id, case.study, case.case_id, round_no, session, started_at, error is None, error,
             duration_s, Jsonb(metrics or {}), path, Jsonb(series or []), Jsonb(evidence or {})))

    def void_round(self, run_id: str, study: str, round_no: int, session: int, reason: str) -> int:
        """Mark the measurements one session took in one round as failed (their conditions were
        not the ones recorded); returns how many."""
        return self.conn.execute(
            "UPDATE pgpathbench.measurement SET ok = false, metrics = '{}', series = '[]', evidence = '{}', "
            "  error = %s || coalesce('; ' || error, '') "
            "WHERE run_id = %s AND study = %s AND round = %s AND session = %s",
            (reason, run_id, study, round_no, session)).rowcount

    def add_probes(self, run_id: str, round_no: int, phase: str, session: int, probes: list[dict]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO pgpathbench.link_probe (run_id, round, phase, session, link, rtt_median_ms, "
                "rtt_p95_ms, rtt_min_ms, round_trips) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(run_id, round_no, phase, session, p["link"], p["median_ms"], p["p95_ms"], p["min_ms"], p["n"])
                 for p in probes])

    def finish_run(self, run_id: str, status: str, summary: dict | None = None) -> None:
        self.conn.execute(
            "UPDATE pgpathbench.run SET status = %s, finished_at = now(), "
            "summary = summary || %s WHERE run_id = %s",
            (status, Jsonb(summary or {}), run_id))

    # -- reads ------------------------------------------------------------------------------
    def done(self, run_id: str) -> set[tuple[str, str, int]]:
        """The (study, case, round) measured successfully: a resume measures every other one."""
        rows = self.conn.execute(
            "SELECT study, case_id, round FROM pgpathbench.measurement WHERE run_id = %s AND ok", (run_id,))
        return {tuple(r) for r in rows}

    def failed_count(self, run_id: str) -> tuple[int, int]:
        """(failed, stored) measurements of a run."""
        row = self.conn.execute(
            "SELECT count(*) FILTER (WHERE NOT ok), count(*) FROM pgpathbench.measurement WHERE run_id = %s",
            (run_id,)).fetchone()
        return row[0], row[1]

    def case_times(self, study: str, case_ids: Iterable[str], host: str, params: Mapping, ignored: Iterable[str],
                   last_runs: int) -> dict[str, float]:
        """Case id -> the median duration_s (the measurement itself) of its successful measurements
        taken on `host` (per session: a run resumed elsewhere counts where each was taken), in the
        `last_runs` latest runs of the study that measured it with the same parameters but `ignored`."""
        with self.conn.cursor() as cur:
            rows = cur.execute(
                "WITH here AS ("   # sessions on this host of runs of the same study and parameters
                "  SELECT r.run_id, s.n::int AS session, r.started_at FROM pgpathbench.run r, "
                "    jsonb_array_elements(r.environment->'sessions') WITH ORDINALITY AS s(fp, n) "
                "  WHERE %(study)s = ANY(r.studies) AND coalesce(s.fp->'machine'->>'host', s.fp->>'host') = %(host)s "
                "    AND (r.options->'studies'->0->'params') - %(ignored)s::text[] = %(params)s - %(ignored)s::text[]"
                "), timed AS ("
                "  SELECT m.case_id, m.duration_s, dense_rank() OVER ("
                "    PARTITION BY m.case_id ORDER BY h.started_at DESC, h.run_id DESC) AS recency "
                "  FROM pgpathbench.measurement m JOIN here h USING (run_id, session) "
                "  WHERE m.study = %(study)s AND m.case_id = ANY(%(cases)s) AND m.ok AND m.duration_s IS NOT NULL) "
                "SELECT case_id, percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_s) FROM timed "
                "WHERE recency <= %(runs)s GROUP BY case_id",
                {"study": study, "host": host, "params": Jsonb(dict(params)), "ignored": list(ignored),
                 "cases": list(case_ids), "runs": last_runs}).fetchall()
        return dict(rows)

    def run(self, ref: str) -> dict:
        """A run by id, or the newest with 'latest'; UserError if there is none."""
        back = re.fullmatch(r"latest(?:~(\d+))?", ref)
        with self.conn.cursor(row_factory=dict_row) as cur:
            if back:  # latest, latest~1 (the one before), ...
                row = cur.execute("SELECT * FROM pgpathbench.run ORDER BY started_at DESC LIMIT 1 OFFSET %s",
                                  (int(back.group(1) or 0),)).fetchone()
            else:
                row = cur.execute("SELECT * FROM pgpathbench.run WHERE run_id = %s", (ref,)).fetchone()
        if row is None:
            raise UserError("RUN: no runs stored yet; start one with 'pgpathbench run fdw-overhead'" if ref == "latest"
                            else f"RUN: no run '{ref}'; 'pgpathbench runs' lists them")
        return _with_live_status(row)

    def runs(self) -> list[dict]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                "SELECT r.run_id, r.studies, r.preset, r.started_at, r.finished_at, r.status, r.pid, r.host, "
                "  (SELECT count(*) FROM pgpathbench.run_case c WHERE c.run_id = r.run_id) AS cases, "
                "  (SELECT count(*) FROM pgpathbench.measurement m WHERE m.run_id = r.run_id) AS measurements, "
                "  (SELECT count(*) FROM pgpathbench.measurement m WHERE m.run_id = r.run_id AND NOT ok) AS errors "
                "FROM pgpathbench.run r ORDER BY r.started_at").fetchall()
        return [_with_live_status(r) for r in rows]

    def probes(self, run_id: str) -> list[dict]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(
                "SELECT link, round, phase, session, measured_at, rtt_median_ms, rtt_p95_ms, rtt_min_ms, round_trips "
                "FROM pgpathbench.link_probe WHERE run_id = %s ORDER BY measured_at", (run_id,)).fetchall()

    def cases(self, run_id: str) -> list[dict]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute("SELECT study, case_id, dims, planned_order FROM pgpathbench.run_case "
                               "WHERE run_id = %s ORDER BY planned_order", (run_id,)).fetchall()

    def result(self, ref: str) -> "RunResult":
        """The result model of a run (results/model.py): what every report reads."""
        from ..results.model import RunResult
        run = self.run(ref)
        return RunResult.from_rows(run, self.cases(run["run_id"]), self.measurements(run["run_id"]),
                                   self.probes(run["run_id"]))

    def measurements(self, run_id: str) -> list[dict]:
        with self.conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(
                "SELECT m.run_id, m.study, m.case_id, m.round, m.session, m.started_at, m.ok, m.error, "
                "  m.duration_s, c.dims, m.metrics, m.path, m.attempts, m.previous_errors, m.series, m.evidence "
                "FROM pgpathbench.measurement m JOIN pgpathbench.run_case c USING (run_id, study, case_id) "
                "WHERE m.run_id = %s ORDER BY c.planned_order, m.round", (run_id,)).fetchall()


def _with_live_status(row: dict) -> dict:
    """A 'running' run whose process is gone on this host was killed: say so."""
    if row["status"] == "running" and row.get("host") == socket.gethostname() and not (row["pid"] and pid_alive(row["pid"])):
        row = {**row, "status": "killed"}
    return row


# -- the shared managed cluster (see keeper.py) ---------------------------------------------------
KEEPER_START_S = 180     # initdb and a first start on a loaded machine
KEEPER_STOP_S = 90
KEEPER_MAIN = "import json, sys; from pgpathbench.store.keeper import main; sys.exit(main(json.loads(sys.argv[1])))"


def keeper_pid(workspace: Workspace) -> int | None:
    try:
        pid = int((workspace.root / keeper.KEEPER_PID).read_text())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) and "pgpathbench.store.keeper" in cmdline(pid) else None


def _running_port(workspace: Workspace, cluster: Cluster) -> int | None:
    """The port of the cluster when its keeper runs it (under results.lock)."""
    if keeper_pid(workspace) is None or postmaster_pid(cluster.data) is None:
        return None
    try:
        return int((cluster.data / "postmaster.pid").read_text().splitlines()[3])
    except (OSError, ValueError, IndexError):
        return None


def _start_keeper(workspace: Workspace, cluster: Cluster) -> int:
    """Start a keeper for the cluster and wait for its `ready PORT` (under results.lock)."""
    spec = {"workspace": str(workspace.root), "root": str(cluster.root), "bindir": str(cluster.bins.bindir),
            "major": cluster.bins.major, "user": cluster.user.name, "dbname": RESULTS_DB,
            "template": str(cluster.template)}
    with open(workspace.root / "results.keeper.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-c", KEEPER_MAIN, json.dumps(spec)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                start_new_session=True, cwd="/", env=child_env())
    (workspace.root / keeper.KEEPER_PID).write_text(f"{proc.pid}\n")
    ready, _, _ = select.select([proc.stdout], [], [], KEEPER_START_S)
    line = proc.stdout.readline().decode(errors="replace").strip() if ready else ""
    proc.stdout.close()
    if line.startswith("ready "):
        return int(line.split()[1])
    stop_keeper(proc.pid)
    if line.startswith("error --workspace"):
        raise UserError(line[len("error "):])
    raise RunFailed(f"the results cluster did not start: {line[6:] or 'no answer'}; see "
                    f"{workspace.root / 'results.keeper.log'} and {cluster.logfile}, then run the command again")


def _leave(workspace: Workspace, users) -> list[str] | None:
    """Give up our share and, when nobody else uses the cluster, stop the keeper (and so the
    cluster) at once and wait: `clean`, a store that could not open. What it stopped; None while
    others use the cluster."""
    with open(workspace.root / keeper.LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            users.close()
            return None
        said = []
        try:
            pid = keeper_pid(workspace)
            if pid is not None:
                stop_keeper(pid)
                said.append(f"stopped the results cluster's keeper (pid {pid})")
            leftover = postmaster_pid(workspace.results_dir / "data")
            if leftover is not None:   # a keeper that died and left its postmaster shutting down
                stop_pid(leftover)
                said.append(f"stopped the results cluster (pid {leftover})")
        finally:
            users.close()
        return said


def stop_unused(workspace: Workspace) -> list[str]:
    """What `clean` does to the results cluster: stop it (keeper, a postmaster a keeper left) when
    no process uses it; a cluster in use is left alone. What it did."""
    if not (workspace.root / keeper.USERS).exists():
        return []
    said = _leave(workspace, open(workspace.root / keeper.USERS, "a"))
    return ["left the results cluster running: other pgpathbench processes use it"] if said is None else said


def stop_keeper(pid: int) -> None:
    """SIGTERM, and wait until it has stopped the cluster and exited (SIGKILL after a while: the
    postmaster then gets its parent-death signal)."""
    end_process(pid, ((signal.SIGTERM, KEEPER_STOP_S), (signal.SIGKILL, 10)), poll_s=0.02)
