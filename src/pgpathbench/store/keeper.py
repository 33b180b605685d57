"""The managed results cluster lives while any pgpathbench process uses it.

Every process that uses it holds a shared flock on `results.users` (workspace root) for as
long as it does; the kernel drops the lock when the process ends, however it ends. Joining
and leaving are decided under the exclusive `results.lock`, and the exclusive lock on
`results.users` is only ever tried without waiting, under `results.lock`.

The first user starts the keeper: a small detached process (its own session, no parent-death
signal) whose child is the postmaster, with a parent-death signal, so that even a SIGKILL of
the keeper stops the cluster. The keeper stops the cluster and exits once nobody has held
`results.users` for LINGER_S (a user touches it as it leaves; one that died without leaving is
missed within a quarter of a second), so that the next command, `make demo`'s next study, finds
it running; `clean` stops it at once (SIGTERM, and waits).

    python -c 'from pgpathbench.store.keeper import main; ...' '{"root": ..., "bindir": ..., "workspace": ...}'
prints `ready PORT` (or `error MESSAGE`) on stdout once, then closes it.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

LOCK = "results.lock"            # who decides: join, leave, start, stop
USERS = "results.users"          # shared by every user of the cluster
KEEPER_PID = "results.keeper"    # the keeper's pid, for users and `clean`
POLL_S = 0.25
# A start and the last user's stop (its shutdown checkpoint) cost each command seconds
# (bench/README.md); the gap between two commands of a script is about a process start.
LINGER_S = 10


class _Stop(Exception):
    pass


def _stop(signum, frame):
    raise _Stop()


def _stop_if_unused(workspace: Path, users_fd: int, cluster, busy_at: float) -> float | None:
    """Stop the cluster once nobody has held results.users for LINGER_S since busy_at (when it was
    last seen in use) or since the last user left (the file's mtime); under results.lock, so that
    nobody joins a cluster being stopped. None once stopped, else when it was last seen in use."""
    with open(workspace / LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            fcntl.flock(users_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return time.time()
        if time.time() < max(busy_at, os.fstat(users_fd).st_mtime) + LINGER_S:
            fcntl.flock(users_fd, fcntl.LOCK_UN)
            return busy_at
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cluster.stop()
        return None


def main(spec: dict) -> int:
    from ..procs import OsUser
    from ..servers.binaries import PgBinaries
    from ..servers.cluster import Cluster
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _stop)
    workspace = Path(spec["workspace"])
    cluster = Cluster("results", Path(spec["root"]), PgBinaries(spec["major"], Path(spec["bindir"])),
                      OsUser.for_servers(spec["user"]), template=Path(spec["template"]))
    users_fd = os.open(workspace / USERS, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            cluster.start()
            cluster.create_database(spec["dbname"])
        except Exception as e:  # the user that started us says it, in one line
            print("error " + " ".join(str(e).split()), flush=True)
            return 1
        print(f"ready {cluster.port}", flush=True)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        busy_at = time.time()   # the user that started us holds results.users
        while cluster.running and (busy_at := _stop_if_unused(workspace, users_fd, cluster, busy_at)) is not None:
            time.sleep(POLL_S)
    except _Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cluster.stop()
    return 0

