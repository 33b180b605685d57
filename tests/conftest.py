"""Shared test helpers: a private workspace per test session, and the CLI as a user runs it."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def workspace_root():
    # Under the repository, not /tmp/pytest-of-*: that is 0700, and servers run as another user.
    root = REPO / ".workspace" / f"test-{os.getpid()}-{secrets.token_hex(2)}"
    yield root
    subprocess.run([sys.executable, "-m", "pgpathbench.cli", "clean", "--all", "--workspace", str(root)],
                   capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def pgpathbench(*args: str, workspace: Path | None = None, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    if workspace is not None:
        env["PGPATHBENCH_HOME"] = str(workspace)
    return subprocess.run([sys.executable, "-m", "pgpathbench.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, **kw)


def spawn_pgpathbench(*args: str, workspace: Path) -> subprocess.Popen:
    env = {**os.environ, "PGPATHBENCH_HOME": str(workspace)}
    return subprocess.Popen([sys.executable, "-m", "pgpathbench.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def our_processes(root: Path) -> list[str]:
    """Command lines of live processes that belong to a workspace (servers, pgbench)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(root) in cmd and "pytest" not in cmd and "pgpathbench.cli" not in cmd:
            found.append(f"{proc.name}: {cmd}")
    return found
