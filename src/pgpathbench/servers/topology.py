"""Roles -> servers for one run: the managed clusters a study asks for, and their teardown.

A study asks for clusters by name (`source`, `external`, ...) and maps its roles onto them.
Every cluster made here is stopped, and the run's directory (servers/RUN: data, proxy log and
config, scripts) removed, when the run ends, however it ends. The run's lock (Workspace.hold_run)
is held meanwhile, taken before anything is made: what a run that is gone left (servers, proxy,
namespaces, files) is removed when it resumes, when any other run starts (`clear_killed_runs`),
or by `clean`; nothing of a run that holds its lock is.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import psycopg

from ..errors import UserError
from ..procs import OsUser, cmdline, pid_alive
from ..workspace import Workspace
from . import citus as engine
from .binaries import PgBinaries, at_hand
from .cluster import TCP_AUTH, Cluster, socket_dir
from .postmaster import postmaster_pid, release_ipc, stop_pid
from .netns import create_netns, remove_netns_links
from .network import Link, ToxiproxyError, ToxiproxyServer, available_link_kinds, find_toxiproxy, measure_rtt
from .host_proxy import HostLinks
from .ledger import Ledger
from .paths import NetworkPath
from .placed_servers import PlacedServers
from .remote import RemoteCluster
from .pgbouncer import Pooler, stop_recorded as stop_recorded_pooler
from .tls import Authority
from .user import UserDsn, UserServer

Server = Cluster | UserServer | RemoteCluster   # what a study's role is: a managed server or the user's (--server ROLE=DSN)
PROBE_ROUND_TRIPS = 100
PROXY_PID_FILE = "toxiproxy.pid"   # found by `clean` if a run was killed before it could stop the proxy
NETNS_STATE = "network.json"       # namespaces and veths made, recorded before they are made (for `clean`)
TLS_DIR = "tls"                    # the run's CA, its servers' certificates and keys (tls.py)


def require_proxy() -> None:
    if find_toxiproxy() is None:
        raise UserError("--latency/--bandwidth: emulated links need toxiproxy-server; run make bootstrap "
                        "(scripts/install-toxiproxy builds it) or put it on PATH")


class Servers:
    def __init__(self, workspace: Workspace, run_id: str, bins: PgBinaries, keep: bool = False,
                 log=lambda message: None, user_dsns: dict[str, UserDsn] | None = None, hosts=None,
                 placed: dict[str, str] | None = None):
        self.workspace = workspace
        self.root: Path = workspace.run_servers_dir(run_id)
        self.bins = bins
        self.keep = keep
        self.clusters: dict[str, Cluster] = {}
        self.poolers: dict[str, Pooler] = {}      # name -> a PgBouncer in front of a cluster of ours
        self.links: dict[str, tuple[Link, str, Path]] = {}   # name -> (link, conninfo through it, passfile)
        self._proxy: ToxiproxyServer | None = None
        self.host_links = HostLinks()             # links whose client is a placed server: on its host
        self.run_tag = run_id.rsplit("-", 1)[-1][:4]
        self.log = log
        self.run_id = run_id
        self.netns_state = workspace.root / NETNS_STATE
        self.user_dsns = user_dsns or {}          # role -> the user's server (--server ROLE=DSN)
        self.user_servers: dict[str, UserServer] = {}
        self.ledger = Ledger(workspace.root)
        self.authority = Authority(self.root / TLS_DIR, workspace.server_user)   # made when a server needs TLS
        self._lock: int | None = None   # the run's lock, held from __enter__ to close()
        # --place's roles: their servers on other hosts, over the run's open SSH connections (hosts)
        self.placed = PlacedServers(hosts, placed, run_id, self.root, workspace, log)

    def user_server(self, role: str) -> UserServer | None:
        """The user's server in `role`, if --server named one (the same for every major)."""
        if role not in self.user_dsns:
            return None
        if role not in self.user_servers:
            self.user_servers[role] = UserServer(self.user_dsns[role], self.run_id, self.root, self.ledger)
        return self.user_servers[role]

    def scoped(self, major: int, bins: PgBinaries) -> "ServerScope":
        """The clusters and links of one PostgreSQL major: names prefixed pgN_, its binaries."""
        return ServerScope(self, f"pg{major}_", bins)

    def cluster(self, name: str, settings: dict[str, str] | None = None, remote: bool = False,
                bandwidth_kbit: int | None = None, bins: PgBinaries | None = None,
                tcp_auth: str = TCP_AUTH[0], secret: str | None = None, tls: bool = False) -> Cluster:
        """A started cluster named `name` for this run (made fresh on first request).

        A remote role sits on its own network stack when we can make one (root): a network
        namespace joined by a veth pair, with tc tbf for a bandwidth limit. Otherwise it listens
        on loopback and links are proxies only (said once). With tls, it has a certificate of the
        run's CA for the addresses it is reached at, and ssl on (asked later: restarted so).
        """
        if name not in self.clusters:
            c = Cluster(name, self.root / name, bins or self.bins, self.workspace.server_user, settings or {},
                        tcp_auth=tcp_auth, secret=secret, template=self.workspace.templates_dir)
            c.remove()  # a resumed run starts from clean data, never from a killed run's leftovers
            if remote:
                c.netns = self._namespace(name, bandwidth_kbit)
            c.tls = self.authority.issue(name, (c.tcp_host,)) if tls else None
            self.clusters[name] = c
            c.start()
        elif tls and self.clusters[name].tls is None:
            c = self.clusters[name]
            c.tls = self.authority.issue(name, (c.tcp_host,))
            c.restart()
        return self.clusters[name]

    def pooler(self, name: str, server: Server, tls: bool = False) -> Pooler:
        """A started PgBouncer named `name` in front of `server` (made fresh on first request), in
        its own directory of the run's: `clean` stops it by its pid file there if the run is killed.
        With tls, both its legs are TLS: a certificate of the run's CA for where clients reach it."""
        if name not in self.poolers:
            pooler = Pooler(name, self.root / name, self.workspace.server_user, server)
            if tls:
                pooler.tls = self.authority.issue(name, (pooler.tcp_host,))
                pooler.root_cert = self.authority.root_cert
            self.poolers[name] = pooler.start()
        return self.poolers[name]

    def _namespace(self, name: str, bandwidth_kbit: int | None) -> dict | None:
        kind = available_link_kinds()["netns"]
        if not kind.startswith("ok"):
            self.log(f"no network namespace for the remote role ({kind}): it listens on 127.0.0.1, "
                     "links are Toxiproxy only")
            return None
        rec = create_netns(f"{self.run_tag}_{name}"[:20], self.netns_state, bandwidth_kbit, owner=self.run_id)
        self.log(f"{name} sits in network namespace {rec['netns']} at {rec['ns_addr']} (veth"
                 + (f", tbf {bandwidth_kbit} kbit/s" if bandwidth_kbit else "") + ")")
        return rec

    def link(self, name: str, cluster: Cluster, latency_ms: int = 0, bandwidth_kbit: int | None = None,
             client: Server | None = None) -> Link:
        """A path to `cluster`'s TCP port: direct on loopback, or through an emulated link.

        Links go through a private Toxiproxy (latency, bandwidth); a link of 0 ms and no
        bandwidth limit is the direct loopback path, still probed for its round-trip time.
        A client placed on a host (client) has its links there (host_proxy.py).
        """
        if isinstance(client, RemoteCluster):
            return self.host_links.link(name, client, cluster, latency_ms)
        if name in self.links:
            return self.links[name][0]
        host, over = cluster.tcp_host, "veth" if cluster.netns else getattr(cluster, "network", "loopback")
        shaped = cluster.netns is not None  # tbf on the veth already limits bandwidth
        if latency_ms == 0 and (not bandwidth_kbit or shaped):
            link = Link(name, f"direct ({over})", host, cluster.port, 0, 0, bandwidth_kbit, upstream=f"{host}:{cluster.port}")
        else:
            if self._proxy is None:
                self._proxy = ToxiproxyServer(user=self.workspace.server_user, log_path=self.root / "toxiproxy.log",
                                              config_path=self.root / "toxiproxy.json")
                self._proxy.start()
                (self.root / PROXY_PID_FILE).write_text(f"{self._proxy.pid}\n")
            link = self._proxy.add_link(name, host, cluster.port, latency_ms,
                                        bandwidth_kbit=None if shaped else bandwidth_kbit)
            link.kind = f"proxy ({over})"
            if shaped:
                link.bandwidth_kbit = bandwidth_kbit
        self.links[name] = (link, link.conninfo(cluster.conninfo(transport="tcp")), cluster.passfile)
        return link

    def probe_links(self) -> list[dict]:
        """The median round trip of SELECT 1 through every link, now."""
        return [{"link": name, **measure_rtt(conninfo, PROBE_ROUND_TRIPS, passfile)}
                for name, (_, conninfo, passfile) in self.links.items()] + self.host_links.probe(PROBE_ROUND_TRIPS)

    def fingerprint(self) -> dict:
        managed = {name: c.fingerprint() for name, c in (*self.clusters.items(), *self.placed.clusters.items())
                   if c.running}
        poolers = {name: p.fingerprint() for name, p in self.poolers.items() if p.running}
        return {**managed, **poolers, **{f"user_{role}": u.fingerprint() for role, u in self.user_servers.items()}}

    def link_fingerprint(self) -> dict:
        return {**{name: link.describe() for name, (link, *_) in self.links.items()},
                **{name: link.describe() for name, link in self.host_links.links.items()}}

    def dead(self, wait_s: float = 0.0) -> list[str]:
        """The clusters of this run whose server has died (not stopped by us), here or on its host, or
        whose host is lost: 'name (how)'.
        wait_s: after a failure, how long to watch for a death still under way (a killed
        postmaster closes its sockets, which fails the client, before it can be reaped)."""
        deadline = time.monotonic() + wait_s
        while True:
            found = [f"{name} ({c.exit_reason()})" for name, c in (*self.clusters.items(), *self.poolers.items())
                     if c.exit_reason()] or self.placed.dead()   # one SSH round trip a host with servers
            if found or time.monotonic() >= deadline:
                return found
            time.sleep(0.02)

    def check_links(self) -> list[str]:
        """What differs between each proxy's toxics and what we set: another local user can
        reach Toxiproxy's API (127.0.0.1, no authentication) and change a run's latency."""
        on_hosts = self.host_links.verify()
        if self._proxy is None:
            return on_hosts
        try:
            return self._proxy.verify() + on_hosts
        except (OSError, ToxiproxyError) as e:
            return [f"Toxiproxy does not answer ({e})"] + on_hosts

    def clear_leftovers(self) -> list[str]:
        """Remove what a killed session of this run left: servers, proxy, namespaces, files."""
        said = []
        for data in sorted(self.root.glob("*/data")):
            pid = postmaster_pid(data)
            if pid:
                stop_pid(pid)
                said.append(f"stopped server {data.parent.name} (pid {pid})")
            if (data / "postmaster.pid").exists():   # stopped, so its postmaster died without shutting down
                said.append(free_crashed(data, self.workspace))
        said += filter(None, [stop_recorded_proxy(self.root / PROXY_PID_FILE)])
        for config in sorted(self.root.glob("*/pgbouncer.ini")):   # a pooler's (its pid file goes when it stops)
            said += filter(None, [stop_recorded_pooler(config.parent)])
        # Every server's and pooler's socket directory (in /tmp when the path is long), its data made
        # or not (killed in initdb): nothing else removes one in /tmp.
        for d in sorted(p for p in self.root.glob("*") if p.is_dir()):
            shutil.rmtree(socket_dir(d), ignore_errors=True)
        said += remove_netns_links(self.netns_state, owner=self.run_id)
        for role, dsn in self.user_dsns.items():   # what this run made on the user's servers
            said += self.ledger.drop(self.run_id, role, dsn.connect)
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
            said.append(f"removed {self.root}")
        return said

    def close(self) -> None:
        if self._proxy is not None:
            self._proxy.close()
            (self.root / PROXY_PID_FILE).unlink(missing_ok=True)
        try:
            self.host_links.close(self.log)
            self._drop_user_objects()
            self._close_clusters()
            self.placed.close(self.keep)
        finally:   # after the servers inside them have stopped
            try:
                remove_netns_links(self.netns_state, owner=self.run_id)
                if not self.keep:
                    shutil.rmtree(self.root, ignore_errors=True)
            finally:   # last: until now, nothing of the run is anyone else's to remove
                if self._lock is not None:
                    self.workspace.release_run(self.run_id, self._lock)
                    self._lock = None

    def _drop_user_objects(self) -> None:
        if self.keep:
            for u in self.user_servers.values():
                self.log(f"kept on the user's server {u.name}: databases {', '.join(u.created)} "
                         "('pgpathbench clean' drops them)")
            return
        for u in self.user_servers.values():
            try:
                u.drop_databases()
            except psycopg.Error as e:   # the servers of ours must still stop
                self.log(f"could not drop our databases on the user's server {u.name} ({e}); "
                         "'pgpathbench clean' drops them once it can connect")

    def _close_clusters(self) -> None:
        for p in self.poolers.values():   # before the servers they pool
            p.remove()
        for c in reversed(list(self.clusters.values())):
            if self.keep:
                c.stop()
            else:
                c.remove()

    def __enter__(self) -> "Servers":
        self._lock = self.workspace.hold_run(self.run_id)
        try:
            said = self.clear_leftovers()
        except BaseException:
            self.workspace.release_run(self.run_id, self._lock)
            self._lock = None
            raise
        on_hosts, unreached = self.placed.clear()
        said += on_hosts + unreached
        if said:
            self.log("removed what an earlier, killed session of this run left: " + "; ".join(said))
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def clear_killed_runs(workspace: Workspace, bins: PgBinaries, runs: list[dict], current: str) -> list[str]:
    """What runs killed on this host left: their servers' data (tens of GB at the paper presets),
    which their resume would not use (it starts from clean data). Their databases on user servers
    stay for their resume or 'pgpathbench clean' (it has their DSNs)."""
    said = []
    for run in runs:
        root = workspace.run_servers_dir(run["run_id"])
        if run["status"] != "killed" or run["run_id"] == current or not root.is_dir():
            continue
        with workspace.claim_run(run["run_id"]) as holder:
            if holder is not None:   # resumed meanwhile
                continue
            size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and not f.is_symlink())
            done = Servers(workspace, run["run_id"], bins).clear_leftovers()
        said.append(f"removed what killed run {run['run_id']} left ({size / 1e9:.1f} GB): " + "; ".join(done))
    return said


