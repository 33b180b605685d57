"""The loop every study shares: rounds, shuffled order, one commit per measurement, resume,
interrupts.

For round in 1..R, every case in an order shuffled by (seed, round), measured once and
committed at once: interleaving keeps machine drift out of comparisons, and a crash loses at
most the measurement in flight. A resumed run replays the same orders and measures only the
(case, round) pairs not yet stored. SIGINT and SIGTERM stop the measurement in flight, mark
the run interrupted and tear down every server; the run can be resumed.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import time
import traceback
from datetime import datetime, timezone

from .environment import host_fingerprint
from .errors import CaseError, Interrupted, UserError
from .matrix import round_order
from .procs import pid_alive
from .progress import ProgressReporter, headline
from .results.fingerprint import Fingerprint
from .results.model import MODEL_VERSION
from .servers import binaries
from .servers.binaries import PgBinaries
from .servers.topology import Servers
from .store import ResultsStore
from .studies import get as get_study
from .studies.base import StudyEnv, StudyOptions
from .workspace import Workspace


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


_pending_signal: list[int] = []   # a signal whose Interrupted may have been swallowed


def check_interrupted() -> None:
    """Raise the interrupt again if its exception was lost (a signal that lands in code that
    ignores exceptions, such as an at-fork hook, must still stop the run)."""
    if _pending_signal:
        raise Interrupted(_pending_signal[0])


@contextlib.contextmanager
def signals_interrupt():
    """SIGINT/SIGTERM raise Interrupted once; later ones are ignored while we clean up."""
    def handler(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _pending_signal.append(signum)
        raise Interrupted(signum)

    _pending_signal.clear()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class Runner:
    def __init__(self, store: ResultsStore, workspace: Workspace, bins: PgBinaries,
                 progress: ProgressReporter, keep_servers: bool = False):
        self.store, self.workspace, self.bins = store, workspace, bins
        self.progress, self.keep_servers = progress, keep_servers

    def binaries(self, options: StudyOptions) -> dict[str, PgBinaries]:
        """The binaries of every major the run asks for (--pg), fetched now if need be."""
        majors = options.dims.get("pg", (str(self.bins.major),))
        return {m: self.bins if int(m) == self.bins.major else
                binaries.resolve(int(m), workspace=self.workspace, log=self.progress.log) for m in majors}

    def start(self, options: StudyOptions, seed: int | None = None) -> str:
        self.binaries(options)  # a missing or unfetchable version fails before anything is written
        run_id = new_run_id()
        seed = secrets.randbits(31) if seed is None else seed
        self.store.create_run(run_id, [options.study], options.preset,
                              {"studies": [options.to_json()], "pg_bindir": str(self.bins.bindir),
                               "model_version": MODEL_VERSION}, seed)
        self.progress.log(f"run {run_id}: {options.study}, preset {options.preset}, "
                          f"{options.repeat} rounds, seed {seed}")
        self._execute(run_id, options, seed)
        return run_id

    def resume(self, run_ref: str) -> str:
        run = self.store.run(run_ref)
        if run["status"] == "running" and run["pid"] and pid_alive(run["pid"]):
            raise UserError(f"--resume: run {run['run_id']} is still running (pid {run['pid']}); "
                            "wait for it or stop it first")
        if run["status"] == "finished":
            raise UserError(f"--resume: run {run['run_id']} is already complete; 'pgpathbench report {run['run_id']}'")
        options = StudyOptions.from_json(run["options"]["studies"][0])
        self.progress.log(f"resuming run {run['run_id']} ({run['status']}): {options.study}")
        self._execute(run["run_id"], options, run["seed"])
        return run["run_id"]

    def _execute(self, run_id: str, options: StudyOptions, seed: int) -> None:
        study = get_study(options.study)
        cases = study.cases(options)
        self.store.add_cases(run_id, cases)
        done = self.store.done(run_id)
        todo = [(r, c) for r in range(1, options.repeat + 1) for c in round_order(cases, seed, r)
                if (study.name, c.case_id, r) not in done]
        fingerprint = Fingerprint(machine=host_fingerprint())
        session = self.store.start_session(run_id, fingerprint.to_json())
        measure_s = bookkeeping_s = 0.0
        timings: dict[str, float] = {}
        try:
            with signals_interrupt(), Servers(self.workspace, run_id, self.bins, self.keep_servers,
                                                  log=self.progress.log) as servers:
                if todo:
                    t0 = time.monotonic()
                    envs = {}
                    for major, bins in self.binaries(options).items():
                        envs[major] = StudyEnv(options, major, bins, servers.scoped(int(major), bins), self.progress.log)
                        setup = study.prepare(envs[major])
                        fingerprint.tools.update(setup.tools)
                        fingerprint.setup.setdefault(major, {})[study.name] = setup.facts
                        check_interrupted()
                    timings["prepare_s"] = round(time.monotonic() - t0, 3)
                    self.progress.log(f"servers and data ready in {timings['prepare_s']:.1f} s")
                    fingerprint.servers, fingerprint.paths = servers.fingerprint(), servers.link_fingerprint()
                    self.store.update_session(run_id, session, fingerprint.to_json())
                    self.progress.start(study.name, len(cases) * options.repeat, len(cases) * options.repeat - len(todo))
                    for i, (round_no, case) in enumerate(todo):
                        if i == 0 or todo[i - 1][0] != round_no:
                            self._probe(servers, run_id, round_no, "before", session)
                        started_at = datetime.now(timezone.utc)
                        t0 = time.perf_counter()
                        try:
                            metrics, error = study.measure(envs[case["pg"]], case), None
                        except CaseError as e:
                            metrics, error = None, str(e)
                        t1 = time.perf_counter()
                        path = study.path(case)
                        self.store.add_measurement(run_id, case, round_no, session, started_at, t1 - t0, metrics,
                                                   error, path.id if path else None)
                        self.progress.measured(case.case_id, round_no, headline(metrics, error, study.primary_metric))
                        measure_s += t1 - t0
                        bookkeeping_s += time.perf_counter() - t1
                        check_interrupted()
                        if i + 1 == len(todo) or todo[i + 1][0] != round_no:
                            self._probe(servers, run_id, round_no, "after", session)
                    self.progress.close()
        except Interrupted as e:
            self.progress.close()
            self._finish(run_id, "interrupted", measure_s, bookkeeping_s,
                         {**timings, "interrupted_by": signal.Signals(e.signum).name})
            raise
        except BaseException as e:
            self.progress.close()
            self._finish(run_id, "failed", measure_s, bookkeeping_s,
                         {**timings, "error": "".join(traceback.format_exception_only(type(e), e)).strip()})
            raise
        if _pending_signal:  # the last measurement's interrupt was swallowed: still interrupted
            self._finish(run_id, "interrupted", measure_s, bookkeeping_s,
                         {**timings, "interrupted_by": signal.Signals(_pending_signal[0]).name})
            raise Interrupted(_pending_signal[0])
        self._finish(run_id, "finished", measure_s, bookkeeping_s, timings)

    def _probe(self, servers: Servers, run_id: str, round_no: int, phase: str, session: int) -> None:
        """Round trips of every link before and after each round: results are read against them."""
        probes = servers.probe_links()
        if probes:
            self.store.add_probes(run_id, round_no, phase, session, probes)
            if phase == "before":
                self.progress.log("round %d links: %s" % (round_no, ", ".join(
                    f"{p['link']} {p['median_ms']:.2f} ms" for p in probes)))

    def _finish(self, run_id: str, status: str, measure_s: float, bookkeeping_s: float, extra: dict) -> None:
        total = measure_s + bookkeeping_s
        session = {"measure_s": round(measure_s, 3), "bookkeeping_s": round(bookkeeping_s, 4),
                   "bookkeeping_fraction": round(bookkeeping_s / total, 6) if total else None}
        extra = dict(extra)
        if "prepare_s" in extra:
            session["prepare_s"] = extra.pop("prepare_s")
        summary = {"last_session": session, **extra}
        with contextlib.suppress(Exception):  # the run's record must not mask why we stop
            self.store.finish_run(run_id, status, summary)
