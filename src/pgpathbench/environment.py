"""The host part of the environment fingerprint: what of the machine changes a result."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path

from . import __version__


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def host_fingerprint() -> dict:
    return {
        "pgpathbench": __version__,
        "host": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "load_avg_at_start": list(os.getloadavg()),
        "user": os.environ.get("USER") or str(os.geteuid()),
    }
