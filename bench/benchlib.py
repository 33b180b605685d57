"""What the benchmarks share: run one study through the CLI as a user would, then read the run."""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_then_report(run_args: list[str], workspace: str | None) -> tuple[float, dict] | None:
    """`pgpathbench run ...` timed from outside, then its report as JSON; None (and the run's
    stderr printed) if the run failed."""
    ws = ["--workspace", workspace] if workspace else []
    cli = [sys.executable, "-m", "pgpathbench.cli"]
    t0 = time.monotonic()
    run = subprocess.run([*cli, "run", *run_args, *ws], capture_output=True, text=True)
    wall = time.monotonic() - t0
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return None
    report = subprocess.run([*cli, "report", "latest", "--format", "json", *ws],
                            capture_output=True, text=True, check=True).stdout
    return wall, json.loads(report)


def by_case(export: dict, metric: str) -> dict[str, dict[int, float]]:
    """A metric of a run's successful measurements (a report's or an export's JSON), by case, then round."""
    out: dict[str, dict[int, float]] = {}
    for m in export["measurements"]:
        if m["ok"] and metric in m["metrics"]:
            out.setdefault(m["case_id"], {})[m["round"]] = m["metrics"][metric]
    return out


def rounds_run(doc: str, run_args: list[str]) -> dict | None:
    """The command line of a bench that runs one study (--rounds, --workspace), that run, its id and
    the load at its start printed: the run's report, or None if it failed."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--workspace", help="pgpathbench workspace (default: the tool's default)")
    args = ap.parse_args()
    done = run_then_report([*run_args, "--repeat", str(args.rounds)], args.workspace)
    if done is None:
        return None
    _, report = done
    print(f"run {report['run']['run_id']}, load average at start "
          f"{report['run']['environment']['sessions'][0].get('machine', {}).get('load_avg_at_start')}")
    return report


@contextlib.contextmanager
def managed_server(name: str):
    """A managed PostgreSQL 15 of the bench's own, started in a temporary directory (its parent
    free for the bench's files) and removed after."""
    from pgpathbench.procs import OsUser
    from pgpathbench.servers.binaries import resolve
    from pgpathbench.servers.cluster import Cluster
    with tempfile.TemporaryDirectory(prefix=f"pgpb-{name}-") as tmp:
        Path(tmp).chmod(0o755)   # the server runs as another user
        server = Cluster(name, Path(tmp) / "server", resolve(15), OsUser.for_servers())
        server.start()
        try:
            yield server
        finally:
            server.remove()
