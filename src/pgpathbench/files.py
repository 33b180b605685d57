"""Writing a user's file so that nobody ever sees half of it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(target: Path, text: str) -> None:
    """A temporary file beside the target, renamed over it: readers never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
