"""A run's placed servers (`--place`, issue 47): the RemoteClusters of remote.py, made on their
hosts on first request, watched while a measurement runs, removed with the run's directories there.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .host_ledger import HostLedger
from .hosts import watched
from .placement import host_of
from .remote import HostLost, HostWorkspace, RemoteCluster


class PlacedServers:
    """A run's placed servers (`--place`): made on their hosts on first request, each host's address
    admitted by the others' (postgres_fdw between hosts), removed with the run's directories there."""

    def __init__(self, hosts, placed: dict[str, str] | None, run_id: str, local_dir: Path, workspace, log):
        self.hosts, self.placed, self.run_id = hosts, dict(placed or {}), run_id
        self.local_dir, self.workspace, self.log = local_dir, workspace, log
        self.ledger = HostLedger(workspace.root)
        self.places: dict[str, HostWorkspace] = {}
        self.clusters: dict[str, RemoteCluster] = {}

    def host_of(self, role: str) -> str | None:
        return host_of(self.placed, role)

    def server(self, name: str, role: str, major: int, settings: dict[str, str] | None, secret: str | None = None,
               citus: str | None = None) -> RemoteCluster:
        if name in self.clusters:
            return self.clusters[name]
        host = self.host_of(role)
        if host not in self.places:
            self.places[host] = HostWorkspace(self.hosts[host], self.run_id, self.ledger)
        cluster = RemoteCluster(name, self.places[host], major, self.local_dir, dict(settings or {}), secret=secret,
                                citus=citus)
        self.clusters[name] = cluster
        cluster.start(self.workspace)
        connection = cluster.host.connection
        self.log(f"{name} runs on host {host} ({connection.spec.shown}: {connection.route.shown}) at "
                 f"{cluster.tcp_host}:{cluster.port}, as {cluster.host.account}; {cluster.origin}")
        for other in self.clusters.values():   # servers on two hosts reach each other (postgres_fdw)
            if other.host is not cluster.host:
                other.allow(cluster.host.address)
                cluster.allow(other.host.address)
        return cluster

    def dead(self) -> list[str]:
        """'name (how)' for each server whose host no longer answers over SSH ('host a lost: ...'), or
        which no longer runs there: its log's last line there, which goes with the run's directory."""
        found = []
        for place in self.places.values():
            there = {name: c for name, c in self.clusters.items() if c.host is place}
            try:
                said = place.output("true\n" + "".join(c.gone_script() for c in there.values() if c.running),
                                    "a check that the host and its servers answer", timeout=15)
            except (HostLost, UserError) as e:
                found += [f"{name} ({e})" for name in there]
                continue
            for name, _, last in (line.partition("\t") for line in said.splitlines()):
                if name in there:
                    found.append(f"{name} (gone from host {place.name}; its log's last line: {last or 'none'})")
        return found

    def watching(self, on_lost):
        """A context in which on_lost() is called (from a thread) when a host's connection ends."""
        return watched([place.connection for place in self.places.values()], lambda connection: on_lost())

    def clear(self) -> tuple[list[str], list[str]]:
        """What a killed session of this run left on its hosts (their ledgers'): (done, unreached)."""
        return self.ledger.clean(self.run_id)

    def close(self, keep: bool = False) -> None:
        """Every server stopped, and unless kept, the run's directory on each host removed; a host that
        cannot be reached keeps its entry here for `pgpathbench clean`."""
        lost = {}
        for cluster in self.clusters.values():   # every server stopped before any host's account goes
            try:
                cluster.stop() if keep else cluster.remove()
            except (HostLost, UserError) as e:
                lost[cluster.host.name] = e
        for place in [] if keep else self.places.values():
            try:
                if place.name not in lost:
                    self.log("; ".join(place.remove()))
            except (HostLost, UserError) as e:
                lost[place.name] = e
        for host, e in lost.items():
            self.log(f"left on host {host}: {e}; 'pgpathbench clean' removes it once the host answers")
