#!/usr/bin/env python3
"""How long `make test` and `make demo` take from a fresh clone, and whether two suites pass side by side.

Issue 43's targets, on a set-up machine of this kind (2 cores), idle: `make test` from a fresh
clone (its set-up included) under 15 minutes; `make demo` under 2 minutes with the first study's
table on screen within 60 s. Each run clones the branch (committed work only) into DIR/fresh-suite-N,
runs there, records the machine's load (/proc/loadavg: the 1-minute figure at the start, its mean
and maximum over the run, sampled every 5 s) and removes the clone. Prints every run and the median
of each figure; --save FILE keeps them as JSON. Exits 1 if a run failed or a median misses its target.

  test  `make test` (bootstrap included) in a fresh clone
  demo  `make bootstrap` (timed apart: the machine is set up, the clone is not), then `make demo`
        with a workspace of the clone's own (so the first run there extracts PostgreSQL 17's bundle
        from Maven's local repository, as a new user's first demo does); the total, the first
        table's second and each study's phases (Timeline); the log's lines carry their second
  pair  two fresh clones run `make test` at the same time: both must pass, every time

    .venv/bin/python bench/suite_time.py [--what test,demo,pair] [--runs 3] [--dir /work] [--branch B] [--save F]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from pgpathbench.environment import cpu_model, cpu_signature

REPO = Path(__file__).resolve().parent.parent
TARGETS = {"test_s": 15 * 60, "demo_s": 120, "first_table_s": 60}
SUMMARY = re.compile(r"=* ?(.*\b(?:passed|failed)\b.* in [\d.]+s.*?) ?=*$")


def cpu_jiffies() -> tuple[int, int]:
    """(busy, all) jiffies of every core since boot, from /proc/stat's first line."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]   # idle and iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


class Load:
    """The 1-minute load average sampled every 5 s while a run goes on, and the cores' busy share over
    the run (/proc/stat: whether the run left the cores idle part of the time)."""

    def __init__(self):
        self.samples, self._stop, self._jiffies = [self.now()], threading.Event(), cpu_jiffies()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    @staticmethod
    def now() -> float:
        return float(Path("/proc/loadavg").read_text().split()[0])

    def _sample(self) -> None:
        while not self._stop.wait(5):
            self.samples.append(self.now())

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        (busy0, all0), (busy1, all1) = self._jiffies, cpu_jiffies()
        return {"load_start": self.samples[0], "load_mean": round(statistics.fmean(self.samples), 2),
                "load_max": max(self.samples), "cpu_busy": round((busy1 - busy0) / max(all1 - all0, 1), 3)}


def clone(branch: str, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--branch", branch, str(REPO), str(dest)], check=True)


def remove(dest: Path) -> None:
    ws = dest / ".workspace" / "demo"
    if (dest / ".venv/bin/pgpathbench").exists() and ws.exists():   # the demo's servers and results
        subprocess.run([str(dest / ".venv/bin/pgpathbench"), "clean", "--all", "--workspace", str(ws)],
                       capture_output=True)
    shutil.rmtree(dest, ignore_errors=True)


RUNNING: list[subprocess.Popen] = []   # the makes under way, each its own process group (stop_running)


def make(dest: Path, target: str, log: Path, env: dict | None = None, on_line=None) -> tuple[int, float]:
    """`make TARGET` in dest, its output to log, each line with its second since the start (and each
    line of stdout, and of stderr with stream="err", to on_line); (exit code, seconds)."""
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(["make", "-s", target], cwd=dest, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, **(env or {})}, start_new_session=True)
        RUNNING.append(proc)

        def read(stream, name: str) -> None:
            for line in stream:
                at = time.monotonic() - t0
                out.write(f"{at:8.2f} {line}")
                if on_line:
                    on_line(line, at) if name == "out" else on_line(line, at, stream="err")
        errors = threading.Thread(target=read, args=(proc.stderr, "err"))
        errors.start()
        try:
            read(proc.stdout, "out")
        except BaseException:   # a Ctrl-C or SIGTERM here: every make under way stops, before its log closes
            stop_running()
            raise
        finally:
            errors.join()
        rc = proc.wait()
    RUNNING.remove(proc)
    return rc, time.monotonic() - t0


