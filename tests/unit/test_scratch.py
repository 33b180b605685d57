"""Scratch files carry their process's pid; sweep() removes those of processes that are gone."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from pgpathbench import scratch


def a_dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_names_carry_the_pid_and_directories_are_private():
    made = scratch.make_dir("pgbench-log", scratch.tmpfs_or_tmp())
    try:
        assert made.name.startswith(f"pgpathbench-pgbench-log-{os.getpid()}-")
        assert made.stat().st_mode & 0o777 == 0o700
        assert scratch.prefix("init") == f"pgpathbench-init-{os.getpid()}-"
    finally:
        made.rmdir()


def test_sweep_removes_what_dead_processes_left_and_nothing_else():
    dead = a_dead_pid()
    base = Path(tempfile.gettempdir())
    left_dir = base / f"pgpathbench-pgbench-log-{dead}-abc"
    left_file = base / f"pgpathbench-init-{dead}-xyz.sql"
    alive = scratch.make_dir("scripts")
    unrelated = base / f"pgpathbench-{dead}"            # not a scratch name: kept
    left_dir.mkdir()
    (left_dir / "tx.1").write_text("0 0 10 0 1700000000 0\n")
    left_file.write_text("select 1;")
    unrelated.mkdir()
    try:
        removed = scratch.sweep()
        assert str(left_dir) in removed and str(left_file) in removed
        assert not left_dir.exists() and not left_file.exists()
        assert alive.is_dir() and unrelated.is_dir()
        assert str(alive) not in removed and str(unrelated) not in removed
    finally:
        alive.rmdir()
        unrelated.rmdir()
