"""`pgpathbench clean`: remove what runs that are gone left (servers and their data, proxies,
network namespaces, their databases on user servers: the ledger's, reached by their recorded DSN
with the password from PGPASSWORD or ~/.pgpass; their directories and servers on --place hosts,
reached over SSH: host_ledger.py), and scratch files of processes that are gone.

Nothing a live process uses is touched: a run holds its lock while it lives (Workspace.claim_run
tells), the results cluster runs while any process uses it (store.stop_unused). --all also
removes the managed results cluster, when it is the store (not with --results-dsn: that store is
the user's, never dropped), and refuses while any other pgpathbench process is in the workspace
(Workspace.enter).
"""

from __future__ import annotations

import shutil

import psycopg

from . import scratch
from .servers.binaries import PgBinaries
from .servers.cluster import socket_dir
from .servers.postmaster import postmaster_pid, stop_pid
from .servers.citus import TREE, tree_facts
from .servers.host_ledger import HostLedger
from .servers.ledger import Ledger
from .servers.netns import netns_owners, remove_netns_links
from .servers.topology import NETNS_STATE, Servers, free_crashed
from .servers.user import parse_server
from .store import stop_unused
from .store.keeper import KEEPER_PID
from .workspace import Workspace


def clean(ws: Workspace, bins: PgBinaries, everything: bool = False, results_dsn: str | None = None,
          unreached: list[str] | None = None) -> list[str]:
    """What was removed, one line each; `unreached` gets one line per host of a run's that could
    not be reached (its entry kept for a later clean)."""
    if not ws.root.exists():
        return ["nothing to clean"]
    ws.enter("clean --all" if everything else "clean", alone=everything)
    said = stop_unused(ws)
    ledger, hosts = Ledger(ws.root), HostLedger(ws.root)
    for run_id in sorted(_runs_with_leftovers(ws, ledger) | {e["run_id"] for e in hosts.entries()}):
        with ws.claim_run(run_id) as holder:
            if holder is not None:
                said.append(f"left run {run_id}: in progress ({holder})")
                continue
            said += Servers(ws, run_id, bins).clear_leftovers()
            said += clean_user_servers(ledger, run_id)
            on_hosts, missed = hosts.clean(run_id)
            said += on_hosts
            if unreached is not None:
                unreached += missed
    said += [f"removed {path}" for path in scratch.sweep()]
    if everything:
        said += remove_netns_links(ws.root / NETNS_STATE)   # no run's: nobody else is in the workspace
        said += _remove_results_cluster(ws) if results_dsn is None else [
            "kept the results: clean never drops a --results-dsn database, nor the results cluster when it is "
            "not the store"]
        if tree_facts():   # outside the workspace: shared by every workspace of this checkout
            said.append(f"kept pgpathbench's own PostgreSQL with Citus in {TREE}: scripts/install-citus --remove "
                        "removes it")
    return said or ["nothing to clean"]


def _runs_with_leftovers(ws: Workspace, ledger: Ledger) -> set[str]:
    """Every run the workspace holds something of: servers or a lock, namespaces, databases on user servers."""
    runs = {p.name.removesuffix(".lock") for p in ws.servers_dir.glob("*")} if ws.servers_dir.is_dir() else set()
    return runs | netns_owners(ws.root / NETNS_STATE) | {e["run_id"] for e in ledger.entries()}


def _remove_results_cluster(ws: Workspace) -> list[str]:
    """The managed results cluster and every run stored in it (`clean --all`, alone in the workspace)."""
    said = []
    data = ws.results_dir / "data"
    pid = postmaster_pid(data)
    if pid:   # not its keeper's (stop_unused stopped that): started by hand, or by an older version
        stop_pid(pid)
        said.append(f"stopped the results cluster (pid {pid})")
    if (data / "postmaster.pid").exists():
        said.append(free_crashed(data, ws))
    (ws.root / KEEPER_PID).unlink(missing_ok=True)
    if ws.results_dir.exists():
        shutil.rmtree(socket_dir(ws.results_dir), ignore_errors=True)
        shutil.rmtree(ws.results_dir, ignore_errors=True)
        said.append(f"removed the results cluster {ws.results_dir}")
    return said


def clean_user_servers(ledger: Ledger, run_id: str) -> list[str]:
    """Drop a run's databases the ledger holds, server by server; an unreachable one is said, and kept."""
    said = []
    mine = ledger.entries(run_id)
    for dsn in sorted({e["dsn"] for e in mine}):
        role = next(e["role"] for e in mine if e["dsn"] == dsn)
        server = parse_server(f"{role}={dsn}")
        try:
            said += ledger.drop(run_id, None, server.connect, dsn)
        except psycopg.Error as e:
            said.append(f"could not reach {dsn} to drop run {run_id}'s databases ({' '.join(str(e).split())}); "
                        "give its password by PGPASSWORD or ~/.pgpass and run clean again")
    return said
