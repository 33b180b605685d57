#!/usr/bin/env python3
"""Benchmark: what collecting each measurement's evidence costs the measured figure.

The same fdw-overhead cases measured with and without evidence (--evidence on / off: the
servers' statistics snapshots, the wait-event sampler, CPU from /proc and pgbench's per-
transaction log), in the same rounds, a case's two modes one after the other in a shuffled order,
on the same servers.
Prints, per case, the paired ratio TPS without / TPS with collection (median and 95% CI over the
rounds; above 1 = collection slows the path down) and checks the target: under 2% (the upper end
of every interval below 1.02). pg_stat_statements is loaded in both modes (query ids are computed
for every statement, as on any server that loads it) and tracks statements only during the "on"
mode's untimed statement passes, after its timed run (studies/fdw_overhead/statements.py).

    .venv/bin/python bench/evidence_overhead.py [--rounds 10] [--minutes M] [--duration 5] [--workload ro,rw] [--pg 15]
                                                [--target local,fdw_external] [--affinity] [--save FILE] [--workspace DIR]
                                                [--without sampler,log,passes] [--log-lines N]

--without leaves parts out of the "on" mode, to find what costs: the wait-event sampler, pgbench's
log, the statement passes after an FDW measurement. "on" is then no longer what a run
collects: an investigation, not the benchmark's verdict. --log-lines sets how many transactions a
second pgbench's log samples per thread (pgbench_log.LOG_LINES_PER_THREAD_S), to weigh that cost.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import secrets
import sys
import time
from pathlib import Path

from pgpathbench.cli_parser import build_parser, study_options
from pgpathbench.evidence import collect
from pgpathbench.files import write_atomically
from pgpathbench.runner import Taken, take_measurement
from pgpathbench.stop_signals import signals_interrupt
from pgpathbench.servers import binaries
from pgpathbench.servers.topology import Servers
from pgpathbench.stats import ratio_summary
from pgpathbench.studies import get
from pgpathbench.studies.base import StudyEnv
from pgpathbench.studies.fdw_overhead import statements
from pgpathbench.tools import pgbench, pgbench_log
from pgpathbench.workspace import Workspace

TARGET = 1.02


class _NotSampled(collect.Sampler):
    def start(self) -> None:
        self.error = "not sampled (--without sampler)"

    def stop(self) -> None:
        pass


_pgbench_run = pgbench.run
# what --without replaces while an "on" measurement runs: (module, attribute, replacement)
PARTS = {
    "sampler": (collect, "Sampler", _NotSampled),
    "log": (pgbench, "run", lambda path, spec, log=True: _pgbench_run(path, spec, log=False)),
    "passes": (statements, "count", lambda *args: (None, "no statement pass (--without passes)")),
}


@contextlib.contextmanager
def without(parts):
    saved = [(module, name, getattr(module, name)) for module, name, _ in (PARTS[p] for p in parts)]
    for module, name, replacement in (PARTS[p] for p in parts):
        setattr(module, name, replacement)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--duration", type=int, default=5, help="seconds per pgbench run")
    ap.add_argument("--minutes", type=float, help="start no round after this many minutes (fewer than --rounds)")
    ap.add_argument("--workload", default="ro,rw", help="pgbench workloads (ro, rw or both)")
    ap.add_argument("--pg", default="15", help="PostgreSQL major of the servers")
    ap.add_argument("--target", default="local,fdw_external", help="fdw-overhead targets")
    ap.add_argument("--workspace", help="pgpathbench workspace (default: the tool's default)")
    ap.add_argument("--without", type=lambda v: [p for p in v.split(",") if p], default=[],
                    help=f"leave these parts out of the \"on\" mode ({', '.join(PARTS)}): an investigation")
    ap.add_argument("--log-lines", type=int, default=pgbench_log.LOG_LINES_PER_THREAD_S,
                    help="transactions a second per pgbench thread its log samples in \"on\" (default %(default)s)")
    ap.add_argument("--save", metavar="FILE", help="also write every measured TPS there (JSON), per case, mode and round; "
                                                   "rewritten after each round")
    ap.add_argument("--affinity", action="store_true",
                    help="the servers on the first CPU, the client (pgbench, the evidence's threads) on the others, "
                         "as pyperf's --affinity: less noise from where the scheduler puts them")
    args = ap.parse_args()
    if set(args.without) - set(PARTS):
        ap.error(f"--without: one or more of {', '.join(PARTS)}")
    if args.log_lines < 1:
        ap.error("--log-lines: a positive number of transactions a second")
    pgbench_log.LOG_LINES_PER_THREAD_S = args.log_lines
    study = get("fdw-overhead")
    parsed = build_parser().parse_args(["run", "fdw-overhead", "--preset", "quick", "--workload", args.workload,
                                        "--target", args.target, "--duration", str(args.duration),
                                        "--pg", args.pg])
    on = study_options(study, parsed)
    off = dataclasses.replace(on, params={**on.params, "evidence": "off"})
    cases = study.cases(on)
    tps: dict = {c.case_id: {"on": {}, "off": {}} for c in cases}
    try:
        with signals_interrupt():   # SIGTERM too: the servers are stopped and removed
            measure(study, cases, on, off, args, tps)
    except KeyboardInterrupt:       # the rounds measured so far are summarised (a half round pairs nothing)
        print("interrupted", file=sys.stderr)
    print(f"{'case':<28} {'TPS off / on':>13}  95% CI")
    ok = True
    for case_id, by_mode in tps.items():
        r = ratio_summary(by_mode["off"], by_mode["on"])
        if r is None:
            print(f"{case_id:<28} no round measured")
            ok = False
            continue
        ok &= r.ci_high < TARGET
        print(f"{case_id:<28} {r.median:>13.4f}  {r.ci_text}  n={r.n}")
    print(f"{'ok  ' if ok else 'FAIL'} collection costs under {100 * (TARGET - 1):.0f}% of TPS "
          "(the upper end of every interval below the target)")
    return 0 if ok else 1


def measure(study, cases, on, off, args, tps: dict[str, dict[str, dict[int, float]]]) -> None:
    """Fills tps (case id -> mode -> round -> TPS) as it goes; both modes of every case in each
    round, adjacent."""
    ws = Workspace.open(args.workspace)
    bins = binaries.resolve(int(args.pg), workspace=ws)
    with Servers(ws, f"bench-evidence-{secrets.token_hex(2)}", bins, log=print) as servers:
        env_on = StudyEnv(on, args.pg, bins, servers.scoped(int(args.pg), bins), print)
        cpus = sorted(os.sched_getaffinity(0))
        pinned = args.affinity and len(cpus) > 1
        if pinned:   # the servers started now inherit it, and so do their backends
            os.sched_setaffinity(0, cpus[:1])
        study.prepare(env_on)
        if pinned:   # pgbench and the evidence's threads, from here on
            os.sched_setaffinity(0, cpus[1:])
            print(f"servers on CPU {cpus[0]}, the client on CPU {','.join(map(str, cpus[1:]))}")
        envs = {"on": env_on, "off": dataclasses.replace(env_on, options=off)}   # the same servers and state
        started = time.monotonic()
        for round_no in range(1, args.rounds + 1):
            if args.minutes is not None and time.monotonic() - started > 60 * args.minutes:
                print(f"stopped after {round_no - 1} rounds: --minutes {args.minutes:g} had passed", file=sys.stderr)
                break
            rng = random.Random(round_no)
            # a case's two modes one after the other (in a shuffled order): the machine's drift
            # between them is as small as it can be
            order = [(c, mode) for c in rng.sample(cases, len(cases)) for mode in rng.sample(list(envs), 2)]
            for case, mode in order:
                with without(args.without if mode == "on" else ()):
                    metrics = take_measurement(study, envs[mode], case, Taken())
                tps[case.case_id][mode][round_no] = metrics["tps"]
            ratios = ", ".join(f"{c.case_id} {tps[c.case_id]['off'][round_no] / tps[c.case_id]['on'][round_no]:.3f}"
                               for c in cases)
            print(f"round {round_no}/{args.rounds}: off / on {ratios}", file=sys.stderr)
            if args.save:   # after every round: a run stopped early keeps what it measured
                write_atomically(Path(args.save), json.dumps(
                    {"pg": args.pg, "duration_s": args.duration, "affinity": args.affinity, "without": args.without,
                     "log_lines": args.log_lines, "tps": tps}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
