"""The loop every study shares: rounds, shuffled order, one commit per measurement, resume,
interrupts.

For round in 1..R, every case in an order shuffled by (seed, round), measured once and
committed at once: interleaving keeps machine drift out of comparisons, and a crash loses at
most the measurement in flight. A resumed run replays the same orders and measures only the
(case, round) pairs without a successful measurement (missing or failed). SIGINT and SIGTERM stop
the measurement in flight, mark the run interrupted and tear down every server; a managed server
that dies fails the measurement in flight and stops the run (status failed, one line); so does
an emulated link whose toxics someone else changed. Either way the run can be resumed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import secrets
import signal
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

import psycopg

from . import clientenv, disk, plan, scratch
from .environment import host_fingerprint
from .evidence import collected
from .errors import CaseError, Interrupted, RunFailed, ServerRefused, UserError, reason
from .matrix import StudyOptions, round_order
from .procs import pid_alive
from .progress import ProgressReporter, format_duration, headline
from .results.fingerprint import Fingerprint
from .results.model import MODEL_VERSION
from .results.upgrade import upgrade_run
from .servers import binaries, guc, user, user_checks
from .servers.binaries import PgBinaries
from .servers.hosts import Hosts
from .servers.placement import Placements
from .servers.topology import Servers, clear_killed_runs
from .servers.user import UserDsn
from .stop_signals import check_interrupted, pending_signal, signals_interrupt
from .store import ResultsStore
from .studies import get as get_study
from .results.convergence import MIN_ROUNDS, plan_round
from .studies.base import StudyEnv, evidence_on, until_ci
from .tools import spawn
from .workspace import Workspace


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


DEATH_GRACE_S = 1.0   # after a failed measurement: a server's death may still be under way


class _Stopped(Exception):
    """The run cannot go on (a server died, a link was changed under it): one line, status failed."""


@dataclass
class Taken:
    """What one measurement left beside its metrics."""
    duration_s: float | None = None
    series: list = field(default_factory=list)
    evidence: dict = field(default_factory=dict)


@dataclass
class _Clock:
    measure_s: float = 0.0
    bookkeeping_s: float = 0.0
    timings: dict = field(default_factory=dict)


def take_measurement(study, env: StudyEnv, case, taken: Taken) -> dict:
    """What the case needs first (untimed), then the measurement, timed, with the evidence of
    the servers it involves collected around it (unless --evidence off); its series apart from
    its metrics. The runner's one way to measure, and bench/evidence_overhead.py's."""
    guc.apply_server_settings(env, case)      # --set's sighup and postmaster settings, on every managed server
    study.before_measure(env, case)
    evidence = None
    watched = guc.watch_settings(env, study.watched(env, case)) if evidence_on(env.options) else []
    try:
        with collected(watched) as evidence:
            t0 = time.perf_counter()
            try:
                metrics = study.measure(env, case)
            finally:
                taken.duration_s = time.perf_counter() - t0
    finally:   # a failed measurement keeps what the servers did too
        taken.evidence = evidence.data if evidence is not None else {}
    taken.series = metrics.pop("series", [])
    metrics.update(study.evidence_metrics(env, case, metrics, evidence.data))
    return metrics


class Runner:
    def __init__(self, store: ResultsStore, workspace: Workspace, bins: PgBinaries,
                 progress: ProgressReporter, keep_servers: bool = False, user_dsns: dict[str, UserDsn] | None = None,
                 hosts: Hosts | None = None):
        self.store, self.workspace, self.bins = store, workspace, bins
        self.progress, self.keep_servers = progress, keep_servers
        self.user_dsns = user_dsns or {}   # --server ROLE=DSN, passwords included (never stored)
        self.hosts = hosts                 # --place's hosts, their connections open (a resume opens its own)

    def binaries(self, options: StudyOptions) -> dict[str, PgBinaries]:
        """The binaries of every major the run asks for (--pg), fetched now if need be; the study may
        run another build of a major (file-fdw-tpch's Citus)."""
        majors = options.dims.get("pg", (str(self.bins.major),))
        study = get_study(options.study)
        return {m: study.server_binaries(options, self.bins if int(m) == self.bins.major else
                                         binaries.resolve(int(m), workspace=self.workspace, log=self.progress.log))
                for m in majors}

    def start(self, options: StudyOptions, seed: int | None = None) -> str:
        self.binaries(options)  # a missing or unfetchable version fails before anything is written
        run_id = new_run_id()
        self.workspace.enter(f"run {run_id}")   # seen by `clean --all` (and waiting for one at work)
        seed = secrets.randbits(31) if seed is None else seed
        self.store.create_run(run_id, options.study, options.preset,
                              {"studies": [options.to_json()], "pg_bindir": str(self.bins.bindir),
                               "model_version": MODEL_VERSION}, seed)
        self.progress.log(f"run {run_id}: {options.study}, preset {options.preset}, "
                          f"{options.repeat} rounds, seed {seed}")
        self._execute(run_id, options, seed)
        return run_id

    def resume(self, run_ref: str, repeat: int | None = None) -> str:
        """Measure every (case, round) of the run without a successful measurement: the missing
        ones and the failed ones (each failure stays recorded in previous_errors); with `repeat`
        above the run's rounds, the rounds added too."""
        run = self.store.run(run_ref)
        if run["status"] == "running" and run["pid"] and pid_alive(run["pid"]):
            raise UserError(f"--resume: run {run['run_id']} is still running (pid {run['pid']}); "
                            "wait for it or stop it first")
        # A run holds one study; its options as today's version stores them (results/upgrade.py).
        options = StudyOptions.from_json(upgrade_run(run).study_options)
        stored_repeat = options.repeat
        if repeat is not None and repeat != stored_repeat:
            if repeat < stored_repeat:
                raise UserError(f"--repeat: run {run['run_id']} has {options.repeat} rounds; --resume can add rounds "
                                f"(--repeat above {options.repeat}), not take any away")
            options = dataclasses.replace(options, repeat=repeat)
        self.workspace.enter(f"run {run['run_id']}")
        failed, stored = self.store.failed_count(run["run_id"])
        planned = len(get_study(options.study).cases(options)) * options.repeat
        if run["status"] == "finished" and not failed and stored >= planned:
            raise UserError(f"--resume: run {run['run_id']} is already complete; 'pgpathbench report {run['run_id']}', or --repeat above {options.repeat} to add rounds")
        self.user_dsns = user.from_stored(options.params)   # their passwords: PGPASSWORD or ~/.pgpass now
        user_checks.preflight(get_study(options.study), options, self.user_dsns, self.bins)
        if options.repeat != stored_repeat:   # checked: now it is the run's
            self.store.set_repeat(run["run_id"], options.repeat)
        self.progress.log(f"resuming run {run['run_id']} ({run['status']}): {options.study}"
                          + (f", measuring {failed} failed measurements again" if failed else "")
                          + (f", {options.repeat} rounds" if repeat else ""))
        with Placements.from_stored(options.params).opened(self.workspace.root, options.dims.get("pg", ())) \
                as self.hosts:
            self._execute(run["run_id"], options, run["seed"])
        return run["run_id"]

    def _execute(self, run_id: str, options: StudyOptions, seed: int) -> None:
        study = get_study(options.study)
        cases = study.cases(options)
        self.store.add_cases(run_id, cases)
        done = self.store.done(run_id)
        todo = [(r, c) for r in range(1, options.repeat + 1) for c in round_order(cases, seed, r)
                if (study.name, c.case_id, r) not in done]
        # The user's libpq and driver variables no connection of the run got (names only), beside the machine.
        ignored = clientenv.ignored(v for dsn in self.user_dsns.values() for v in dsn.from_env)
        fingerprint = Fingerprint(machine={**host_fingerprint(), "environment_ignored": ignored})
        seconds, each = _case_seconds(study, options, todo, self.store, fingerprint.machine["host"])
        self.progress.log(_plan(options, cases, todo, seconds, each))
        for path in scratch.sweep():
            self.progress.log(f"removed {path}, left by a process of ours that was killed")
        for said in clear_killed_runs(self.workspace, self.bins, self.store.runs(), run_id):
            self.progress.log(said)
        session = self.store.start_session(run_id, fingerprint.to_json())
        clock = _Clock()
        try:
            with signals_interrupt(), Servers(self.workspace, run_id, self.bins, self.keep_servers,
                                                  log=self.progress.log, user_dsns=self.user_dsns,
                                                  hosts=self.hosts, placed=options.params.get("placed")) as servers:
                if todo:
                    envs = self._prepare(study, options, servers, run_id, session, fingerprint, clock)
                    try:
                        self.progress.start(study.name, len(cases) * options.repeat,
                                            len(cases) * options.repeat - len(todo), [(r, c.case_id) for r, c in todo],
                                            known=seconds)
                        self._measure_all(study, envs, servers, self._rounds(study, options, cases, run_id, seed),
                                          run_id, session, clock)
                    finally:   # out of a user's databases before they are dropped (before 13, none may be in)
                        for env in envs.values():
                            env.close_kept()
                    self.progress.close()
        except Interrupted as e:
            self.progress.close()
            self._finish(run_id, "interrupted", clock, {"interrupted_by": signal.Signals(e.signum).name})
            raise
        except _Stopped as e:
            self.progress.close()
            self._finish(run_id, "failed", clock, {"error": str(e)})
            raise RunFailed(f"{e}; run {run_id} stopped, what was measured is kept: "
                            f"'pgpathbench run --resume {run_id}' measures the rest") from None
        except BaseException as e:
            self.progress.close()
            self._finish(run_id, "failed", clock,
                         {"error": "".join(traceback.format_exception_only(type(e), e)).strip()})
            if disk.is_full(e):   # a write of the store's before or after the measurements: which disk
                raise RunFailed(f"{disk.said_full(e, self.workspace.root)}; run {run_id} stopped, what was stored "
                                f"is kept: free some space, then 'pgpathbench run --resume {run_id}'") from None
            raise
        if (signum := pending_signal()) is not None:  # the last measurement's interrupt was swallowed
            self._finish(run_id, "interrupted", clock, {"interrupted_by": signal.Signals(signum).name})
            raise Interrupted(signum)
        self._finish(run_id, "finished", clock, {"failed_measurements": self.store.failed_count(run_id)[0]})

    def _prepare(self, study, options: StudyOptions, servers: Servers, run_id: str, session: int,
                 fingerprint: Fingerprint, clock: _Clock) -> dict[str, StudyEnv]:
        """Servers and data of every major, once per session; a server that dies meanwhile stops the run.
        What each major's prepare() set up lands in the session's fingerprint, per major."""
        t0 = time.monotonic()
        envs = {}
        with self._servers_watched(servers, "while servers and data were prepared"):
            for major, bins in self.binaries(options).items():
                envs[major] = StudyEnv(options, major, bins, servers.scoped(int(major), bins), self.progress.log)
                setup = study.prepare(envs[major])
                setup.facts.update(guc.prepare(envs[major]))   # --set: checked by the server, how applied
                if setup.pinned:
                    self.store.pin_params(run_id, setup.pinned)
                fingerprint.tools.update(setup.tools)
                fingerprint.setup.setdefault(major, {})[study.name] = setup.facts
                check_interrupted()
            clock.timings["prepare_s"] = round(time.monotonic() - t0, 3)
            self.progress.log(f"servers and data ready in {clock.timings['prepare_s']:.1f} s")
            fingerprint.servers, fingerprint.paths = servers.fingerprint(), servers.link_fingerprint()
        with self._store_watched("the session's servers and settings"):
            self.store.update_session(run_id, session, fingerprint.to_json())
        return envs

    @contextlib.contextmanager
    def _store_watched(self, what: str):
        """A write the store cannot take because a disk is full (its error says so, or its server died
        of a WAL write and the connection is lost) stops the run in one line, naming the disk while
        the run's servers still hold their space."""
        try:
            yield
        except psycopg.Error as e:
            if not (disk.full_of_ours(self.workspace.root) or disk.is_full(e)):
                raise
            raise _Stopped(f"{disk.said_full(e, self.workspace.root)}: {what} was not stored (free some space before resuming)") from None

    @contextlib.contextmanager
    def _servers_watched(self, servers: Servers, when: str):
        """An error while a server of the run is dead is that death, said in one line; so is a
        server's error (a full disk, a role's statement_timeout) or our own disk filling up."""
        try:
            yield
        except Exception as e:
            dead = servers.dead(wait_s=DEATH_GRACE_S)
            full = disk.full_of_ours(self.workspace.root) if disk.is_full(e) else ""
            if dead:
                raise _Stopped(f"server {', '.join(dead)} died {when}"
                               + (f" (the disk is full: {full})" if full else "")) from None
            if full:
                raise _Stopped(f"the disk is full {when}: {full}: {reason(e)}") from None
            if isinstance(e, ServerRefused):
                raise _Stopped(f"an error {when}: {e}") from None
            if isinstance(e, psycopg.Error) or getattr(e, "errno", None) == errno.ENOSPC:
                # what a server refused, or a full disk, is no bug of ours: one line, resumable
                raise _Stopped(f"an error {when}: {reason(e)}") from None
            raise

    def _rounds(self, study, options: StudyOptions, cases: list, run_id: str, seed: int):
        """Each round and the cases it still measures (convergence.plan_round), decided as the
        round begins from what is stored."""
        for round_no in range(1, options.repeat + 1):
            todo, closed = plan_round(study, cases, seed, round_no, self.store.done(run_id),
                                      lambda: self.store.result(run_id).study, until_ci(options))
            self.progress.closed(closed)
            yield round_no, todo

    def _measure_all(self, study, envs: dict[str, StudyEnv], servers: Servers, rounds, run_id: str,
                     session: int, clock: _Clock) -> None:
        for round_no, todo in rounds:
            if not todo:
                continue
            self._between_rounds(servers, study, envs, run_id, round_no, "before", session)
            for case in todo:
                self._measure_one(study, envs[case["pg"]], servers, run_id, round_no, case, session, clock)
                check_interrupted()
            self._between_rounds(servers, study, envs, run_id, round_no, "after", session)
            self.progress.round_done()
            self.progress.log(f"round {round_no} done; the rest: about {format_duration(self.progress.remaining_s())}")

    def _measure_one(self, study, env: StudyEnv, servers: Servers, run_id: str, round_no: int, case,
                     session: int, clock: _Clock) -> None:
        """One measurement, committed at once. A server that died during it fails it, and the run."""
        started_at, t0 = datetime.now(timezone.utc), time.perf_counter()
        taken = Taken()
        try:   # a placed host lost meanwhile kills the measured program: the run stops below, naming it
            with servers.placed.watching(spawn.abort_running):
                metrics, error = take_measurement(study, env, case, taken), None
        except CaseError as e:
            metrics, error = None, str(e)
        except Exception as e:
            if not (disk.is_full(e) or servers.dead(wait_s=DEATH_GRACE_S)):
                raise
            metrics, error = None, " ".join(f"{type(e).__name__}: {e}".split())
        if error and disk.is_full(error):
            where = disk.full_of_ours(self.workspace.root) or "not one of ours (the server's own)"
            error = f"the disk is full: {where}: {error}"
        t1 = time.perf_counter()
        dead = servers.dead(wait_s=DEATH_GRACE_S if error else 0.0)
        if dead:
            metrics, error = None, f"server {', '.join(dead)} died during the measurement" + (f": {error}" if error else "")
        path = study.path(case)
        with self._store_watched(f"the measurement of round {round_no}, case {case.case_id}"):
            self.store.add_measurement(run_id, case, round_no, session, started_at, taken.duration_s, metrics, error,
                                       path.id if path else None, taken.series if metrics else [], taken.evidence)
        self.progress.measured(case.case_id, round_no, headline(metrics, error, study.primary_metric),
                               time.perf_counter() - t0)   # once stored: a line says the measurement is kept
        clock.measure_s += taken.duration_s or 0.0
        clock.bookkeeping_s += time.perf_counter() - t1
        if dead:
            raise _Stopped(f"server {', '.join(dead)} died during round {round_no}, case {case.case_id} "
                           "(recorded as failed)")


    def _between_rounds(self, servers: Servers, study, envs: dict[str, StudyEnv], run_id: str, round_no: int,
                        phase: str, session: int) -> None:
        """The round trip of every link and the study's own probes (an FDW hop), stored; then check no
        one changed a proxy's toxics: a round measured through a changed link is void (its measurements
        marked failed) and the run stops."""
        with self._servers_watched(servers, f"{phase} round {round_no}"):
            probes = servers.probe_links() + [p for env in envs.values() for p in study.probe(env)]
        if probes:   # read against them; a write like every other of the store's (a full disk: one line)
            with self._store_watched(f"the probing {phase} round {round_no}"):
                self.store.add_probes(run_id, round_no, phase, session, probes)
            if phase == "before":
                self.progress.log("round %d links: %s" % (round_no, ", ".join(
                    f"{p['link']} {p['median_ms']:.2f} ms" for p in probes)))
        changed = servers.check_links()
        if not changed:
            return
        why = f"emulated link changed by someone else {phase} round {round_no}: {'; '.join(changed)}"
        voided = self.store.void_round(run_id, study.name, round_no, session, why) if phase == "after" else 0
        raise _Stopped(why + (f"; the round's {voided} measurements are marked failed" if voided else ""))

    def _finish(self, run_id: str, status: str, clock: _Clock, extra: dict) -> None:
        total = clock.measure_s + clock.bookkeeping_s
        session = {"measure_s": round(clock.measure_s, 3), "bookkeeping_s": round(clock.bookkeeping_s, 4),
                   "bookkeeping_fraction": round(clock.bookkeeping_s / total, 6) if total else None}
        if "prepare_s" in clock.timings:
            session["prepare_s"] = clock.timings["prepare_s"]
        summary = {"last_session": session, **extra}
        with contextlib.suppress(Exception):  # the run's record must not mask why we stop
            self.store.finish_run(run_id, status, summary)


def _case_seconds(study, options: StudyOptions, todo: list, store: ResultsStore, host: str) -> tuple[dict, float | None]:
    """Case id -> one measurement's time, where known: the study's own figure (returned too) where
    it can say, else what this host measured of the same cases before, this run's own measurements
    included when it is resumed (plan.py)."""
    case_ids = {c.case_id for _, c in todo}
    each = study.expected_measurement_s(options)
    if each is not None:
        return dict.fromkeys(case_ids, each), each
    return store.case_times(study.name, case_ids, host, options.params, plan.ROUNDS_ONLY, plan.HISTORY_RUNS), None


def _plan(options: StudyOptions, cases: list, todo: list, seconds: dict, each: float | None) -> str:
    """What the run will measure, and how long that should take (seconds: _case_seconds)."""
    adaptive = until_ci(options) is not None
    line = (f"plan: {len(todo)} measurements ({len(cases)} cases x {options.repeat} rounds"
            + (f", fewer once cases converge: at least {MIN_ROUNDS} rounds each" if adaptive else "") + ")")
    est = plan.estimate(Counter(c.case_id for _, c in todo), seconds, options.repeat, adaptive)
    if not est.cases:
        return line
    if not est.known:
        return line + "; how long: known after the first round (see each round's line)"
    source = f"{each:.0f} s each" if each is not None else "from earlier runs here: " + (
        f"all {est.cases} cases" if est.known == est.cases else f"{est.known} of {est.cases} cases; the others unknown")
    span = format_duration(est.low_s) + (f" to {format_duration(est.high_s)}" if est.low_s < est.high_s else "")
    return line + f"; about {span} of measurements ({source}), servers and data apart"
