"""The one way a study runs an external program it measures (a client, psql, pgbench).

`spawn_measured` runs it to completion as our child, killed with its session if we die, time out
or are interrupted, and returns what it printed with what only the outside sees: wall time from
fork to exit, CPU (user, system) and peak resident set from the kernel's accounting of the program
alone (wait4 in pgpb_measure, clients/measure/pgpb_measure.c, a small C program that forks it:
forked straight from this Python process, its peak RSS would include the pages it shares with us
until exec).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..clientenv import child_env
from ..errors import UserError
from ..metrics import Metric
from ..procs import die_with_parent
from ..stop_signals import held

REPO = Path(__file__).resolve().parents[3]
MEASURE = REPO / ".tools" / "clients" / "pgpb_measure"
# The sessions of the programs being measured now (pid -> its kill): abort_running() ends them.
_running: dict[int, Callable[[], None]] = {}


@dataclass(frozen=True)
class Measured:
    """A finished child: what it printed and what the kernel accounted for it."""
    args: tuple[str, ...]
    returncode: int            # negative: killed by that signal
    stdout: str
    stderr: str
    wall_s: float              # fork to exit, as seen by the tool
    user_s: float              # CPU of the program (all its threads)
    sys_s: float
    peak_rss_kib: int          # ru_maxrss: its largest resident set, KiB
    timed_out: bool = False


def spawn_measured(args: Sequence[str], timeout: float, env: dict | None = None,
                   stdout: int | None = subprocess.PIPE) -> Measured:
    """Run args to completion as our child and measure it: wall time here, CPU and peak RSS from
    wait4 in pgpb_measure (clients/measure/pgpb_measure.c), which forks the program from a small
    process so that its peak RSS is its own, not the pages of this Python process it would share
    between fork and exec. Killed with its session if we die, time out or are interrupted.
    stdout=subprocess.DEVNULL sends its output to /dev/null directly (e.g. psql's COPY text); env: child_env()."""
    if not MEASURE.is_file():
        raise UserError(f"{MEASURE} is missing; run scripts/build-clients (make bootstrap does)")
    report_r, report_w = os.pipe()
    t0 = time.perf_counter()
    with held() as release:   # the run's stop signal put off until the program is ours to kill (below)
        try:
            proc = _start(args, report_w, child_env() if env is None else env, stdout)
        except BaseException:
            os.close(report_r)
            raise
        finally:
            os.close(report_w)
        timed_out, lock, reaped = threading.Event(), threading.Lock(), []

        def kill() -> None:
            with lock:              # never signal a pid that was reaped (and could be reused)
                if not reaped:
                    timed_out.set()
                    _kill_session(proc.pid)

        watchdog = threading.Timer(timeout, kill)
        watchdog.daemon = True
        try:
            watchdog.start()
            _running[proc.pid] = kill
            release()   # a stop signal put off since the fork is raised here
            out, err, report = _read_all([proc.stdout.fileno() if proc.stdout else None, proc.stderr.fileno(),
                                          report_r])
            _, status, _ = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            with lock:
                reaped.append(True)
        except BaseException:
            _kill_session(proc.pid)
            _reap(proc)
            raise
        finally:
            _running.pop(proc.pid, None)
            watchdog.cancel()
            for f in (proc.stdout, proc.stderr):
                if f is not None:
                    f.close()
            os.close(report_r)
    proc.returncode = os.waitstatus_to_exitcode(status)   # reaped here: Popen must not wait again
    return _measured(tuple(args), proc.returncode, out, err, report, wall, timed_out.is_set())


def _measured(args: tuple, measure_exit: int, out: bytes, err: bytes, report: bytes, wall: float,
              timed_out: bool) -> Measured:
    """pgpb_measure's report ('STATUS MAXRSS USER SYS') as a Measured; a timeout's kill has none."""
    text = err.decode(errors="replace")
    fields = report.decode().split()
    if measure_exit != 0 or len(fields) != 4:
        if timed_out:
            return Measured(args, -signal.SIGKILL, out.decode(errors="replace"), text, wall, 0.0, 0.0, 0, True)
        raise RuntimeError(f"pgpb_measure failed (exit {measure_exit}): {text.strip()[-300:]}")
    returncode = os.waitstatus_to_exitcode(int(fields[0]))
    return Measured(args, returncode, out.decode(errors="replace"), text, wall, float(fields[2]),
                    float(fields[3]), int(fields[1]), timed_out)


def _start(args: Sequence[str], report_w: int, env: dict, stdout: int | None) -> subprocess.Popen:
    """pgpb_measure on args in a session of its own, dying with us."""
    return subprocess.Popen([str(MEASURE), str(report_w), *args], stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.PIPE, env=env, pass_fds=(report_w,),
                            preexec_fn=die_with_parent(signal.SIGKILL), start_new_session=True)


def abort_running() -> None:
    """Every program being measured killed with its session, as at its timeout (from another thread:
    a host lost under the measurement, servers/hosts.watched); each returns as timed out."""
    for kill in list(_running.values()):
        kill()


def _kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(proc: subprocess.Popen) -> None:
    try:
        _, status, _ = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        pass


def _read_all(fds: list[int | None]) -> list[bytes]:
    """Every given pipe to EOF, without threads: the child never blocks on a full pipe."""
    chunks: dict[int, list[bytes]] = {fd: [] for fd in fds if fd is not None}
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            for key, _ in sel.select():
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
    return [b"".join(chunks[fd]) if fd is not None else b"" for fd in fds]




def process_metrics(wall: str, program: str, better: str) -> tuple[Metric, ...]:
    """What the kernel accounts for a measured program, declared once: its wall time (named `wall`
    by the study: the seed's duration for a client, wall_ms for pgbench), CPU and peak memory."""
    return (Metric(wall, "ms", better, f"wall time of {program} from fork to exit, process start included"),
            Metric("cpu_user_ms", "ms", better, f"CPU time of {program} in user mode, every thread (wait4)"),
            Metric("cpu_sys_ms", "ms", better, f"CPU time of {program} in the kernel, every thread (wait4)"),
            Metric("cpu_ms", "ms", better, "cpu_user_ms + cpu_sys_ms"),
            Metric("peak_rss_mib", "MiB", better, f"largest resident set of {program} (ru_maxrss)"))


def process_figures(run, wall: str) -> dict:
    """process_metrics' figures of a finished program (a Measured, or anything with its times)."""
    return {wall: run.wall_s * 1000, "cpu_user_ms": run.user_s * 1000, "cpu_sys_ms": run.sys_s * 1000,
            "cpu_ms": (run.user_s + run.sys_s) * 1000, "peak_rss_mib": run.peak_rss_kib / 1024}
