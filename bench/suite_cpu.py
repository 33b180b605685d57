#!/usr/bin/env python3
"""Where `make test`'s CPU goes: each test's CPU (user and system apart) and wall time.

Issue 43 asks for the suite in 15 minutes on the slower machines of this kind, where it is CPU-bound
(bench/README.md): the cut must come from CPU, and this shows where it is. The suite of a fresh clone
of the branch runs on one pytest-xdist worker (tests one after another: a test's CPU is its own) in a
cgroup of its own, so that every process a test starts is counted: servers, clients, JVMs, keepers,
the test hosts' sshd and what runs under it; nothing else on the machine is. This file is also the
pytest plugin that reads the cgroup's counters around each test (setup, call and teardown: a module's
fixtures count in its first and last tests). Needs root (a cgroup, v1's cpuacct or v2's cpu.stat).

Writes DIR/suite-cpu-logs/STAMP/tests.tsv (cpu_s, user_s, system_s, wall_s, test id) and the pytest log,
prints the totals and the modules (and tests) that took the most CPU; removes the clone.

    .venv/bin/python bench/suite_cpu.py [--branch B] [--dir /work] [--top 25] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

CGROUP_VAR, OUT_VAR = "SUITE_CPU_CGROUP", "SUITE_CPU_OUT"
V1, V2 = Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup")
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def counters(cgroup: Path) -> tuple[float, float, float]:
    """(cpu, user, system) seconds the cgroup's processes have used, the living and the ended."""
    if (cgroup / "cpu.stat").exists() and not (cgroup / "cpuacct.usage").exists():   # v2
        stat = dict(line.split() for line in (cgroup / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6, int(stat["user_usec"]) / 1e6, int(stat["system_usec"]) / 1e6
    stat = dict(line.split() for line in (cgroup / "cpuacct.stat").read_text().splitlines())
    return (int((cgroup / "cpuacct.usage").read_text()) / 1e9, int(stat["user"]) * TICK_S,
            int(stat["system"]) * TICK_S)


# The plugin half: loaded into the suite's worker with -p suite_cpu (bench/ on PYTHONPATH).
if os.environ.get(CGROUP_VAR):
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        cgroup = Path(os.environ[CGROUP_VAR])
        before, t0 = counters(cgroup), time.monotonic()
        yield
        after, wall = counters(cgroup), time.monotonic() - t0
        cpu, user, system = (a - b for a, b in zip(after, before))
        with open(os.environ[OUT_VAR], "a") as out:
            out.write(f"{cpu:.3f}\t{user:.2f}\t{system:.2f}\t{wall:.3f}\t{item.nodeid}\n")


def cgroup_parent() -> Path:
    """Where our cgroup goes (v1's cpuacct hierarchy where mounted, else v2's), or exit 2 saying why not."""
    parent = V1 if (V1 / "cpuacct.usage").exists() else V2
    if os.geteuid() != 0 or not os.access(parent, os.W_OK):
        print(f"suite_cpu: cannot make a cgroup in {parent}: run it as root on a machine with cgroups",
              file=sys.stderr)
        sys.exit(2)
    return parent


def suite(clone: Path, cgroup: Path, out: Path, log: Path, pytest_args: list[str]) -> int:
    """The clone's suite on one worker, in `cgroup`; its exit code."""
    env = {**os.environ, CGROUP_VAR: str(cgroup), OUT_VAR: str(out),
           "PYTHONPATH": os.pathsep.join([str(clone / "bench"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cmd = [str(clone / ".venv/bin/python"), "-m", "pytest", "-q", "-n", "1", "--dist", "loadscope",
           "--no-loadscope-reorder", "-p", "suite_cpu", *pytest_args]
    with open(log, "w") as f:   # its own session: a Ctrl-C reaches it once, from us (a second stops it at once)
        proc = subprocess.Popen(cmd, cwd=clone, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=lambda: (cgroup / "cgroup.procs").write_text("0"))   # before exec
        try:
            return proc.wait()
        except KeyboardInterrupt:   # Ctrl-C or SIGTERM: the suite tears down first
            proc.terminate()
            proc.wait()
            raise


def empty(cgroup: Path, wait_s: float = 30) -> bool:
    """Whether the cgroup's last process ended (the results cluster's keeper lingers 10 s)."""
    deadline = time.monotonic() + wait_s
    while (cgroup / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
        time.sleep(1)
    return not (cgroup / "cgroup.procs").read_text().strip()


def report(rows: list[tuple], total: tuple, wall: float, top: int) -> None:
    cpu, user, system = total
    tests = sum(r[0] for r in rows)
    print(f"suite: {cpu:.1f} s of CPU (user {user:.1f}, system {system:.1f}: {system / max(cpu, 1e-9):.0%}) "
          f"in {wall:.1f} s; {len(rows)} tests carry {tests:.1f} s, the rest is start-up and what ended after")
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0])
    for row in rows:
        m = modules[row[4].split("::")[0]]
        m[:4] = [a + b for a, b in zip(m[:4], row[:4])]
        m[4] += 1
    print(f"\n{'cpu_s':>8} {'share':>6} {'user_s':>8} {'system_s':>8} {'wall_s':>8} {'tests':>5}  module")
    for name, (c, u, s, w, n) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{c:8.1f} {c / max(cpu, 1e-9):6.1%} {u:8.1f} {s:8.1f} {w:8.1f} {n:5d}  {name}")
    print(f"\n{'cpu_s':>8} {'wall_s':>8}  test")
    for c, _, _, w, name in sorted(rows, key=lambda r: -r[0])[:top]:
        print(f"{c:8.1f} {w:8.1f}  {name}")


def interrupted(signum, frame):
    raise KeyboardInterrupt   # a SIGTERM as a Ctrl-C: the suite tears down, the clone goes


def main() -> int:
    signal.signal(signal.SIGTERM, interrupted)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from suite_time import REPO, clone, machine, make, remove   # here: the plugin half, in the worker, needs none
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--branch", default="main")
    ap.add_argument("--dir", default=str(REPO.parent), help="where the clone and the logs go")
    ap.add_argument("--top", type=int, default=25, help="how many modules and tests to list")
    ap.add_argument("pytest_args", nargs="*", help="after --: passed to pytest (default: the whole suite)")
    args = ap.parse_args()
    parent = cgroup_parent()
    print(json.dumps(machine()), flush=True)   # what the figures ran on
    logs = Path(args.dir) / "suite-cpu-logs" / time.strftime("%Y%m%d-%H%M%S")
    logs.mkdir(parents=True)
    dest = Path(args.dir) / "suite-cpu-clone"
    clone(args.branch, dest)
    try:
        rc_boot, _ = make(dest, "bootstrap", logs / "bootstrap.log")
        if rc_boot != 0:
            print(f"suite_cpu: make bootstrap failed: {logs / 'bootstrap.log'}", file=sys.stderr)
            return 1
        cgroup = parent / f"pgpb-suite-cpu-{os.getpid()}"
        cgroup.mkdir()
        try:
            t0 = time.monotonic()
            rc = suite(dest, cgroup, logs / "tests.tsv", logs / "pytest.log", args.pytest_args)
            wall = time.monotonic() - t0
        finally:
            left = not empty(cgroup)
            total = counters(cgroup)
            if left:
                print(f"suite_cpu: processes still in {cgroup}; it is left", file=sys.stderr)
            else:
                cgroup.rmdir()
    finally:
        remove(dest)
    rows = [(*map(float, line.split("\t")[:4]), line.split("\t")[4]) for line in
            (logs / "tests.tsv").read_text().splitlines()] if (logs / "tests.tsv").exists() else []
    report(rows, total, wall, args.top)
    print(f"\npytest exit {rc}; logs in {logs}")
    return 0 if rc == 0 and not left else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("suite_cpu: interrupted; the clone is removed")
