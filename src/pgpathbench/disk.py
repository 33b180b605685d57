"""A full disk told apart from other failures, and said with the file system it is on.

PostgreSQL says "could not extend file ...: No space left on device" (SQLSTATE 53100), or dies of
it (a WAL write: PANIC, and the connection is lost); our own files fail with ENOSPC. Either way
what the user needs is which file system filled up and how much it holds now.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

import psycopg

from . import scratch
from .errors import reason
from .validate import mount_of

LOW_BYTES = 16 << 20   # a file system with less free than this is full, for a server writing 8 kB pages
_SAID = ("No space left on device", "disk full", "DiskFull")


def is_full(failure: BaseException | str) -> bool:
    """Whether an exception, or a failure's stored text, is a full disk."""
    if isinstance(failure, OSError) and failure.errno == errno.ENOSPC:
        return True
    if isinstance(failure, psycopg.errors.DiskFull):
        return True
    return any(said in str(failure) for said in _SAID)


def full_of_ours(workspace_root: Path | str) -> str:
    """The file systems of ours that are full, said: the workspace's (servers, results), the
    scratch's, the temporary directory's; empty when none is."""
    return "; ".join(full_file_systems([workspace_root, scratch.tmpfs_or_tmp(), tempfile.gettempdir()]))


def said_full(failure: BaseException, workspace_root: Path | str) -> str:
    """'the disk is full: ' with the file systems of ours that are full, or with the failure where none is."""
    return f"the disk is full: {full_of_ours(workspace_root) or reason(failure)}"


def full_file_systems(paths: Iterable[Path | str]) -> list[str]:
    """'/tmp/ws on tmpfs at /tmp (0 B free of 400 MB)' for each file system holding one of `paths`
    (or its nearest existing parent) with less than LOW_BYTES free."""
    out, seen = [], set()
    for path in paths:
        existing = next((p for p in [Path(path), *Path(path).parents] if p.exists()), Path("/"))
        mount, kind = mount_of(existing)
        if mount in seen:
            continue
        seen.add(mount)
        usage = shutil.disk_usage(existing)
        if usage.free < LOW_BYTES:
            out.append(f"{path} on {kind or 'a file system'} at {mount} ({_size(usage.free)} free of "
                       f"{_size(usage.total)})")
    return out


def _size(n: int) -> str:
    for unit, shift in (("GB", 30), ("MB", 20), ("kB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.0f} {unit}"
    return f"{n} B"
