"""The host part of the environment fingerprint: what of the machine changes a result."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

from . import __version__


def _cpu_first() -> dict[str, str]:
    """The first processor's lines of /proc/cpuinfo, by key; empty where there is none."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_model() -> str:
    return _cpu_first().get("model name") or platform.processor() or "unknown"


def cpu_signature() -> str | None:
    """x86's family, model and stepping: 'AMD EPYC' names two machine kinds here whose suites
    differ 1.5x (bench/README.md), and only these tell them apart."""
    f = _cpu_first()
    keys = ("cpu family", "model", "stepping")
    return " ".join(f"{k.removeprefix('cpu ')} {f[k]}" for k in keys) if all(k in f for k in keys) else None


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# Where the cgroup file systems are mounted: v1's memory controller, v2 alone or beside v1 (hybrid).
CGROUP_LIMIT_FILES = (("memory", Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
                      ("", Path("/sys/fs/cgroup/unified"), "memory.max"),
                      ("", Path("/sys/fs/cgroup"), "memory.max"))


def memory_limit_bytes(proc_cgroup: str | None = None, limit_files=CGROUP_LIMIT_FILES) -> int | None:
    """The memory this process and its children may use, page cache included, when a cgroup
    limits it (the lowest limit of its cgroup and their ancestors): a run started in a cgroup
    of 8 GiB on a larger machine measures an 8 GiB machine's caching. None when unlimited."""
    try:
        proc_cgroup = Path("/proc/self/cgroup").read_text() if proc_cgroup is None else proc_cgroup
    except OSError:
        return None
    paths = {}
    for line in proc_cgroup.splitlines():   # "4:memory:/a/b" (v1), "0::/a/b" (v2)
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            paths[c] = path.strip("/")
    limits = []
    for controller, root, name in limit_files:
        if controller not in paths:
            continue
        parts = [p for p in paths[controller].split("/") if p]
        for depth in range(len(parts) + 1):
            try:
                text = (root.joinpath(*parts[:depth]) / name).read_text().strip()
            except OSError:
                continue
            if text.isdigit():
                limits.append(int(text))
    memory = _memory_bytes()
    low = min(limits, default=None)
    return low if low is not None and (memory is None or low < memory) else None


PACKAGE_DIR = Path(__file__).resolve().parent
UNKNOWN = "unknown"


def tool_version(package_dir: Path = PACKAGE_DIR) -> dict:
    """The exact tool that runs: the package version, the git commit of the checkout it runs from
    and whether that checkout's work tree was modified ("dirty"). Commit and dirty are "unknown"
    unless the package sits in a git checkout (REPO/src/pgpathbench, as `make bootstrap` installs
    it), or when git cannot tell: a run never fails for it."""
    version = {"version": __version__, "commit": UNKNOWN, "dirty": UNKNOWN}
    repo = package_dir.parent.parent
    if package_dir.parent.name != "src" or not (repo / ".git").exists():
        return version   # an installed copy: a repository around site-packages is not its source
    head = _git(repo, "rev-parse", "HEAD")
    changes = _git(repo, "--no-optional-locks", "status", "--porcelain")   # no index lock: a user's git goes on
    if head is not None and len(head.strip()) == 40:
        version["commit"] = head.strip()
        if changes is not None:
            version["dirty"] = changes.strip() != ""
    return version


def _git(repo: Path, *args: str) -> str | None:
    """git's output in the repository, or None when git is missing, refuses or takes too long."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}   # the package's repo, not $GIT_DIR's
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def host_fingerprint() -> dict:
    tool = tool_version()
    return {
        "pgpathbench": __version__,
        "pgpathbench_commit": tool["commit"],
        "pgpathbench_dirty": tool["dirty"],
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_signature": cpu_signature(),
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "memory_limit_bytes": memory_limit_bytes(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "load_avg_at_start": list(os.getloadavg()),
        "user": os.environ.get("USER") or str(os.geteuid()),
    }
