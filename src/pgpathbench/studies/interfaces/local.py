"""The local role of interfaces and interfaces-fidelity: where the clients connect over unix and tcp.

A managed local server serves both transports (its socket, loopback TCP through a probed link). A
user server (--server local=DSN) serves its DSN's transport only, as every client reaches it by
that DSN (its TLS settings included; the password by PGPASSFILE, servers/user.py): there is no
socket of ours there. refine_local() leaves the other transport out, or refuses it when
--transport names it; local_targets() gives a Target per transport the server serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...tools.clients import session_env
from ...datasets.seed003 import DB
from ...servers import user
from ...servers.paths import DIRECT
from ...servers.topology import Server
from ..base import only_served
from .spec import LOCAL_ROLE, network_path

@dataclass(frozen=True)
class Target:
    """Where a client (and psql's reference) connects for one (transport, latency): a conninfo without
    a password, and the server whose password file its environment names (PGPASSFILE)."""
    conninfo: str
    server: Server

    def env(self, settings: dict[str, str] | None = None) -> dict[str, str]:
        """session_env (with a case's --set session settings) and the server's PGPASSFILE."""
        return self.server.client_env(session_env(settings))


def refine_local(options, given: set[str]):
    """A user local server serves its DSN's transport only: the other is refused when --transport
    names it, left out otherwise (say_local() says so). Managed: the options as they are."""
    local = user.from_stored(options.params).get(LOCAL_ROLE)
    if local is None:
        return options
    missing = "tcp" if local.over_socket else "unix"

    def refusal(dim: str, value: str) -> str:
        others = ",".join(t for t in options.dims["transport"] if t != missing) or \
            ("unix" if missing == "tcp" else "tcp")
        return _NO_TRANSPORT[missing].format(others=others)
    served = tuple(t for t in options.dims["transport"] if t != missing)
    return only_served(options, given, {"transport": served}, refusal)


def say_local(env, local: Server) -> None:
    """The log line of a user local server: the one transport it is measured over."""
    if not local.managed:
        env.log(f"local is your server: {_ONLY[local.transports[0]]}")


def local_targets(env, local: Server) -> dict[str, Target]:
    """transport -> where the clients connect to the local server, by its own conninfo (a user's: its
    DSN) over the transports it serves; TCP through a link to it, probed every round."""
    targets = {}
    if "unix" in local.transports:
        targets["unix"] = Target(local.conninfo(DB, "unix"), local)
    if "tcp" in local.transports:
        link = env.servers.path(network_path("tcp", DIRECT, env.major), local)
        targets["tcp"] = Target(link.conninfo(local.conninfo(DB, "tcp")), local)
    return targets


_ONLY = {"tcp": "measured over tcp (lcl:tcp) only, its DSN's way: pgpathbench has no unix socket of its own there",
         "unix": "measured over unix (lcl:ipc) only, its DSN's socket directory: no TCP address of it is given"}
_NO_TRANSPORT = {
    "unix": "--transport unix: your server in the local role is reached over TCP (its DSN names a host), and "
            "pgpathbench has no unix socket of its own there; leave unix out (e.g. --transport {others}), or "
            "give --server local=DSN with host=ITS_SOCKET_DIRECTORY to measure its socket",
    "tcp": "--transport tcp: your server in the local role is reached by its unix socket (its DSN's host is a "
           "directory); leave tcp out (e.g. --transport {others}), or give --server local=DSN with its TCP "
           "host to measure tcp",
}
