"""Hosts over SSH (issue 47): `--host NAME=ssh://USER@ADDRESS[:PORT]` or `--host NAME=ALIAS`.

The system's OpenSSH client does everything (no protocol of ours): the user's ~/.ssh/config
(aliases, ProxyJump, their agent) applies, `--ssh-identity FILE` adds a key. Host keys are
checked (StrictHostKeyChecking=yes) against the user's known_hosts and the workspace's own
(<workspace>/known_hosts); an unknown key is refused unless `--accept-host-key NAME`, which
records it in the workspace's file only (accept-new: a changed key is still refused).

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

NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")
USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
ADDRESS = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\]")
ALIAS = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
CONNECT_TIMEOUT_S = 10
OPEN_TIMEOUT_S = 30
ALIVE_S, ALIVE_COUNT = 2, 3   # a host silent for about 8 s is lost (a busy sshd answers in well under 2 s)
WATCH_S = 0.5                 # how often `watched` looks at the masters
KNOWN_HOSTS = "known_hosts"
FORM = "NAME=ssh://USER@ADDRESS[:PORT] or NAME=ALIAS (of ~/.ssh/config)"


@dataclass(frozen=True)
class HostSpec:
    """One --host: a name for --place, and where ssh reaches it."""
    name: str
    destination: str     # what ssh is given: ssh://USER@ADDRESS:PORT, or an alias of ~/.ssh/config

    @property
    def shown(self) -> str:
        return self.destination


def parse_host(text: str) -> HostSpec:
    """NAME=ssh://USER@ADDRESS[:PORT] or NAME=ALIAS; a ValueError says what is wrong (never
    repeating a value that may hold a password)."""
    name, sep, where = text.partition("=")
    if not sep or not NAME.fullmatch(name):
        raise ValueError(f"give {FORM}; NAME: a lower-case letter, then up to 15 letters, digits or _")
    if "://" not in where:
        if not ALIAS.fullmatch(where):
            raise ValueError(f"{name}: neither ssh://USER@ADDRESS[:PORT] nor an alias of ~/.ssh/config (letters, "
                             f"digits, . _ -, not first); give {FORM}")
        return HostSpec(name, where)
    scheme, _, rest = where.partition("://")
    if scheme != "ssh":
        raise ValueError(f"{name}: the scheme is ssh://; give {FORM}")
    user, at, address = rest.rpartition("@")
    if not at or ":" in user:
        raise ValueError(f"{name}: give the login user (ssh://USER@ADDRESS[:PORT]); a password is never "
                         "part of it: use a key (--ssh-identity FILE, or your ssh-agent)")
    if not USER.fullmatch(user):
        raise ValueError(f"{name}: the user is letters, digits, _ . - (at most 32, not - first); give {FORM}")
    address, port = _address_port(name, address.rstrip("/"))
    return HostSpec(name, f"ssh://{user}@{address}:{port}")


def _address_port(name: str, text: str) -> tuple[str, int]:
    m = re.fullmatch(r"(\[[^\]]*\]|[^:\[\]]*)(?::([0-9]{1,5}))?", text)
    if not m or not ADDRESS.fullmatch(m.group(1)):
        raise ValueError(f"{name}: the address is a host name, an IPv4 address or [IPv6]; give {FORM}")
    port = int(m.group(2) or 22)
    if not 1 <= port <= 65535:
        raise ValueError(f"{name}: the port is 1 to 65535; give {FORM}")
    return m.group(1), port


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


@dataclass(frozen=True)
class SshSettings:
    """How every connection of a command is made: a key, and which hosts' unknown keys to accept."""
    workspace: Path
    identity: Path | None = None
    accept: frozenset[str] = frozenset()

    @classmethod
    def checked(cls, workspace: Path, identity: str | None, accept: Iterable[str],
                hosts: Mapping[str, HostSpec]) -> "SshSettings":
        unknown = sorted(set(accept) - set(hosts))
        if unknown:
            raise UserError(f"--accept-host-key: no --host is named {unknown[0]}; give the name of a --host")
        key = None
        if identity is not None:
            key = Path(identity).expanduser()
            if not key.is_file() or not os.access(key, os.R_OK):
                raise UserError(f"--ssh-identity: {identity} is not a readable file; give the private key file")
        return cls(Path(workspace), key, frozenset(accept))

    def options(self, name: str) -> list[str]:
        """ssh's options for host `name` (a new key accepted only for the hosts named to accept)."""
        ours = self.workspace / KNOWN_HOSTS
        opts = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                "-o", "StrictHostKeyChecking=" + ("accept-new" if name in self.accept else "yes"),
                # the first file is where accept-new writes: ours, never the user's
                "-o", f"UserKnownHostsFile={ours} ~/.ssh/known_hosts ~/.ssh/known_hosts2",
                "-o", "ControlPersist=no", "-o", f"ServerAliveInterval={ALIVE_S}",
                "-o", f"ServerAliveCountMax={ALIVE_COUNT}"]
        if self.identity is not None:
            opts += ["-i", str(self.identity), "-o", "IdentitiesOnly=yes"]
        return opts


