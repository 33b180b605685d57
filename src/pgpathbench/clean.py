"""`pgpathbench clean`: stop and remove every managed server of the workspace."""

from __future__ import annotations

import shutil

from pathlib import Path

from .procs import pid_alive
from .servers.cluster import postmaster_pid, stop_pid
from .servers.network import remove_netns_links
from .servers.topology import NETNS_STATE, PROXY_PID_FILE
from .workspace import Workspace


def _stop_recorded_proxy(pid_file: Path) -> str | None:
    """A Toxiproxy a killed run could not stop (it dies with its parent, so this is rare)."""
    try:
        pid = int(pid_file.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    if b"toxiproxy" not in cmdline or not pid_alive(pid):
        return None
    stop_pid(pid, timeout=5)
    return f"stopped proxy {pid_file.parent.name} (pid {pid})"


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
    for pid_file in sorted(ws.servers_dir.glob(f"*/{PROXY_PID_FILE}")):
        said += filter(None, [_stop_recorded_proxy(pid_file)])
    said += remove_netns_links(ws.root / NETNS_STATE)
    if ws.servers_dir.exists():
        for run_dir in sorted(ws.servers_dir.iterdir()):
            shutil.rmtree(run_dir, ignore_errors=True)
            said.append(f"removed {run_dir}")
    if remove_results and ws.results_dir.exists():
        shutil.rmtree(ws.results_dir, ignore_errors=True)
        said.append(f"removed the results cluster {ws.results_dir}")
    return said or ["nothing to clean"]
