"""Emulated latency on a path whose both ends are on hosts (issue 47, `--place` with `--latency`):
a Toxiproxy on the client's host, and the path's round trips probed from there.

fdw-overhead's external on host B reaching its source on host A must get its delay on B: a proxy
here would route B -> here -> A. So this machine's toxiproxy-server (a static Go binary, built by
scripts/install-toxiproxy) is shipped to B over the run's open SSH connection, as the PostgreSQL
bundle is, and its SHA-256 as B computes it must be the one computed here. It runs there as the
servers' account, listening on B's loopback only; its HTTP API is reached by curl in a script on
ssh's stdin (no forwarded port, no protocol of ours). The host's ledger records it before it is
shipped (`proxy DIR`), so that the end of the run, SIGTERM and `clean` after a SIGKILL stop it
(remote_scripts.CLEANUP); STOP_PROXY ends it earlier with --keep.

The path's round trips are measured where its client is: SELECT 1 through dblink from the client's
server (on B) to the target's, over the link (through the proxy, or direct at 0 ms), each call one
network round trip, timed on B by clock_timestamp() between consecutive calls.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess

from psycopg import sql

from ..errors import UserError
from . import fdw
from . import remote_scripts as scripts
from .network import Link, ToxiproxyError, ToxiproxyServer, find_toxiproxy, rtt_summary
from .remote import PORTS, START_TRIES, HostLost, HostWorkspace, RemoteCluster

PROBE_WARMUP = 5


class HostToxiproxy(ToxiproxyServer):
    """A toxiproxy-server on a host: ToxiproxyServer's links and checks, over the host's connection."""

    def __init__(self, place: HostWorkspace):
        binary = find_toxiproxy()
        if binary is None:
            raise UserError("--latency: a path between two hosts gets its delay from this machine's "
                            "toxiproxy-server, shipped there; run make bootstrap (scripts/install-toxiproxy)")
        self.binary, self.place = binary, place
        self.port: int | None = None
        self.links: dict[str, Link] = {}
        self.dir = f"{place.dir}/toxiproxy"
        self.sha256 = hashlib.sha256(binary.read_bytes()).hexdigest()
        self._running = False

    @property
    def pid(self) -> None:
        return None   # on the host: its ledger and config path find it

    def start(self) -> "HostToxiproxy":
        place = self.place.prepare()
        res = place.connection.send(scripts.render(scripts.SHIP_PROXY, dir=self.dir, ledger=f"{place.dir}/ledger"),
                                    self.binary.read_bytes())
        if res.returncode != 0 or res.stdout.split()[:1] != [self.sha256]:
            raise place.failed(res, f"shipping toxiproxy-server (sha256 {self.sha256[:12]}; there: "
                                    f"{(res.stdout.split() or ['none'])[0][:12]})")
        for attempt in range(START_TRIES):
            self.port = random.randint(*PORTS)
            try:
                place.output(scripts.render(scripts.START_PROXY, ("as_account", "chown"), dir=self.dir,
                                            port=self.port, **place.command_values()), "the start of toxiproxy")
                self._running = True
                return self
            except UserError as e:
                if not str(e).endswith("port in use") or attempt == START_TRIES - 1:
                    raise
        return self

    def close(self) -> None:
        self.links.clear()
        if self._running:
            self._running = False
            self.place.output(scripts.render(scripts.STOP_PROXY, dir=self.dir), "the stop of toxiproxy")

    def _request(self, method: str, path: str, body: dict | None = None):
        script = scripts.render(scripts.PROXY_API, ("body",), method=method, port=self.port, path=path,
                                body=json.dumps(body) if body is not None else "")
        try:
            res = self.place.connection.run(script, timeout=30)
        except subprocess.TimeoutExpired:
            raise HostLost(f"host {self.place.name}: toxiproxy {method} {path} took more than 30 s") from None
        if res.returncode != 0:
            raise self.place.failed(res, f"toxiproxy {method} {path}")
        text, _, status = res.stdout.rstrip("\n").rpartition("\n")
        if not status.isdigit() or int(status) >= 400:
            raise ToxiproxyError(f"toxiproxy on host {self.place.name} {method} {path}: {status} {text}")
        return json.loads(text) if text.strip().startswith(("{", "[")) else text


def probe_server(client: RemoteCluster, name: str, target, address: tuple[str, int]) -> str:
    """A postgres_fdw server (dblink takes its options and user mapping) in the client's postgres
    database reaching the target's at `address`, the link's: its name, for probe_from()."""
    server = f"pgpb_probe_{name}"[:63]
    with client.connect("postgres") as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS dblink")
        conn.execute(sql.SQL("DROP SERVER IF EXISTS {} CASCADE").format(sql.Identifier(server)))
        fdw.reach(conn, server, target, "postgres", address)
    return server


def probe_from(client: RemoteCluster, server: str, n: int) -> dict:
    """n round trips of SELECT 1 from the client's host over the path `server` reaches (its link),
    after PROBE_WARMUP untimed ones: each row's clock_timestamp() follows its own dblink call (one
    per row: the call names the row's number, so that it is not run once and rescanned)."""
    with client.connect("postgres") as conn:
        conn.execute("SELECT dblink_connect('pgpb_probe', %s)", [server])
        stamps = [r[0] for r in conn.execute(
            "SELECT extract(epoch FROM clock_timestamp())::float8 FROM generate_series(1, %s) i, "
            "LATERAL dblink('pgpb_probe', 'SELECT ' || i) AS r(x int)", [n + PROBE_WARMUP + 1])]
        conn.execute("SELECT dblink_disconnect('pgpb_probe')")
    return rtt_summary([(b - a) * 1000 for a, b in zip(stamps[PROBE_WARMUP:], stamps[PROBE_WARMUP + 1:])])



