"""Test hosts for issue 47: each a namespace of tests/user_lan.py's LAN running its own sshd.

    with SshHosts(tmp_path, ("a",)) as hosts:
        h = hosts["a"]; h.url("root"), h.url(), h.identity, h.known_hosts_line, h.hostname ...

A host is a network namespace on the bridged LAN (user_lan.Lan) whose sshd (Debian's
openssh-server, `sshd -D`) runs in mount and UTS namespaces of its own: its hostname, and
per-host directories bound over /etc/ssh (its config, its own host key, authorized keys, its
log), /home, /var/lib and /etc/machine-id, an overlay on /etc whose own /etc/passwd, /etc/group,
/etc/shadow are the machine's with one more account, LOGIN, whose home is /home/LOGIN (and take
a useradd; its login.defs gives the host's system accounts ids no other live host uses), and a
tmpfs on /tmp. Every session sees
that view only, so whatever the tool puts on a host went through SSH, and a fact read here instead
of there shows. The mounts live as long as the namespace's processes: ending them (stop() kills
every pid of the network namespace) unmounts everything; then the LAN goes.

Logins are by a key the suite generates (ed25519, in the suite's tmp): as LOGIN, or as root.

    SshHosts(tmp_path, ("a", "b"), jumps={"b": "a"})

makes b reachable over SSH only through a (a ProxyJump): b's sshd lets in logins from a's address
only (AllowUsers USER@ADDRESS: a direct login from here is refused as "Permission denied"), and
a's sshd forwards TCP to b's sshd and nowhere else (PermitOpen); a's sshd listens on JUMP_PORT
too. There is no iptables or nft on this machine, so b's other ports (its PostgreSQL's) stay
reachable from here. b also has a hidden address (on its loopback, its LAN end answering ARP for
its own address only: arp_ignore=1 in b's namespace) that a routes to through b and this machine
cannot reach at all ("No route to host"): a host whose sshd and ports only its jump host reaches.
(This machine's default route leads to something that accepts any TCP connection: an address
off the LAN would look reachable.)
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pgpathbench.servers.netns import _ip
from user_lan import Lan, LanHost

LOGIN = "pgpbhost"
LOGIN_UID = 61047          # only in the hosts' own /etc/passwd
# Each host's system accounts (the tool's `pgpathbench`, made with a root login) get ids of their
# own: hosts share this machine's pid namespace, and userdel refuses while any process of the uid
# lives, so a postmaster of another host's account (another suite's) with the same uid kept ours.
_HOSTS_MADE = itertools.count()
SSHD = "/usr/sbin/sshd"
PORT = 22
JUMP_PORT = 2222           # a jump host's sshd listens here too (an ssh_config Port)
START_S = 10.0


@dataclass(frozen=True)
class SshHost:
    lan: LanHost
    dir: Path               # its directories, here (bound into its mount namespace)
    hostname: str
    machine_id: str
    identity: Path          # the private key that logs in as LOGIN and as root
    known_hosts_line: str   # "ADDRESS ssh-ed25519 KEY": its host key as known_hosts wants it

    @property
    def address(self) -> str:
        return self.lan.address

    @property
    def hidden_address(self) -> str:
        """Its address that only its jump host reaches (a host made with jumps only)."""
        return _hidden(self.lan)

    def url(self, user: str = LOGIN) -> str:
        return f"ssh://{user}@{self.address}:{PORT}"

    def pids(self) -> list[int]:
        """Every process of its network namespace (sshd, sessions, servers started there)."""
        out = _ip("ip", "netns", "pids", self.lan.netns, check=False).stdout
        return [int(p) for p in out.split()]

    def files(self, inside: str) -> list[Path]:
        """What lies under a directory bound into the host (/home, /var/lib), seen from here; a
        directory a live run removes meanwhile is skipped (os.walk ignores it, rglob would raise)."""
        sub = {"/home": "home", "/var/lib": "varlib"}[inside]
        return sorted(Path(top) / name for top, dirs, names in os.walk(self.dir / sub) for name in dirs + names)

    def system_uids(self) -> range:
        """The ids its system accounts get (its login.defs): the tool's account of a root login."""
        defs = (self.dir / "etc" / "login.defs").read_text()
        low, high = (int(re.search(rf"^SYS_UID_{k} (\d+)$", defs, re.M).group(1)) for k in ("MIN", "MAX"))
        return range(low, high + 1)

    def shared_memory(self) -> list[str]:
        """System V segments and /dev/shm files its system accounts own: a PostgreSQL of theirs
        killed there leaves them, in this machine's IPC (the hosts share it)."""
        uids = self.system_uids()
        rows = (line.split() for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:])
        left = [f"System V segment {row[1]}" for row in rows if int(row[7]) in uids]
        for path in Path("/dev/shm").iterdir():
            with contextlib.suppress(FileNotFoundError):   # another suite's, removed meanwhile
                if path.stat().st_uid in uids:
                    left.append(str(path))
        return left

    def ours(self) -> list[Path]:
        """What of pgpathbench lies on the host: its workspaces (a login's and root's). The host's
        own path is read, not ours to it (the suite's folder is named pgpathbench-tests-...)."""
        return [p for p in self.files("/home") + self.files("/var/lib") if "pgpathbench" in str(p.relative_to(self.dir))]


