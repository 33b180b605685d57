"""Scratch files and directories of a process: named after its pid, so that what a killed
process could not remove (SIGKILL runs no `finally` and no atexit) is found and removed later.

Every name is `pgpathbench-KIND-PID-RANDOM`; `sweep()` removes those of processes that no longer
run, in the system's temporary directory and on tmpfs, when a run starts and in `pgpathbench clean`.
A pid reused by another process only delays the removal: nothing of a running process is touched.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from .procs import pid_alive

TMPFS = "/dev/shm"
_NAME = re.compile(r"pgpathbench-[a-z]+(?:-[a-z]+)*-(\d+)-")


def prefix(kind: str) -> str:
    """The prefix of this process's scratch names of a kind (tempfile's prefix=)."""
    return f"pgpathbench-{kind}-{os.getpid()}-"


def make_dir(kind: str, base: str | None = None) -> Path:
    """A fresh private (0700) directory; the caller removes it, sweep() does if the caller is killed."""
    return Path(tempfile.mkdtemp(prefix=prefix(kind), dir=base))


def tmpfs_or_tmp() -> str:
    """tmpfs (/dev/shm) when it is there and writable: files written there stay in memory."""
    if os.path.isdir(TMPFS) and os.access(TMPFS, os.W_OK | os.X_OK):
        return TMPFS
    return tempfile.gettempdir()


def sweep() -> list[str]:
    """Remove this user's scratch files and directories whose process no longer runs."""
    removed = []
    for base in dict.fromkeys((tempfile.gettempdir(), tmpfs_or_tmp())):
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            owner = _NAME.match(entry.name)
            if owner is None or pid_alive(int(owner.group(1))) or not _mine(entry):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                Path(entry.path).unlink(missing_ok=True)
            removed.append(entry.path)
    return removed


def _mine(entry: os.DirEntry) -> bool:
    try:
        return entry.stat(follow_symlinks=False).st_uid == os.geteuid()
    except OSError:
        return False
