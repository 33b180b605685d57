"""`pgpathbench clean`: stop and remove every managed server of the workspace."""

from __future__ import annotations

import shutil

from .servers.cluster import postmaster_pid, stop_pid
from .workspace import Workspace


def clean(ws: Workspace, remove_results: bool = False) -> list[str]:
    said = []
    datadirs = sorted(ws.servers_dir.glob("*/*/data"))
    if remove_results or (ws.results_dir / "data").exists():
        datadirs.append(ws.results_dir / "data")
    for data in datadirs:
        pid = postmaster_pid(data)
        if pid:
            stop_pid(pid)
            said.append(f"stopped server {data.parent} (pid {pid})")
    if ws.servers_dir.exists():
        for run_dir in sorted(ws.servers_dir.iterdir()):
            shutil.rmtree(run_dir, ignore_errors=True)
            said.append(f"removed {run_dir}")
    if remove_results and ws.results_dir.exists():
        shutil.rmtree(ws.results_dir, ignore_errors=True)
        said.append(f"removed the results cluster {ws.results_dir}")
    return said or ["nothing to clean"]