def stop_running() -> None:
    """SIGTERM to each running make's process group, then wait for them: pytest's controller and
    workers tear their servers, namespaces and hosts down (tests/conftest.py, SuiteStop). A signal to
    this script alone left both suites of a pair running (stop 74), and then a namespace of theirs."""
    for proc in RUNNING:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in RUNNING:
        proc.wait()


# The demo's progress lines (stderr) that open and close its phases.
RUN_LINE = re.compile(r"^· run \S+: (\S+), preset")
PHASE_LINES = {"bundle": re.compile(r"^· (fetching PostgreSQL|PostgreSQL \S+ \(.*\): (extracting|fetching))"),
               "ready": re.compile(r"^· servers and data ready"), "rounds": re.compile(r"^· round \d+ done")}


class Timeline:
    """Each study's phases in one `make demo`, from its lines' times: start (from the end of the previous
    study's last round, or from make's start: its report, servers' teardown, the next process's start
    and imports, the results store), bundle (a PostgreSQL bundle extracted or fetched), prepare (servers
    and data), measure (its rounds); then html (the last round's end to the end: the last report and
    the HTML page)."""

    def __init__(self):
        self.marks: list[tuple[str, str, float]] = []   # (study, mark, second)

    def line(self, text: str, at: float, stream: str = "out") -> None:
        text = text.strip()
        if stream != "err":
            return
        if m := RUN_LINE.match(text):
            self.marks.append((m.group(1), "run", at))
        for mark, pattern in PHASE_LINES.items():
            if pattern.match(text):
                self.marks.append((self.marks[-1][0] if self.marks and mark != "bundle" else "", mark, at))

    def phases(self, total: float) -> dict:
        out, previous_end, bundle = {}, 0.0, None
        for study, mark, at in self.marks:
            if mark == "bundle":
                bundle = at
            elif mark == "run":
                if bundle is not None:
                    out[f"{study}.bundle"] = round(at - bundle, 1)
                out[f"{study}.start"] = round((bundle or at) - previous_end, 1)
                begun, bundle = at, None
            elif mark == "ready":
                out[f"{study}.prepare"] = round(at - begun, 1)
                begun = at
            else:
                out[f"{study}.measure"] = round(at - begun, 1)
                previous_end = at
        out["html"] = round(total - previous_end, 1)
        return out


# Each suite's log ends with its slowest 40 tests (setup and call apart): where the time went.
DURATIONS = {"PYTEST_ADDOPTS": "--durations=40"}


def summary(log: Path) -> str:
    found = [m.group(1) for line in log.read_text(errors="replace").splitlines() if (m := SUMMARY.match(line.strip()))]
    return found[-1] if found else "no pytest summary"


def run_test(branch: str, dest: Path, logs: Path, n: int) -> dict:
    clone(branch, dest)
    load = Load()
    rc, took = make(dest, "test", logs / f"test-{n}.log", DURATIONS)
    row = {"what": "test", "run": n, "ok": rc == 0, "test_s": round(took, 1),
           "pytest": summary(logs / f"test-{n}.log"), **load.stop()}
    remove(dest)
    return row


