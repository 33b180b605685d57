"""A small LAN for issue 12's tests: each "host" a network namespace, all on one Linux bridge.

    with Lan(root, ("a", "b")) as lan:  lan.hosts["a"].address, lan.counters("b") ...

One namespace (`pgpb-usrTTTT-lan`) holds a bridge; this (the root) namespace and each host
namespace (`pgpb-usrTTTT-NAME`) join it by a veth pair whose other end is enslaved to the bridge.
Every end has an address in one 169.254.X.0/24 (the root .1, host i .10+i), so root, host a and
host b reach each other at layer 2: no IP forwarding (the root namespace's ip_forward stays 0)
and no iptables of the root namespace (a bridge in its own namespace does not see the root's
br_netfilter rules). Two hosts joined to the root by a /30 each (servers/netns.py) could not
reach each other without forwarding.

X is chosen under a machine-wide lock among 100..199 (never netns.py's 77, nor 169: the
metadata address), one no address or route of the root namespace uses yet: concurrent suites
each hold a root end, so they see each other's. Every object is recorded in a state file
(root/lan.json) before it is made; stop() removes them (also after a half-made start), and
deleting the LAN's namespace destroys the bridge and every veth pair with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import secrets
import signal
import time
from pathlib import Path
from typing import NamedTuple

from pgpathbench.servers.netns import _ip, _write

PREFIX = "pgpb-usr"     # the tests' own: netns.py's names are pgpb-RUN and pgpbKh
GLOBAL_LOCK = Path("/run/lock/pgpb-usr-lan.lock")
SUBNETS = [x for x in range(100, 200) if x != 169]
STATE = "lan.json"      # in the LAN's root: what it made, recorded before it is made


class LanHost(NamedTuple):
    name: str
    netns: str          # where its processes run (procs.OsUser.spawn(netns=...))
    address: str        # its address on the LAN
    interface: str      # its veth end, inside netns


class Lan:
    """A bridge, this namespace and one namespace per host joined to it; a context manager."""

    def __init__(self, root: Path, hosts: tuple[str, ...] = ("a", "b")):
        if not hosts or len(hosts) > 9 or not all(h.isalnum() and h.islower() for h in hosts):
            raise ValueError("hosts: 1 to 9 names of lower-case letters and digits")
        self.root, self.names = Path(root), hosts
        self.state = self.root / STATE
        self.records: list[dict] = []
        self.hosts: dict[str, LanHost] = {}
        self.root_address = self.root_interface = None

    def __enter__(self) -> "Lan":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Lan":
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            with _machine_lock():   # until our root end holds its address: others see X taken then
                tag, x = _free_tag_and_subnet()
                self._make(tag, f"169.254.{x}.")
        except BaseException:
            self.stop()
            raise
        return self

    def _make(self, tag: str, net: str) -> None:
        base = PREFIX + tag
        lan = self._netns(f"{base}-lan")
        bridge = f"{base}br"
        _ip("ip", "-n", lan, "link", "add", bridge, "type", "bridge")
        _ip("ip", "-n", lan, "link", "set", bridge, "up")
        self.root_interface, self.root_address = f"{base}0", f"{net}1"
        self._join(None, self.root_interface, self.root_address, lan, bridge)
        for i, name in enumerate(self.names, 1):
            host = LanHost(name, self._netns(f"{base}-{name}"), f"{net}{10 + i}", f"{base}{i}")
            self._join(host.netns, host.interface, host.address, lan, bridge)
            _ip("ip", "-n", host.netns, "link", "set", "lo", "up")
            self.hosts[name] = host

    def _netns(self, name: str) -> str:
        if _ip("ip", "netns", "pids", name, check=False).returncode == 0:   # someone else's: never ours to delete
            raise RuntimeError(f"network namespace {name} exists already")
        self._record("netns", name)
        _ip("ip", "netns", "add", name)
        return name

    def _join(self, netns: str | None, end: str, address: str, lan: str, bridge: str) -> None:
        """A veth pair: `end` in netns (None: ours) with the address, its peer (end + p) on the bridge."""
        if netns is None:
            self._record("link", end)   # ours outlives nothing: deleting the LAN's namespace ends the pair
        at = ("netns", netns) if netns else ()
        _ip("ip", "link", "add", end, *at, "type", "veth", "peer", "name", f"{end}p", "netns", lan)
        _ip("ip", "-n", lan, "link", "set", f"{end}p", "master", bridge, "up")
        inside = ("-n", netns) if netns else ()
        _ip("ip", *inside, "addr", "add", f"{address}/24", "dev", end)
        _ip("ip", *inside, "link", "set", end, "up")

    def _record(self, kind: str, name: str) -> None:
        self.records.append({"kind": kind, "name": name})
        _write(self.state, self.records)        # before it exists: a crash from here on leaves a record

    @classmethod
    def recorded(cls, root: Path) -> "Lan":
        """The LAN whose state file is in root, as a session that died (SIGKILL) left it: to stop()."""
        lan = cls(root)
        lan.records = json.loads(lan.state.read_text())
        return lan

    def stop(self) -> None:
        """Every process of each recorded namespace ended (its mounts go with them: a host's sshd,
        its servers), then every recorded object removed, the latest first, each struck from the
        state file as it goes (a later sweep never deletes a name another LAN has taken since)."""
        for rec in self.records:
            if rec["kind"] == "netns":
                _end_processes(rec["name"])
        while self.records:
            rec = self.records[-1]
            _ip("ip", "netns" if rec["kind"] == "netns" else "link", "del", rec["name"], check=False)
            self.records.pop()
            _write(self.state, self.records)
        self.state.unlink(missing_ok=True)

    def counters(self, host: str) -> dict[str, int]:
        """The host's veth end's rx/tx bytes and packets, as its own namespace counts them."""
        h = self.hosts[host]
        (link,) = json.loads(_ip("ip", "-n", h.netns, "-j", "-s", "link", "show", "dev", h.interface).stdout)
        stats = link["stats64"]
        return {f"{d}_{k}": stats[d][k] for d in ("rx", "tx") for k in ("bytes", "packets")}


def _end_processes(netns: str) -> None:
    """Every process in netns ended, until it lists none (a dying sshd may fork): SIGQUIT first, a
    PostgreSQL's immediate shutdown, which removes its shared memory (killed, /dev/shm keeps its
    PostgreSQL.N files); SIGKILL after a second."""
    for attempt in range(60):
        pids = [int(p) for p in _ip("ip", "netns", "pids", netns, check=False).stdout.split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGQUIT if attempt < 20 else signal.SIGKILL)
        time.sleep(0.05)


@contextlib.contextmanager
def _machine_lock():
    GLOBAL_LOCK.parent.mkdir(parents=True, exist_ok=True)   # a container may have no /run/lock
    with open(GLOBAL_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _free_tag_and_subnet() -> tuple[str, int]:
    """A name tag no namespace uses, and an X no address or route of ours uses (under the lock)."""
    used = _ip("ip", "-o", "addr", "show").stdout + _ip("ip", "route", "show").stdout
    names = _ip("ip", "netns", "list").stdout + _ip("ip", "-o", "link", "show").stdout
    free = [x for x in SUBNETS if f"169.254.{x}." not in used]
    if not free:
        raise RuntimeError("no free 169.254.X.0/24 for a test LAN: remove stale pgpb-usr* namespaces")
    tag = next(t for t in iter(lambda: secrets.token_hex(2), None) if PREFIX + t not in names)
    return tag, random.choice(free)
