"""The results database: schema, writes (each committed at once), reads.

By default a persistent managed cluster under the workspace, started for the duration of a
command (or shared with another pgpathbench process already running it); --results-dsn names
an existing database instead, where only the `pgpathbench` schema is touched.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Iterable

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..errors import UserError
from ..matrix import Case
from ..procs import pid_alive
from ..servers.binaries import PgBinaries
from ..servers.cluster import Cluster, postmaster_pid
from ..workspace import Workspace

if TYPE_CHECKING:
    from ..results.model import RunResult

RESULTS_DB = "pgpathbench"
_SCHEMA_LOCK = 7303  # advisory lock key: concurrent processes apply the schema one at a time


class ResultsStore:
    def __init__(self, conn: psycopg.Connection, cluster: Cluster | None = None):
        self.conn = conn
        self._cluster = cluster   # the managed cluster we started, stopped on close

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, dsn: str | None, workspace: Workspace, bins: PgBinaries) -> "ResultsStore":
        if dsn:
            try:
                conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
            except psycopg.Error as e:
                reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                raise UserError(f"--results-dsn: cannot connect ({reason}); check host, port, user and password") from None
            store = cls(conn)
        else:
            store = cls._open_managed(workspace, bins)
        store._apply_schema()
        return store

    @classmethod
    def _open_managed(cls, workspace: Workspace, bins: PgBinaries) -> "ResultsStore":
        bins.require("initdb", "postgres")
        cluster = Cluster("results", workspace.results_dir, bins, workspace.server_user)
        owned: Cluster | None = cluster
        workspace.results_dir.parent.mkdir(parents=True, exist_ok=True)
        # One process at a time decides whether to start it or to share a running one.
        with open(workspace.root / "results.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            pid = postmaster_pid(cluster.data)
            if pid is not None:
                # Another pgpathbench process runs it (it would have died with its owner): share it.
                lines = (cluster.data / "postmaster.pid").read_text().splitlines()
                cluster.port, owned = int(lines[3]), None
            else:
                cluster.start()
            cluster.create_database(RESULTS_DB)
        return cls(cluster.connect(RESULTS_DB), owned)

    def _apply_schema(self) -> None:
        sql = resources.files(__package__).joinpath("schema.sql").read_text()
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            self.conn.execute(sql)

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            if self._cluster is not None:
                self._cluster.stop()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writes -----------------------------------------------------------------------------
    def create_run(self, run_id: str, studies: list[str], preset: str | None, options: dict, seed: int) -> None:
        self.conn.execute(
            "INSERT INTO pgpathbench.run (run_id, studies, preset, options, seed, pid, host) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (run_id, studies, preset, Jsonb(options), seed, os.getpid(), socket.gethostname()))

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
                        path: str | None = None) -> None:
        self.conn.execute(
            "INSERT INTO pgpathbench.measurement (run_id, study, case_id, round, session, started_at, "
            "ok, error, duration_s, metrics, path) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (run_id, case.study, case.case_id, round_no, session, started_at, error is None, error,
             duration_s, Jsonb(metrics or {}), path))

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
        rows = self.conn.execute(
            "SELECT study, case_id, round FROM pgpathbench.measurement WHERE run_id = %s", (run_id,))
        return {tuple(r) for r in rows}

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
                "  m.duration_s, c.dims, m.metrics, m.path "
                "FROM pgpathbench.measurement m JOIN pgpathbench.run_case c USING (run_id, study, case_id) "
                "WHERE m.run_id = %s ORDER BY c.planned_order, m.round", (run_id,)).fetchall()


def _with_live_status(row: dict) -> dict:
    """A 'running' run whose process is gone on this host was killed: say so."""
    if row["status"] == "running" and row.get("host") == socket.gethostname() and not (row["pid"] and pid_alive(row["pid"])):
        row = {**row, "status": "killed"}
    return row
