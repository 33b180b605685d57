"""Where a host is, as the ssh config resolves it (issue 47): `ssh -G` with the connection's own
config gives the HostName, Port, User and ProxyJump an alias stands for. The database connections
of a placed server go from here to that HostName's address directly, never through SSH: with a
ProxyJump, the host may not be reachable from here at all, which is checked (a TCP probe) before
anything is made there, instead of a run that hangs on its first connection.
"""

from __future__ import annotations

import random
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

PROBE_TIMEOUT_S = 5
PORTS = (20000, 60000)    # where a placed server's port is tried on its host


@dataclass(frozen=True)
class Route:
    """How ssh reaches a host: after the user's config (an alias's HostName, User, Port, ProxyJump)."""
    hostname: str
    port: int
    user: str
    via: str | None = None      # its ProxyJump, or "a ProxyCommand"

    @classmethod
    def parse(cls, text: str) -> "Route":
        """`ssh -G`'s output: one 'keyword value' a line, keywords in lower case."""
        values: dict[str, str] = {}
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            values.setdefault(key, value.strip())
        via = values.get("proxyjump")
        if via in (None, "none") and values.get("proxycommand", "none") != "none":
            via = "a ProxyCommand"
        return cls(values["hostname"], int(values["port"]), values["user"], None if via == "none" else via)

    @property
    def shown(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}" + (f" via {self.via}" if self.via else "")

    def fingerprint(self) -> dict:
        return {"hostname": self.hostname, "port": self.port, "user": self.user, "via": self.via}


def resolve(config: Path, destination: str, option: str) -> Route:
    """`ssh -G -F CONFIG DESTINATION` (nothing is connected); a config ssh refuses is one line."""
    res = subprocess.run(["ssh", "-G", "-F", str(config), "--", destination], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=30)
    if res.returncode != 0 or "\nhostname " not in f"\n{res.stdout}":
        lines = [line.strip() for line in res.stderr.splitlines() if line.strip()]
        why = next((line for line in lines if " line " in line), lines[-1] if lines else f"exit {res.returncode}")
        raise UserError(f"{option}: ssh cannot read its configuration ({why}); fix the file it names")
    return Route.parse(res.stdout)


def address_of(route: Route, option: str) -> str:
    """The HostName's address as this machine resolves it: where the database connections go."""
    try:
        found = socket.getaddrinfo(route.hostname, route.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise UserError(f"{option}: its HostName {route.hostname} does not resolve on this machine ({e}), and "
                        "the database connections go there from here; give a HostName (or address) this machine "
                        "resolves") from None
    return found[0][4][0]


def source_address(address: str) -> str:
    """This machine's address on its route to `address` (a UDP socket's, after connect: nothing is sent),
    which a host sees the database connections come from even when its SSH comes through a jump."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((address, 9))
        return s.getsockname()[0]


def unreachable(address: str, port: int) -> str | None:
    """Why a TCP connection from here to address:port gets no answer; None when the host answers (a
    connection, or a refusal: nothing listens there, yet the host's address is reached)."""
    try:
        with socket.create_connection((address, port), timeout=PROBE_TIMEOUT_S):
            return None
    except ConnectionRefusedError:
        return None
    except socket.timeout:
        return f"no answer within {PROBE_TIMEOUT_S} s"
    except OSError as e:
        return e.strerror or str(e)


def reached_from_here(route: Route, name: str) -> str:
    """The address a server on the host is reached at from here (its HostName's, resolved here), checked
    to answer TCP from here on a port of the servers' range: one line when it does not (a host behind
    its jump host), before anything is made there."""
    option = f"--host {name}"
    address = address_of(route, option)
    why = unreachable(address, random.randint(*PORTS))
    if why:
        target = route.hostname if route.hostname == address else f"{route.hostname} ({address})"
        through = f" or {route.via}" if route.via else ""
        raise UserError(f"{option}: this machine cannot reach {target}: {why}; a server placed there is reached "
                        f"at that address directly, never through SSH{through}: give the host a HostName this "
                        f"machine reaches, with TCP ports {PORTS[0]}-{PORTS[1]} open to it")
    return address
