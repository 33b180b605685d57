"""CLEANUP (servers/remote_scripts.py) run by sh here, on a run directory of a test's own: what a
script of the run still runs (a writer whose ssh was cut, as an interrupted initdb) is ended first,
so that the directory goes whole."""

from __future__ import annotations

import os
import shlex
import subprocess
import time

from pgpathbench.servers import remote_scripts as scripts

# Writes into the run's directory as fast as it can: rm -rf alone races it and leaves a directory.
WRITER = 'while :; do mkdir -p "$R/data/base"; : > "$R/data/base/f$$"; done'


def test_cleanup_kills_what_still_runs_with_the_runs_marker_then_removes_its_directory(tmp_path):
    run = tmp_path / "runs" / "20261128-000000-abcd"
    run.mkdir(parents=True)
    (run / scripts.LEDGER).write_text(f"dir {tmp_path / 'runs'}\nserver {run}/pg15_external/data\n")
    marked = {**os.environ, scripts.MARKER: f"a:{run}", "R": str(run)}
    other = tmp_path / "other"   # another run's: its marker differs, it is left alone
    other.mkdir()
    writer = subprocess.Popen(["sh", "-c", WRITER], env=marked, start_new_session=True)
    # another run's, the same run's on another host, and (as root) the same marker in another mount
    # namespace: another namespace host's (two suites' hosts `a`, a fixed run id, one pid namespace)
    bystanders = [subprocess.Popen(["sleep", "60"], env={**os.environ, scripts.MARKER: value})
                  for value in (f"a:{other}", f"b:{run}")]
    if os.geteuid() == 0:
        bystanders.append(subprocess.Popen(["unshare", "--mount", "sleep", "60"],
                                           env={**os.environ, scripts.MARKER: f"a:{run}"}))
    try:
        time.sleep(0.3)
        res = subprocess.run(["sh", "-s"], input=scripts.exported("a", str(run)) + scripts.cleanup("a", str(run)),
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert writer.wait(timeout=10) == -9
        assert f"killed {writer.pid}" in res.stdout and f"removed {run}" in res.stdout, res.stdout
        assert not run.exists() and not (tmp_path / "runs").exists()
        assert all(b.poll() is None and str(b.pid) not in res.stdout for b in bystanders)
    finally:
        for proc in (writer, *bystanders):
            proc.kill()
            proc.wait()


def test_the_marker_a_script_exports_is_the_one_cleanup_looks_for(tmp_path):
    """A marked script's processes carry exactly the line CLEANUP greps /proc/PID/environ for."""
    run = "/var/lib/pgpathbench/runs/20261128-000000-abcd"
    env = subprocess.run(["sh", "-s"], input=scripts.exported("a b", run) + "env", capture_output=True, text=True,
                         check=True).stdout.splitlines()
    wanted = scripts.cleanup("a b", run).split("grep -lzxsF -- ", 1)[1].split(" /proc/", 1)[0]
    assert f"{scripts.MARKER}=a b:{run}" in env and wanted == shlex.quote(f"{scripts.MARKER}=a b:{run}")