class SshHosts:
    """A LAN of hosts, each running its own sshd; a context manager that leaves nothing behind."""

    def __init__(self, root: Path, names: tuple[str, ...] = ("a",), jumps: dict[str, str] | None = None):
        self.root = Path(root)
        self.lan = Lan(self.root / "lan", names)
        self.jumps = dict(jumps or {})    # host -> the host its logins must come through
        self.hosts: dict[str, SshHost] = {}
        self.daemons: list[subprocess.Popen] = []

    def __getitem__(self, name: str) -> SshHost:
        return self.hosts[name]

    def __enter__(self) -> "SshHosts":
        try:
            self.lan.start()
            for host, jump in self.jumps.items():
                self._hide(self.lan.hosts[host], self.lan.hosts[jump])
            identity = _keygen(self.root / "client_key", "pgpb test client")
            for name, lan_host in self.lan.hosts.items():
                self.hosts[name] = self._start(lan_host, identity)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _start(self, lan_host: LanHost, identity: Path) -> SshHost:
        hostname = f"pgpbhost-{lan_host.name}-{secrets.token_hex(3)}"
        d = self.root / lan_host.name
        host_key = _layout(d, identity, hostname, lan_host.address, self._sshd_rules(lan_host.name))
        host = SshHost(lan_host, d, hostname, (d / "machine-id").read_text().strip(), identity,
                       f"{lan_host.address} {host_key}")
        script = _namespace_script(d, hostname)
        daemon = subprocess.Popen(["ip", "netns", "exec", lan_host.netns, "unshare", "--mount", "--uts",
                                   "--propagation", "private", "sh", "-ec", script],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=open(d / "namespace.log", "w"))
        self.daemons.append(daemon)
        _wait_listening(lan_host.address, daemon, d)
        return host

    def _hide(self, host: LanHost, jump: LanHost) -> None:
        """host's hidden address: on its loopback, routed to by its jump host only."""
        _ip("ip", "-n", host.netns, "addr", "add", f"{_hidden(host)}/32", "dev", "lo")
        _ip("ip", "netns", "exec", host.netns, "sysctl", "-q", "-w", f"net.ipv4.conf.{host.interface}.arp_ignore=1")
        _ip("ip", "-n", jump.netns, "route", "add", f"{_hidden(host)}/32", "via", host.address)

    def _sshd_rules(self, name: str) -> list[str]:
        """sshd_config lines that make this host a jump host, or reachable only through one."""
        hosts = self.lan.hosts
        behind = [hosts[t] for t, jump in self.jumps.items() if jump == name]
        if behind:
            rules = [f"ListenAddress {hosts[name].address}:{JUMP_PORT}", "AllowTcpForwarding local",
                     "PermitOpen " + " ".join(f"{a}:{PORT}" for h in behind for a in (h.address, _hidden(h)))]
        else:
            rules = ["AllowTcpForwarding no"]
        if name in self.jumps:
            rules.append(f"ListenAddress {_hidden(hosts[name])}:{PORT}")
            rules.append("AllowUsers " + " ".join(f"{u}@{hosts[self.jumps[name]].address}" for u in (LOGIN, "root")))
        return rules

    def stop(self) -> None:
        """Every process of every host's namespace ended (its mounts go with them), then the LAN
        (Lan.stop); our daemons, killed with them, reaped."""
        self.lan.stop()
        for daemon in self.daemons:
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.wait(timeout=10)
        self.daemons = []


def _hidden(host: LanHost) -> str:
    net, last = host.address.rsplit(".", 1)
    return f"{net}.{int(last) + 100}"