def run_demo(branch: str, dest: Path, logs: Path, n: int) -> dict:
    clone(branch, dest)
    rc_boot, boot = make(dest, "bootstrap", logs / f"demo-bootstrap-{n}.log")
    first, timeline = [], Timeline()

    def seen(line: str, at: float, stream: str = "out") -> None:   # the first report: stdout, not make's echo
        timeline.line(line, at, stream)
        if stream == "out" and not first and line.strip() and "pgpathbench" not in line.split()[0]:
            first.append(at)
    load = Load()
    rc, took = make(dest, "demo", logs / f"demo-{n}.log", {"PGPATHBENCH_HOME": str(dest / ".workspace" / "demo")},
                    seen)
    row = {"what": "demo", "run": n, "ok": rc == 0 and rc_boot == 0, "bootstrap_s": round(boot, 1),
           "demo_s": round(took, 1), "first_table_s": round(first[0], 1) if first else None, **load.stop(),
           "phases": timeline.phases(took)}
    remove(dest)
    return row


def run_pair(branch: str, base: Path, logs: Path, n: int) -> dict:
    dests = [base / f"fresh-suite-{n}{side}" for side in "ab"]
    for d in dests:
        clone(branch, d)
    load, rows = Load(), {}
    threads = [threading.Thread(target=lambda d=d, s=s: rows.__setitem__(s, make(d, "test", logs / f"pair-{n}{s}.log", DURATIONS)))
               for d, s in zip(dests, "ab")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    row = {"what": "pair", "run": n, "ok": all(rc == 0 for rc, _ in rows.values()),
           **{f"test_{s}_s": round(rows[s][1], 1) for s in "ab"},
           **{f"pytest_{s}": summary(logs / f"pair-{n}{s}.log") for s in "ab"}, **load.stop()}
    for d in dests:
        remove(d)
    return row


def machine() -> dict:
    """What the runs ran on: machines of one kind differ up to 1.8x between sessions (bench/README.md)."""
    return {"cpu": cpu_model(), "cpu_signature": cpu_signature(), "cores": os.cpu_count(),
            "test_workers": os.environ.get("TEST_WORKERS", "Makefile's")}


def medians(rows: list[dict]) -> dict:
    out = {}
    for key in TARGETS:
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            out[key] = statistics.median(values)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--what", default="test,demo,pair", help="any of test, demo, pair (comma-separated)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=str(REPO.parent), help="where the clones go (default: beside this repository)")
    ap.add_argument("--branch", default=subprocess.run(["git", "-C", str(REPO), "rev-parse", "--abbrev-ref", "HEAD"],
                                                       capture_output=True, text=True).stdout.strip())
    ap.add_argument("--save", help="write every run and the medians to this JSON file")
    args = ap.parse_args()
    base, rows, host = Path(args.dir), [], machine()
    print(json.dumps(host), flush=True)
    # One folder per invocation: the next run's logs never overwrite a failed one's (stop 58 lost a pair's).
    logs = base / "suite-time-logs" / time.strftime("%Y%m%d-%H%M%S")
    logs.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)   # as Ctrl-C: the runs under way are stopped
    try:
        for what in args.what.split(","):
            for n in range(1, args.runs + 1):
                run = {"test": run_test, "demo": run_demo}.get(what)
                row = run(args.branch, base / f"fresh-suite-{n}", logs, n) if run else run_pair(args.branch, base, logs, n)
                rows.append(row)
                print(json.dumps(row), flush=True)
    except KeyboardInterrupt:
        stop_running()
        for dest in base.glob("fresh-suite-*"):
            remove(dest)
        print(f"suite_time: stopped; the runs under way ended, their clones removed; logs in {logs}", file=sys.stderr)
        return 130
    found = medians(rows)
    for key, value in found.items():
        print(f"{'ok  ' if value < TARGETS[key] else 'FAIL'} median {key}: {value:.1f} s (target < {TARGETS[key]} s)")
    if args.save:
        Path(args.save).write_text(json.dumps({"branch": args.branch, "machine": host, "logs": str(logs), "runs": rows,
                                               "medians": found}, indent=1) + "\n")
    print(f"logs in {logs}")
    return 0 if all(r["ok"] for r in rows) and all(v < TARGETS[k] for k, v in found.items()) else 1


if __name__ == "__main__":
    sys.exit(main())