class HostLinks:
    """A run's links whose client is a placed server: made on the client's host (a proxy there when
    the link adds latency), probed from there; one proxy per host."""

    def __init__(self):
        self.links: dict[str, Link] = {}
        self.proxies: dict[str, HostToxiproxy] = {}                  # host name -> its proxy
        self.probes: dict[str, tuple[RemoteCluster, str]] = {}       # link name -> (client, probe server)

    def link(self, name: str, client: RemoteCluster, cluster, latency_ms: int) -> Link:
        if name in self.links:
            return self.links[name]
        where = f"on {client.network}, to {cluster.network}"
        upstream = f"{cluster.tcp_host}:{cluster.port}"
        if latency_ms == 0:
            link = Link(name, f"direct ({where})", cluster.tcp_host, cluster.port, upstream=upstream)
        else:
            proxy = self.proxies.get(client.host.name)
            if proxy is None:
                proxy = self.proxies[client.host.name] = HostToxiproxy(client.host).start()
            link = proxy.add_link(name, cluster.tcp_host, cluster.port, latency_ms)
            link.kind = f"proxy ({where}; toxiproxy-server sha256 {proxy.sha256})"
        self.probes[name] = (client, probe_server(client, name, cluster, (link.host, link.port)))
        self.links[name] = link
        return link

    def probe(self, n: int) -> list[dict]:
        return [{"link": name, **probe_from(client, server, n)} for name, (client, server) in self.probes.items()]

    def verify(self) -> list[str]:
        problems = []
        for host, proxy in self.proxies.items():
            try:
                problems += proxy.verify()
            except (ToxiproxyError, HostLost, UserError) as e:
                problems.append(f"Toxiproxy on host {host} does not answer ({e})")
        return problems

    def close(self, log) -> None:
        """Each host's proxy stopped; one whose host is lost is left to its ledger (the run's end, clean)."""
        for host, proxy in self.proxies.items():
            try:
                proxy.close()
            except (HostLost, UserError) as e:
                log(f"toxiproxy on host {host} not stopped now ({e}); the host's ledger has it")
        self.proxies.clear()
