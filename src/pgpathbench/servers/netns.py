"""Network-namespace links: bandwidth over a real veth (no netem here, so no latency).

A namespace `pgpbK-NAME` joined to ours by a veth pair `pgpbKh`/`pgpbKn` on a link-local /30
(169.254.77.4K+1 here, +2 inside), with tc tbf on both ends when a bandwidth is given. A server
run inside the namespace (port 5432 is always free there) is reached at the inside address;
traffic then crosses the veth, not loopback. Every object is recorded in a state file (the
workspace's network.json) BEFORE it is made, with the run that made it, so that
remove_netns_links() can clean up after a crash, and a resumed run can remove what its killed
session left. The state file is read, changed and written under an exclusive flock
(network.lock beside it): several runs of one workspace create and remove their links at once.

The slot K is the machine's, not the workspace's: other workspaces (another test suite, a user's
run) make links at the same time. It is chosen, and links are made and removed, under a
machine-wide lock (MACHINE_LOCK), and a K is free only while no address, veth or namespace of
this machine carries it; the namespace's name carries K, so no two namespaces of any workspaces
can share a name, and a record whose namespace is gone never removes a veth that another
namespace's link now uses.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
from pathlib import Path

NETNS_PREFIX = "pgpb"
NETNS_BASE = "169.254.77."
NETNS_PORT = 5432
NETNS_SLOTS = 64          # /30s of 169.254.77.0/24
MACHINE_LOCK = Path("/run/lock/pgpathbench-netns.lock")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(list(args), capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {res.stderr.strip()}")
    return res


@contextlib.contextmanager
def _flock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)   # a container may have no /run/lock
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)   # read-only: a lock file another user made serves
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _locked(state_file: Path):
    """The records, for reading and changing under the machine's lock and the workspace's (always
    in that order); written back when the block ends."""
    state_file = Path(state_file)
    with _flock(MACHINE_LOCK), _flock(state_file.with_suffix(".lock")):
        try:
            records = json.loads(state_file.read_text())
        except FileNotFoundError:
            records = []
        box = [records]
        try:
            yield box
        finally:   # what the block made of the records, also when it failed half-way
            if box[0]:
                _write(state_file, box[0])
            else:
                state_file.unlink(missing_ok=True)


def create_netns_link(name: str, state_file: Path, bandwidth_kbit: int | None = None):
    from .network import Link
    rec = create_netns(name, state_file, bandwidth_kbit)
    return Link(name, "netns", rec["ns_addr"], NETNS_PORT, 0, 0, bandwidth_kbit,
                upstream=f"{rec['netns']}:{rec['ns_addr']}:{NETNS_PORT}",
                toxics=[{"type": "tbf", "rate_kbit": bandwidth_kbit}] if bandwidth_kbit else [])


def create_netns(name: str, state_file: Path, bandwidth_kbit: int | None = None, owner: str | None = None) -> dict:
    """A namespace joined to ours by a veth pair: {netns, veth_host, veth_ns, host_addr, ns_addr, owner}."""
    if not re.fullmatch(r"[a-z0-9_]{1,20}", name):
        raise ValueError(f"netns link '{name}': lower-case letters, digits and _ only")
    with _locked(state_file) as box:
        k = _free_slot({r["veth_host"] for r in box[0]})
        netns = f"{NETNS_PREFIX}{k}-{name}"
        if _ip("ip", "netns", "pids", netns, check=False).returncode == 0:
            raise RuntimeError(f"network namespace {netns} exists already: pgpathbench clean removes it")
        rec = {"netns": netns, "veth_host": f"{NETNS_PREFIX}{k}h", "veth_ns": f"{NETNS_PREFIX}{k}n",
               "host_addr": f"{NETNS_BASE}{4 * k + 1}", "ns_addr": f"{NETNS_BASE}{4 * k + 2}", "owner": owner}
        box[0] = box[0] + [rec]
        _write(state_file, box[0])   # recorded before it exists: a crash from here on leaves a record
        try:
            _make(rec, bandwidth_kbit)
        except BaseException:
            _remove(rec)
            box[0] = [r for r in box[0] if r is not rec]
            raise
    return rec


def _free_slot(recorded_veths: set[str]) -> int:
    """A K that no address, veth or namespace of this machine carries, nor a record of ours
    (under the machine's lock)."""
    used = _ip("ip", "-o", "addr", "show").stdout + _ip("ip", "-o", "link", "show").stdout
    namespaces = {line.split()[0] for line in _ip("ip", "netns", "list").stdout.splitlines() if line.strip()}
    for k in range(NETNS_SLOTS):
        veth = f"{NETNS_PREFIX}{k}h"
        if f"{NETNS_BASE}{4 * k + 1}/" in used or re.search(rf"\b{veth}\b|\b{NETNS_PREFIX}{k}n\b", used) \
                or veth in recorded_veths or any(n.startswith(f"{NETNS_PREFIX}{k}-") for n in namespaces):
            continue
        return k
    raise RuntimeError("no free 169.254.77.x/30 for a netns link: pgpathbench clean frees them")


def _write(state_file: Path, records: list[dict]) -> None:
    tmp = Path(state_file).with_suffix(".tmp")
    tmp.write_text(json.dumps(records, indent=1))
    tmp.replace(state_file)


def _make(rec: dict, bandwidth_kbit: int | None) -> None:
    netns, vh, vn = rec["netns"], rec["veth_host"], rec["veth_ns"]
    _ip("ip", "netns", "add", netns)
    _ip("ip", "link", "add", vh, "type", "veth", "peer", "name", vn)
    _ip("ip", "link", "set", vn, "netns", netns)
    _ip("ip", "addr", "add", f"{rec['host_addr']}/30", "dev", vh)
    _ip("ip", "link", "set", vh, "up")
    inside = ("ip", "netns", "exec", netns)
    _ip(*inside, "ip", "addr", "add", f"{rec['ns_addr']}/30", "dev", vn)
    _ip(*inside, "ip", "link", "set", vn, "up")
    _ip(*inside, "ip", "link", "set", "lo", "up")
    if bandwidth_kbit:
        # tbf shapes egress, so one qdisc per end = one per direction. Burst: 10 ms of data,
        # at least 64 KB so that a GSO segment of the veth fits.
        burst = max(64 * 1024, bandwidth_kbit * 1000 // 8 // 100)
        tbf = ("root", "tbf", "rate", f"{bandwidth_kbit}kbit", "burst", str(burst), "latency", "50ms")
        _ip("tc", "qdisc", "add", "dev", vh, *tbf)
        _ip(*inside, "tc", "qdisc", "add", "dev", vn, *tbf)


def _remove(rec: dict) -> list[str]:
    said = []
    # Deleting the namespace destroys its veth end, and with it the pair.
    if _ip("ip", "netns", "del", rec["netns"], check=False).returncode == 0:
        said.append(f"removed network namespace {rec['netns']}")
    if _veth_is_ours(rec) and _ip("ip", "link", "del", rec["veth_host"], check=False).returncode == 0:
        said.append(f"removed veth {rec['veth_host']}")
    return said


def _veth_is_ours(rec: dict) -> bool:
    """Whether the record's host end is still its own: not one whose peer sits in another namespace
    (the record's namespace was deleted by hand and its K given to another link)."""
    shown = _ip("ip", "-o", "link", "show", "dev", rec["veth_host"], check=False).stdout
    peer_netns = re.search(r"link-netns (\S+)", shown)
    return peer_netns is None or peer_netns.group(1) == rec["netns"]


def remove_netns_links(state_file: Path, only: str | None = None, owner: str | None = None) -> list[str]:
    """Delete recorded namespaces and veths: all, one namespace (only), or those a run made
    (owner). Stop the servers inside first."""
    said = []
    if not Path(state_file).exists():   # nothing recorded: no lock needed (nor reachable, when not root)
        return said
    with _locked(state_file) as box:
        keep = []
        for rec in box[0]:
            if (only and rec["netns"] != only) or (owner and rec.get("owner") != owner):
                keep.append(rec)
            else:
                said += _remove(rec)
        box[0] = keep
    return said


def netns_owners(state_file: Path) -> set[str]:
    """The runs that recorded namespaces (a record without an owner is no run's)."""
    if not Path(state_file).exists():
        return set()
    with _locked(state_file) as box:
        return {rec["owner"] for rec in box[0] if rec.get("owner")}
