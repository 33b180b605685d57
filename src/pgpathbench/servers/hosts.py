"""Hosts over SSH (issue 47): `--host NAME=ssh://[USER@]ADDRESS[:PORT]` or `--host NAME=ALIAS`.

The system's OpenSSH client does everything (no protocol of ours): the user's ssh config (aliases,
HostName, User, Port, IdentityFile, ProxyJump; `--ssh-config FILE`, else OpenSSH's default
~/.ssh/config and /etc/ssh/ssh_config) and their agent apply, `--ssh-identity FILE` adds a key.
Our own options reach every ssh as the first lines of a config file generated per connection
(`-F`), which then includes the user's: ssh keeps the first value it reads of each option, and a
ProxyJump's ssh is started with that `-F` and none of the command line's `-o` (OpenSSH 9.2), so
the jump hosts get our options too. Host keys, the jump hosts' included, are checked
(StrictHostKeyChecking=yes) against the user's known_hosts and the workspace's own
(<workspace>/known_hosts); an unknown key is refused unless `--accept-host-key NAME`, which records
the unknown keys met on the way to NAME (its own, its jump hosts') in the workspace's file only
(accept-new: a changed key is still refused).

One multiplexed connection per host (ControlMaster, ControlPersist off): a master `ssh -M -N` we
keep as a child and close at the end; every command goes over it. The master gets SIGTERM when we
die however we die (PR_SET_PDEATHSIG, procs.die_with_parent): a killed process's connection ends
with it, as its other children do. The master asks sshd every ALIVE_S seconds whether it is there
(ServerAliveInterval) and ends after ALIVE_COUNT unanswered asks: a network lost to a host shows
as its master's end within about ALIVE_S * (ALIVE_COUNT + 1) s, which `watched` turns into a call
while a measurement runs; a command over an ended master fails at once, as ssh's own failure (255),
rather than opening a connection of its own. Its control socket lies in a scratch directory of this process
(scratch.py: named after our pid, and short, since a socket's path has at most 108 bytes), which
`clean` sweeps when the process is gone. Scripts go to the host on ssh's stdin, so that nothing
we send (a password later) is on a command line, here or there.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator, Mapping, Sequence

from .. import scratch
from ..errors import UserError
from ..procs import die_with_parent
from .ssh_route import Route, resolve

NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")
USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
ADDRESS = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\]")
ALIAS = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
CONNECT_TIMEOUT_S = 10
OPEN_TIMEOUT_S = 30
ALIVE_S, ALIVE_COUNT = 2, 3   # a host silent for about 8 s is lost (a busy sshd answers in well under 2 s)
WATCH_S = 0.5                 # how often `watched` looks at the masters
KNOWN_HOSTS = "known_hosts"
FORM = "NAME=ssh://[USER@]ADDRESS[:PORT] or NAME=ALIAS (of your ssh config)"


@dataclass(frozen=True)
class HostSpec:
    """One --host: a name for --place, and where ssh reaches it."""
    name: str
    destination: str     # what ssh is given: ssh://[USER@]ADDRESS[:PORT], or an alias of the ssh config

    @property
    def shown(self) -> str:
        return self.destination


def parse_host(text: str) -> HostSpec:
    """NAME=ssh://[USER@]ADDRESS[:PORT] or NAME=ALIAS; a ValueError says what is wrong (never
    repeating a value that may hold a password). What is not given (the user, the port) is the ssh
    config's, as for ssh itself."""
    name, sep, where = text.partition("=")
    if not sep or not NAME.fullmatch(name):
        raise ValueError(f"give {FORM}; NAME: a lower-case letter, then up to 15 letters, digits or _")
    if "://" not in where:
        if not ALIAS.fullmatch(where):
            raise ValueError(f"{name}: neither ssh://[USER@]ADDRESS[:PORT] nor an alias of your ssh config "
                             f"(letters, digits, . _ -, not first); give {FORM}")
        return HostSpec(name, where)
    scheme, _, rest = where.partition("://")
    if scheme != "ssh":
        raise ValueError(f"{name}: the scheme is ssh://; give {FORM}")
    user, at, address = rest.rpartition("@")
    if ":" in user:
        raise ValueError(f"{name}: give the login user alone (ssh://USER@ADDRESS[:PORT]); a password is never "
                         "part of it: use a key (--ssh-identity FILE, or your ssh-agent)")
    if at and not USER.fullmatch(user):
        raise ValueError(f"{name}: the user is letters, digits, _ . - (at most 32, not - first); give {FORM}")
    address, port = _address_port(name, address.rstrip("/"))
    return HostSpec(name, f"ssh://{user}{at}{address}{port}")