@dataclass
class Connection:
    """One host's multiplexed SSH connection: open() starts the master, run() uses it, close() ends it."""
    spec: HostSpec
    settings: SshSettings
    control_dir: Path
    master: subprocess.Popen | None = None
    _log: Path | None = field(default=None, repr=False)

    @property
    def control_path(self) -> Path:
        return self.control_dir / self.spec.name

    def open(self) -> "Connection":
        if self.spec.name in self.settings.accept:
            self.settings.workspace.mkdir(parents=True, exist_ok=True)   # asked for: its known_hosts
        self._log = self.control_dir / f"{self.spec.name}.log"
        with open(self._log, "w") as log:
            self.master = subprocess.Popen(
                ["ssh", *self.settings.options(self.spec.name), "-M", "-N", "-S", str(self.control_path),
                 "--", self.spec.destination], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                # a Ctrl-C at the terminal is ours to handle (we close it); it dies with us when we are killed
                start_new_session=True, preexec_fn=die_with_parent(signal.SIGTERM))
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        while not self._check():
            if self.master.poll() is not None:
                raise UserError(refusal(self.spec, self._log.read_text(), self.settings))
            if time.monotonic() > deadline:
                self.close()
                raise UserError(f"--host {self.spec.name}: {self.spec.shown} gave no SSH session within "
                                f"{OPEN_TIMEOUT_S} s; check that the host is up and sshd answers there")
            time.sleep(0.05)
        return self

    def _check(self) -> bool:
        return self.control_path.exists() and self._control("check").returncode == 0

    def _control(self, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", "-S", str(self.control_path), "-O", command, "--", self.spec.destination],
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
        return subprocess.run(["ssh", *self.settings.options(self.spec.name), "-S", str(self.control_path),
                               "-o", "ControlMaster=no", "--", self.spec.destination, "sh -s"],
                              input=script, capture_output=True, text=True, timeout=timeout)

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
            proc = subprocess.Popen(["ssh", *self.settings.options(self.spec.name), "-S", str(self.control_path),
                                     "-o", "ControlMaster=no", "--", self.spec.destination, command],
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


def refusal(spec: HostSpec, stderr: str, settings: SshSettings) -> str:
    """ssh's failure to log in, as one line naming the option and the fix."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("@")]
    last = lines[-1] if lines else "ssh exited"
    opt = f"--host {spec.name}"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr or "Offending" in stderr:
        return (f"{opt}: the host key of {spec.shown} differs from the one known_hosts holds; if the host was "
                f"reinstalled, remove its old line (ssh-keygen -R) and check the new key's fingerprint")
    if "Host key verification failed" in stderr or "host key is known" in stderr:
        return (f"{opt}: the host key of {spec.shown} is not in known_hosts; check its fingerprint (ssh-keyscan "
                f"on a trusted path) and pass --accept-host-key {spec.name} to record it in "
                f"{settings.workspace / KNOWN_HOSTS}")
    if "Permission denied" in stderr or "Too many authentication failures" in stderr:
        return (f"{opt}: {spec.shown} refused the login ({last}); give the key with --ssh-identity FILE or load it "
                "into your ssh-agent, and make sure its public half is in the user's authorized_keys there")
    if "UNPROTECTED PRIVATE KEY FILE" in stderr or "Load key" in stderr:
        return f"--ssh-identity: ssh cannot use the key ({last}); chmod 600 it, or give another key file"
    if re.search(r"Could not resolve|Connection refused|timed out|No route|unreachable|Connection closed", stderr):
        return f"{opt}: cannot reach {spec.shown} ({last}); check the address and port, and that sshd runs there"
    return f"{opt}: ssh to {spec.shown} failed ({last}); 'ssh {shlex.quote(spec.destination)}' shows more"
