"""`pgpathbench clean`: stop and remove every managed server of the workspace."""

from __future__ import annotations

import shutil

from .servers.cluster import postmaster_pid, stop_pid
from .servers.netns import remove_netns_links
from .servers.topology import NETNS_STATE, PROXY_PID_FILE, stop_recorded_proxy
from .store import keeper_pid, stop_keeper
from .store.keeper import KEEPER_PID
from .workspace import Workspace


def clean(ws: Workspace, remove_results: bool = False) -> list[str]:
    said = []
    keeper = keeper_pid(ws)
    if keeper is not None:   # it stops the results cluster, waited for
        stop_keeper(keeper)
        said.append(f"stopped the results cluster's keeper (pid {keeper})")
    (ws.root / KEEPER_PID).unlink(missing_ok=True)
    datadirs = sorted(ws.servers_dir.glob("*/*/data"))
    if remove_results or (ws.results_dir / "data").exists():
        datadirs.append(ws.results_dir / "data")
    for data in datadirs:
        pid = postmaster_pid(data)
        if pid:
            stop_pid(pid)
            said.append(f"stopped server {data.parent} (pid {pid})")
    for pid_file in sorted(ws.servers_dir.glob(f"*/{PROXY_PID_FILE}")):
        said += filter(None, [stop_recorded_proxy(pid_file)])
    said += remove_netns_links(ws.root / NETNS_STATE)
    if ws.servers_dir.exists():
        for run_dir in sorted(ws.servers_dir.iterdir()):
            shutil.rmtree(run_dir, ignore_errors=True)
            said.append(f"removed {run_dir}")
    if remove_results and ws.results_dir.exists():
        shutil.rmtree(ws.results_dir, ignore_errors=True)
        said.append(f"removed the results cluster {ws.results_dir}")
    return said or ["nothing to clean"]