def _address_port(name: str, text: str) -> tuple[str, str]:
    """(ADDRESS, ':PORT' or '' when none is given: then the ssh config's Port, or 22)."""
    m = re.fullmatch(r"(\[[^\]]*\]|[^:\[\]]*)(?::([0-9]{1,5}))?", text)
    if not m or not ADDRESS.fullmatch(m.group(1)):
        raise ValueError(f"{name}: the address is a host name, an IPv4 address or [IPv6]; give {FORM}")
    if m.group(2) is not None and not 1 <= int(m.group(2)) <= 65535:
        raise ValueError(f"{name}: the port is 1 to 65535; give {FORM}")
    return m.group(1), f":{int(m.group(2))}" if m.group(2) else ""


def parse_hosts(values: Sequence[str] | None) -> dict[str, HostSpec]:
    hosts: dict[str, HostSpec] = {}
    for value in values or ():
        try:
            spec = parse_host(value)
        except ValueError as e:
            raise UserError(f"--host: {e}") from None
        if spec.name in hosts:
            raise UserError(f"--host: {spec.name} is named twice; give each host once, under a name of its own")
        hosts[spec.name] = spec
    return hosts


def readable_file(option: str, given: str, what: str) -> Path:
    """An option's file, absolute (kept with a run for --resume); one line when it cannot be read."""
    path = Path(given).expanduser()
    if not path.is_file() or not os.access(path, os.R_OK):
        raise UserError(f"{option}: {given} is not a readable file; give {what}")
    if '"' in str(path) or not str(path).isprintable():
        raise UserError(f"{option}: {given}: a path with a double quote or a control character cannot go into an "
                        f"ssh config; give {what} under another path")
    return path.absolute()


@dataclass(frozen=True)
class SshSettings:
    """How every connection of a command is made: a key, the user's ssh config, and which hosts'
    unknown keys to accept."""
    workspace: Path
    identity: Path | None = None
    accept: frozenset[str] = frozenset()
    config: Path | None = None     # --ssh-config; None: OpenSSH's default files

    @classmethod
    def checked(cls, workspace: Path, identity: str | None, accept: Iterable[str],
                hosts: Mapping[str, HostSpec], config: str | None = None) -> "SshSettings":
        unknown = sorted(set(accept) - set(hosts))
        if unknown:
            raise UserError(f"--accept-host-key: no --host is named {unknown[0]}; give the name of a --host")
        if '"' in str(workspace):   # its known_hosts goes into an ssh config
            raise UserError(f"--workspace: {workspace}: a workspace with hosts cannot have a double quote in its "
                            "path; give another --workspace")
        key = None if identity is None else readable_file("--ssh-identity", identity, "the private key file")
        conf = None if config is None else readable_file("--ssh-config", config, "an ssh_config(5) file")
        return cls(Path(workspace), key, frozenset(accept), conf)

    def ssh_config(self, name: str) -> str:
        """The config every ssh of host `name` reads (-F), its jump hosts' too: our options first (ssh
        keeps the first value of each), then the user's. A new key is accepted only for the hosts
        named to accept, and the first known_hosts file is where accept-new writes: ours, never the
        user's."""
        ours = str(self.workspace / KNOWN_HOSTS).replace("%", "%%")
        lines = ["BatchMode yes", f"ConnectTimeout {CONNECT_TIMEOUT_S}",
                 "StrictHostKeyChecking " + ("accept-new" if name in self.accept else "yes"),
                 f'UserKnownHostsFile "{ours}" ~/.ssh/known_hosts ~/.ssh/known_hosts2',
                 # no master of the user's (ours are given by -M/-S on the command line), none left behind
                 "ControlMaster no", "ControlPath none", "ControlPersist no", f"ServerAliveInterval {ALIVE_S}",
                 f"ServerAliveCountMax {ALIVE_COUNT}"]
        if self.identity is not None:
            lines += [f'IdentityFile "{str(self.identity).replace("%", "%%")}"', "IdentitiesOnly yes"]
        users = [f'"{self.config}"'] if self.config else ["~/.ssh/config", "/etc/ssh/ssh_config"]
        return "\n".join([*lines, *(f"Include {u}" for u in users), ""])