def _keygen(path: Path, comment: str) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)
    return path


def _layout(d: Path, identity: Path, hostname: str, address: str, rules: list[str]) -> str:
    """The host's directories and files; its host key's public half."""
    for sub in ("ssh", "ssh/authorized_keys", "home", f"home/{LOGIN}", "varlib", "etc", "etcwork"):
        (d / sub).mkdir(parents=True, exist_ok=True)
        (d / sub).chmod(0o755)
    os.chown(d / "home" / LOGIN, LOGIN_UID, LOGIN_UID)
    _keygen(d / "ssh" / "ssh_host_ed25519_key", hostname)
    for user in ("root", LOGIN):
        shutil.copy(identity.with_suffix(".pub"), d / "ssh" / "authorized_keys" / user)
        (d / "ssh" / "authorized_keys" / user).chmod(0o644)
    (d / "ssh" / "sshd_config").write_text("\n".join([
        f"ListenAddress {address}:{PORT}", "HostKey /etc/ssh/ssh_host_ed25519_key",
        "AuthorizedKeysFile /etc/ssh/authorized_keys/%u", "PermitRootLogin prohibit-password",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        "X11Forwarding no", "PrintMotd no", "LogLevel VERBOSE",
        "Subsystem sftp internal-sftp", "PidFile none", *rules, ""]))
    (d / "machine-id").write_text(secrets.token_hex(16) + "\n")
    (d / "hostname").write_text(hostname + "\n")
    etc = d / "etc"
    (etc / "passwd").write_text(Path("/etc/passwd").read_text()
                                + f"{LOGIN}:x:{LOGIN_UID}:{LOGIN_UID}:pgpb test host:/home/{LOGIN}:/bin/sh\n")
    (etc / "group").write_text(Path("/etc/group").read_text() + f"{LOGIN}:x:{LOGIN_UID}:\n")
    (etc / "shadow").write_text(Path("/etc/shadow").read_text() + f"{LOGIN}:*:19000:0:99999:7:::\n")
    (etc / "shadow").chmod(0o640)
    (etc / "login.defs").write_text(_system_ids(Path("/etc/login.defs").read_text()))
    return " ".join((d / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()[:2])


def _system_ids(defs: str) -> str:
    """login.defs with a system uid and gid range no other live host has: from this process's pid
    (unique among live processes) and a count of the hosts it made."""
    low = 1_000_000 + (os.getpid() * 16 + next(_HOSTS_MADE) % 16) * 4
    for key in ("SYS_UID", "SYS_GID"):
        defs = re.sub(rf"^#?\s*{key}_MIN\b.*$", f"{key}_MIN {low}", defs, flags=re.M)
        defs = re.sub(rf"^#?\s*{key}_MAX\b.*$", f"{key}_MAX {low + 3}", defs, flags=re.M)
    return defs


def _namespace_script(d: Path, hostname: str) -> str:
    """Inside the host's new mount and UTS namespaces: its names and directories, then sshd."""
    binds = [(d / "ssh", "/etc/ssh"), (d / "home", "/home"), (d / "varlib", "/var/lib"),
             (d / "machine-id", "/etc/machine-id"), (d / "hostname", "/etc/hostname")]
    # /etc an overlay whose upper layer (d/etc) holds its passwd, group and shadow: useradd and
    # userdel there rename files in /etc, which a file bound over /etc/passwd would refuse.
    lines = [f"hostname {hostname}", "mkdir -p /run/sshd",
             f"mount -t overlay overlay -o lowerdir=/etc,upperdir='{d / 'etc'}',workdir='{d / 'etcwork'}' /etc"]
    lines += [f"mount --bind '{src}' '{dst}'" for src, dst in binds]
    lines += ["mount -t tmpfs -o mode=1777 tmpfs /tmp",   # last: the binds' sources are under the suite's /tmp
              f"exec {SSHD} -D -f /etc/ssh/sshd_config -E /etc/ssh/sshd.log"]
    return "\n".join(lines)


def _wait_listening(address: str, daemon: subprocess.Popen, d: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"sshd of {d.name} exited {daemon.returncode}: "
                               f"{(d / 'namespace.log').read_text()}{_log(d)}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((address, PORT)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"sshd of {d.name} not listening on {address}:{PORT} after {START_S} s{_log(d)}")


def _log(d: Path) -> str:
    log = d / "ssh" / "sshd.log"
    return f"; sshd.log: {log.read_text()[-500:]}" if log.exists() else ""