def free_crashed(data: Path, workspace: Workspace) -> str:
    """What it says of freeing the shared memory a crashed server left (cluster.release_ipc)."""
    try:
        bins = at_hand(int((data / "PG_VERSION").read_text()), workspace)
        user = OsUser.owner_of(data)
    except (OSError, ValueError, KeyError):
        bins = None
    if bins is None:
        return f"left the shared memory of the crashed server {data.parent}: no PostgreSQL binaries for it here"
    why = release_ipc(data, bins, user)
    if why is None:
        return f"freed the shared memory of the crashed server {data.parent}"
    return f"could not free the shared memory of the crashed server {data.parent} ({why}); ipcs -m lists it"


def stop_recorded_proxy(pid_file: Path) -> str | None:
    """A Toxiproxy a killed run could not stop (it dies with its parent, so this is rare)."""
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return None
    if "toxiproxy" not in cmdline(pid) or not pid_alive(pid):
        return None
    stop_pid(pid, timeout=5)
    return f"stopped proxy {pid_file.parent.name} (pid {pid})"


class ServerScope:
    """What a study sees of Servers for one major version (see Servers.scoped)."""

    def __init__(self, servers: Servers, prefix: str, bins: PgBinaries):
        self.servers, self.prefix, self.bins = servers, prefix, bins

    def cluster(self, name: str, settings: dict[str, str] | None = None, remote: bool = False,
                bandwidth_kbit: int | None = None, tcp_auth: str = TCP_AUTH[0], secret: str | None = None,
                tls: bool = False) -> Cluster:
        return self.servers.cluster(self.prefix + name, settings, remote, bandwidth_kbit, self.bins, tcp_auth, secret,
                                    tls)

    def server(self, role: str, settings: dict[str, str] | None = None, remote: bool = False,
               bandwidth_kbit: int | None = None, tcp_auth: str = TCP_AUTH[0], tls: bool = False,
               secret: str | None = None) -> Server:
        """The role's server: the user's (--server ROLE=DSN), else a managed cluster named after it, here
        or on its host (--place) (settings, remote, bandwidth, TCP authentication, TLS and a password
        given are the managed one's)."""
        user = self.servers.user_server(role)
        if user is not None:
            return user
        host = self.servers.placed.host_of(role)
        if host:   # its client path probed every round, as every link is
            preload = (settings or {}).get("shared_preload_libraries", "").split(",")
            citus = engine.extension_version(self.bins) if "citus" in preload else None   # Citus there too
            placed = self.servers.placed.server(self.prefix + role, role, self.bins.major, settings, secret, citus)
            self.servers.link(f"{placed.name}@{host}", placed)
            return placed
        return self.cluster(role, settings, remote, bandwidth_kbit, tcp_auth, secret, tls)

    @property
    def root_cert(self) -> Path:
        """The run's CA certificate, which clients of a case with TLS verify servers against."""
        return self.servers.authority.root_cert

    def clusters(self) -> list[Cluster]:
        """The managed servers of this major started so far, in start order."""
        return [c for name, c in self.servers.clusters.items() if name.startswith(self.prefix)]

    def pooler(self, server: Server, tls: bool = False) -> Pooler:
        """The PgBouncer in front of `server` (of this major, or the user's): one per server and TLS value
        (1.18's TLS settings are the whole pooler's), every pool mode."""
        return self.servers.pooler(f"{server.name}_pgbouncer" + ("_tls" if tls else ""), server, tls)

    def link(self, name: str, cluster: Cluster, latency_ms: int = 0, bandwidth_kbit: int | None = None) -> Link:
        return self.servers.link(self.prefix + name, cluster, latency_ms, bandwidth_kbit)

    def link_name(self, name: str) -> str:
        return self.prefix + name

    def path(self, path: NetworkPath, cluster: Cluster, bandwidth_kbit: int | None = None,
             client: Server | None = None) -> Link:
        """The link for `path` to `cluster`'s TCP port, named by the path's id (probed every round);
        client: the server at its other end when that is not this machine (a placed one's host)."""
        assert self.prefix == f"pg{path.major}_", "a path of another major than this scope's"
        return self.servers.link(path.id, cluster, path.latency_ms, bandwidth_kbit, client)

    @property
    def workspace(self) -> Workspace:
        return self.servers.workspace

    @property
    def root(self) -> Path:
        """This run's server directory: for files the servers must read (scripts, data)."""
        return self.servers.root