@dataclass
class Connection:
    """One host's multiplexed SSH connection: open() starts the master, run() uses it, close() ends it."""
    spec: HostSpec
    settings: SshSettings
    control_dir: Path
    master: subprocess.Popen | None = None
    route: Route | None = None         # where the ssh config sends it (ssh -G), once opened
    prefix: str = ""                   # shell run before each script and command (a run's marker)
    _log: Path | None = field(default=None, repr=False)

    @property
    def control_path(self) -> Path:
        return self.control_dir / self.spec.name

    @property
    def config_path(self) -> Path:
        return self.control_dir / f"{self.spec.name}.ssh_config"

    def _ssh(self, *args: str) -> list[str]:
        """An ssh command line of this host: its generated config, then args."""
        return ["ssh", "-F", str(self.config_path), *args]

    def open(self) -> "Connection":
        self.config_path.write_text(self.settings.ssh_config(self.spec.name))
        option = "--ssh-config" if self.settings.config else f"--host {self.spec.name}"
        self.route = resolve(self.config_path, self.spec.destination, option)
        if self.spec.name in self.settings.accept:
            self.settings.workspace.mkdir(parents=True, exist_ok=True)   # asked for: its known_hosts
        self._log = self.control_dir / f"{self.spec.name}.log"
        with open(self._log, "w") as log:
            self.master = subprocess.Popen(
                self._ssh("-M", "-N", "-S", str(self.control_path), "--", self.spec.destination),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                # a Ctrl-C at the terminal is ours to handle (we close it); it dies with us when we are killed
                start_new_session=True, preexec_fn=die_with_parent(signal.SIGTERM))
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        while not self._check():
            if self.master.poll() is not None:
                raise UserError(refusal(self.spec, self._log.read_text(), self.settings, self.route))
            if time.monotonic() > deadline:
                self.close()
                raise UserError(f"--host {self.spec.name}: {self.spec.shown} gave no SSH session within "
                                f"{OPEN_TIMEOUT_S} s; check that the host is up and sshd answers there")
            time.sleep(0.05)
        return self

    def _check(self) -> bool:
        return self.control_path.exists() and self._control("check").returncode == 0

    def _control(self, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(self._ssh("-S", str(self.control_path), "-O", command, "--", self.spec.destination),
                              capture_output=True, text=True, timeout=30)

    @property
    def lost(self) -> bool:
        """Whether the master has ended (sshd unanswered ALIVE_COUNT times, or the host closed it)."""
        return self.master is not None and self.master.poll() is not None

    def _ended(self, args: list[str]) -> subprocess.CompletedProcess:
        said = [line.strip() for line in self._log.read_text(errors="replace").splitlines() if line.strip()]
        why = said[-1] if said else f"exit {self.master.returncode}"
        return subprocess.CompletedProcess(args, 255, "", f"the SSH connection ended ({why})")

    def run(self, script: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A POSIX sh script on the host, given on ssh's stdin: nothing of it on a command line
        there or here."""
        if self.lost:
            return self._ended(["sh", "-s"])
        return subprocess.run(self._ssh("-S", str(self.control_path), "--", self.spec.destination, "sh -s"),
                              input=self.prefix + script, capture_output=True, text=True, timeout=timeout)

    def send(self, command: str, data: bytes, timeout: float = 600) -> subprocess.CompletedProcess:
        """A command (paths only: it is on the host's command line) reading `data` on its stdin: how a
        file goes there over the open connection (a tar stream: the bundle of remote.py)."""
        return self.stream(command, lambda stdin: stdin.write(data), timeout)

    def stream(self, command: str, write: Callable[[IO[bytes]], object], timeout: float = 600
               ) -> subprocess.CompletedProcess:
        """send() of data too large to hold: `write` writes it to the command's stdin as it goes (its
        output kept in files meanwhile, so that neither side waits on a full pipe)."""
        if self.lost:
            return self._ended([command])
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(self._ssh("-S", str(self.control_path), "--", self.spec.destination,
                                              self.prefix + command),
                                    stdin=subprocess.PIPE, stdout=out, stderr=err)
            try:
                with proc.stdin:
                    write(proc.stdin)
            except BrokenPipeError:   # the command ended early: its exit and stderr say why
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(proc.args, proc.returncode, out.read().decode(errors="replace"),
                                               err.read().decode(errors="replace"))

    def output(self, script: str, what: str) -> str:
        """run(script)'s stdout; a failure names the host and what was asked."""
        res = self.run(script)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
            raise UserError(f"--host {self.spec.name}: {what} failed there: {last}")
        return res.stdout

    def close(self) -> None:
        if self.master is None:
            return
        if self.master.poll() is None:
            self._control("exit")
            try:
                self.master.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.master.kill()
                self.master.wait()
        self.master = None


class Hosts:
    """Every --host's connection for one command, opened in order and closed together."""

    def __init__(self, specs: Mapping[str, HostSpec], settings: SshSettings):
        self.specs, self.settings = dict(specs), settings
        self.connections: dict[str, Connection] = {}
        self.control_dir: Path | None = None

    def __enter__(self) -> "Hosts":
        if not self.specs:
            return self
        if shutil.which("ssh") is None:
            raise UserError("--host: hosts are reached with OpenSSH's client, and ssh is not on PATH; install it "
                            "(apt-get install openssh-client)")
        self.control_dir = scratch.make_dir("ssh", scratch.tmpfs_or_tmp())
        try:
            for name, spec in self.specs.items():
                self.connections[name] = Connection(spec, self.settings, self.control_dir).open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getitem__(self, name: str) -> Connection:
        return self.connections[name]

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.connections = {}
        if self.control_dir is not None:
            for entry in self.control_dir.iterdir():
                entry.unlink(missing_ok=True)
            self.control_dir.rmdir()
            self.control_dir = None


@contextlib.contextmanager
def watched(connections: Iterable[Connection], on_lost: Callable[[Connection], None]) -> Iterator[None]:
    """While the block runs, on_lost(connection) is called (from a thread) once for each connection
    whose master ends: a host lost, its link down or its sshd gone."""
    pending, stop = [c for c in connections if c.master is not None], threading.Event()
    if not pending:   # no host: no thread
        yield
        return

    def look() -> None:
        while pending and not stop.wait(WATCH_S):
            for connection in [c for c in pending if c.lost]:
                pending.remove(connection)
                on_lost(connection)

    thread = threading.Thread(target=look, name="hosts-watched", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def refusal(spec: HostSpec, stderr: str, settings: SshSettings, route: Route | None = None) -> str:
    """ssh's failure to log in, as one line naming the option and the fix."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("@")]
    last = lines[-1] if lines else "ssh exited"
    opt = f"--host {spec.name}"
    keyed = _keyed_host(stderr, spec, route)
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or "Offending" in stderr:
        return (f"{opt}: the host key of {keyed} differs from the one known_hosts holds; if the host was "
                f"reinstalled, remove its old line (ssh-keygen -R) and check the new key's fingerprint")
    if "Host key verification failed" in stderr or "host key is known" in stderr:
        return (f"{opt}: the host key of {keyed} is not in known_hosts; check its fingerprint (ssh-keyscan "
                f"on a trusted path) and pass --accept-host-key {spec.name} to record the keys met on the way to "
                f"{spec.name} in {settings.workspace / KNOWN_HOSTS}")
    if "Permission denied" in stderr or "Too many authentication failures" in stderr:
        denied = next((line for line in lines if "Permission denied" in line), last)
        return (f"{opt}: {spec.shown} refused the login ({denied}); give the key with --ssh-identity FILE or load it "
                "into your ssh-agent, and make sure its public half is in the user's authorized_keys there")
    if "UNPROTECTED PRIVATE KEY FILE" in stderr or "Load key" in stderr:
        return f"--ssh-identity: ssh cannot use the key ({last}); chmod 600 it, or give another key file"
    if re.search(r"Could not resolve|Connection refused|timed out|No route|unreachable|Connection closed", stderr):
        return f"{opt}: cannot reach {spec.shown} ({last}); check the address and port, and that sshd runs there"
    return f"{opt}: ssh to {spec.shown} failed ({last}); 'ssh {shlex.quote(spec.destination)}' shows more"


def _keyed_host(stderr: str, spec: HostSpec, route: Route | None) -> str:
    """The host whose key ssh names in its refusal: the --host's own, or a jump host's on the way."""
    m = re.search(r"(?:host key is known for|Host key for) (\S+) (?:and|has changed)", stderr)
    if not m or route is None or route.via is None:
        return spec.shown
    named = m.group(1)   # ADDRESS, or [ADDRESS]:PORT
    address = named[1:].partition("]")[0] if named.startswith("[") else named
    return spec.shown if address == route.hostname else f"{named}, a jump host on the way to {spec.shown},"
