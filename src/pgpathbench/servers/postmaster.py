"""A postmaster seen from outside, by its data directory: whether it runs, stopping one this
process did not start, and freeing what one that crashed left (clean, topology, Cluster.remove).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from ..procs import OsUser, end_process, pid_alive, pid_exists, processes_in
from .binaries import PgBinaries

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60


def recorded_pid(datadir: Path) -> int | None:
    """The pid postmaster.pid names (its postmaster may be gone), or None without one."""
    try:
        pid = int((datadir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError, PermissionError):
        return None
    return pid if pid > 0 else None


def postmaster_pid(datadir: Path) -> int | None:
    """The pid of the postmaster that runs in datadir, or None."""
    pid = recorded_pid(datadir)
    return pid if pid is not None and pid_alive(pid) else None


def release_ipc(data: Path, bins: PgBinaries, user: OsUser) -> str | None:
    """Free the shared memory of a postmaster that died without shutting down (SIGKILL, the OOM
    killer), before its data directory is removed; why it could not, or None.

    Its System V segment and its dynamic shared memory (/dev/shm/PostgreSQL.*) stay until PostgreSQL
    starts in the same directory again and removes them (PGSharedMemoryCreate, sysv_shmem.c): a
    start in single-user mode, which ends at once on an empty input, does just that, once the
    postmaster's children (each in the data directory) have noticed its death and exited, and the
    postmaster itself is reaped (PostgreSQL takes the pid of a zombie for a live owner of the lock).
    """
    recorded = recorded_pid(data)
    if recorded is None or pid_alive(recorded):
        return None
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while (processes_in(data) or pid_exists(recorded)) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        # No preloaded library (citus): it is not needed to free memory, and the binaries at hand
        # may not have it (clean uses Debian's for a server of pgpathbench's own Citus tree).
        done = user.run([str(bins.path("postgres")), "--single", "-D", str(data), "-F",
                         "-c", "shared_preload_libraries=", "postgres"],
                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True, timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:   # a long crash recovery: the memory stays, the data goes
        return f"its recovery took more than {START_TIMEOUT_S} s"
    said = [line for line in done.stderr.splitlines() if "FATAL" in line or "ERROR" in line]
    return None if done.returncode == 0 else (said[-1] if said else f"exit code {done.returncode}")


def stop_pid(pid: int, timeout: float = STOP_TIMEOUT_S) -> None:
    """Fast shutdown of a postmaster we did not start in this process, waited for."""
    end_process(pid, ((signal.SIGINT, timeout), (signal.SIGQUIT, 10), (signal.SIGKILL, 10)))
