"""`pgpathbench clean`: stop and remove every managed server of the workspace, and drop what runs
left on user servers (the ledger's databases, reached by their recorded DSN: the password from
PGPASSWORD or ~/.pgpass)."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg

from . import scratch
from .procs import OsUser
from .servers.binaries import at_hand
from .servers.citus import TREE, tree_facts
from .servers.cluster import postmaster_pid, release_ipc, socket_dir, stop_pid
from .servers.ledger import Ledger
from .servers.user import parse_server
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
        if (data / "postmaster.pid").exists():   # stopped, so its postmaster died without shutting down
            said.append(_release_ipc(data, ws))
        if data.is_relative_to(ws.servers_dir):   # a study server's, in /tmp when the path is long
            shutil.rmtree(socket_dir(data.parent), ignore_errors=True)
    for pid_file in sorted(ws.servers_dir.glob(f"*/{PROXY_PID_FILE}")):
        said += filter(None, [stop_recorded_proxy(pid_file)])
    said += remove_netns_links(ws.root / NETNS_STATE)
    said += clean_user_servers(Ledger(ws.root))
    said += [f"removed {path}" for path in scratch.sweep()]
    if ws.servers_dir.exists():
        for run_dir in sorted(ws.servers_dir.iterdir()):
            shutil.rmtree(run_dir, ignore_errors=True)
            said.append(f"removed {run_dir}")
    if remove_results and ws.results_dir.exists():
        shutil.rmtree(socket_dir(ws.results_dir), ignore_errors=True)
        shutil.rmtree(ws.results_dir, ignore_errors=True)
        said.append(f"removed the results cluster {ws.results_dir}")
    if remove_results and tree_facts():   # outside the workspace: shared by every workspace of this checkout
        said.append(f"kept pgpathbench's own PostgreSQL with Citus in {TREE}: scripts/install-citus --remove "
                    "removes it")
    return said or ["nothing to clean"]


def _release_ipc(data: Path, ws: Workspace) -> str:
    """What it says of freeing the shared memory a crashed server left (cluster.release_ipc)."""
    try:
        bins = at_hand(int((data / "PG_VERSION").read_text()), ws)
        user = OsUser.owner_of(data)
    except (OSError, ValueError, KeyError):
        bins = None
    if bins is None:
        return f"left the shared memory of the crashed server {data.parent}: no PostgreSQL binaries for it here"
    why = release_ipc(data, bins, user)
    if why is None:
        return f"freed the shared memory of the crashed server {data.parent}"
    return f"could not free the shared memory of the crashed server {data.parent} ({why}); ipcs -m lists it"


def clean_user_servers(ledger: Ledger) -> list[str]:
    """Drop every database the ledger holds, server by server; an unreachable one is said, and kept."""
    said = []
    for dsn in sorted({e["dsn"] for e in ledger.entries()}):
        role = next(e["role"] for e in ledger.entries() if e["dsn"] == dsn)
        server = parse_server(f"{role}={dsn}")
        for run_id in sorted({e["run_id"] for e in ledger.entries() if e["dsn"] == dsn}):
            try:
                said += ledger.drop(run_id, None, server.connect, dsn)
            except psycopg.Error as e:
                said.append(f"could not reach {dsn} to drop run {run_id}'s databases ({' '.join(str(e).split())}); "
                            "give its password by PGPASSWORD or ~/.pgpass and run clean again")
    return said
