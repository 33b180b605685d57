"""Child processes that never outlive the tool.

Every process the tool starts (servers, pgbench, clients) gets PR_SET_PDEATHSIG, so that even a
SIGKILL of the tool ends them, and its own session, so that a terminal's Ctrl-C reaches only
the tool, which then stops them in order. When the tool runs as root, servers are started as an
unprivileged user (PostgreSQL refuses root anyway).
"""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .clientenv import child_env
from .errors import UserError
from .files import write_atomically
from .stop_signals import held

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent(sig: int, netns: str | None = None, uid: int | None = None, gid: int | None = None):
    """The child's set-up between fork and exec: network namespace, identity, death signal.

    In this order because entering a namespace needs root, and a change of identity clears
    the parent-death signal.
    """
    def preexec() -> None:
        if netns is not None:
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            if _libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {netns}")
            os.close(fd)
        if uid is not None:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        _libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        # The parent may have died between fork and prctl.
        if os.getppid() == 1:
            os.kill(os.getpid(), sig)

    return preexec


@dataclass(frozen=True)
class OsUser:
    """Who runs managed servers: the invoking user, or an unprivileged one when we are root."""

    name: str
    uid: int
    gid: int

    @property
    def is_me(self) -> bool:
        return self.uid == os.geteuid()

    @classmethod
    def for_servers(cls, requested: str | None = None) -> "OsUser":
        if os.geteuid() != 0:
            me = pwd.getpwuid(os.geteuid())
            return cls(me.pw_name, me.pw_uid, me.pw_gid)
        name = requested or "postgres"
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise UserError(
                f"--server-user: no OS user '{name}' to run servers as (PostgreSQL refuses root); "
                "create it (adduser --system postgres) or name another unprivileged user"
            ) from None
        if entry.pw_uid == 0:
            raise UserError("--server-user: must be an unprivileged user, not root")
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid)

    @classmethod
    def owner_of(cls, path: Path) -> "OsUser":
        """The user a file belongs to (a server's data directory: the user that ran it)."""
        entry = pwd.getpwuid(path.stat().st_uid)
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid)

    def chown(self, path: Path) -> None:
        if not self.is_me:
            os.chown(path, self.uid, self.gid)

    def _preexec(self, sig: int, netns: str | None = None):
        if self.is_me:
            return die_with_parent(sig, netns)
        return die_with_parent(sig, netns, self.uid, self.gid)

    def env(self) -> dict:
        """The environment of a program run as this user (a server reads PGPORT, PGDATESTYLE... too)."""
        env = child_env()
        if not self.is_me:
            env.update(HOME=pwd.getpwuid(self.uid).pw_dir, USER=self.name, LOGNAME=self.name)
        return env

    def run(self, args: Sequence[str], **kw) -> subprocess.CompletedProcess:
        """Run a short command as this user and wait for it (initdb, ...)."""
        return subprocess.run(
            list(args), env=kw.pop("env", self.env()), cwd=kw.pop("cwd", "/"),
            preexec_fn=self._preexec(signal.SIGKILL), start_new_session=True, **kw,
        )

    def spawn(self, args: Sequence[str], stop_signal: int = signal.SIGINT, netns: str | None = None,
              **kw) -> subprocess.Popen:
        """Start a long-lived child as this user (in a network namespace if given); it gets
        stop_signal if the tool dies."""
        return subprocess.Popen(
            list(args), env=kw.pop("env", self.env()), cwd=kw.pop("cwd", "/"),
            preexec_fn=self._preexec(stop_signal, netns), start_new_session=True, **kw,
        )


def write_passfile(path: Path, password: str, user: str = "*") -> None:
    """libpq's password file (`*:*:*:USER:PASSWORD`, any host, port and database: a link reaches a
    server at another address), 0600 and written whole (files.write_atomically)."""
    escaped = [v.replace("\\", "\\\\").replace(":", "\\:") for v in (user, password)]
    write_atomically(path, "*:*:*:{}:{}\n".format(*escaped), private=True)


def password_env(passfile: str | Path | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment (base: child_env()) of a program that reads its password from `passfile` (libpq's
    PGPASSFILE: never a command line); PGPASSWORD dropped then, since libpq would prefer it."""
    env = dict(child_env() if base is None else base)
    if passfile is None:
        return env
    env.pop("PGPASSWORD", None)
    return {**env, "PGPASSFILE": str(passfile)}


def run_client(args: Sequence[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a client (pgbench, a native client) as ourselves (env: child_env()); kill it if we are interrupted."""
    with held() as release:   # the run's stop signal put off until the client is ours to kill
        proc = subprocess.Popen(
            list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=child_env() if env is None else env, preexec_fn=die_with_parent(signal.SIGKILL),
            start_new_session=True,
        )
        try:
            release()   # a stop signal put off since the fork is raised here
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def pid_exists(pid: int) -> bool:
    """Whether a process is there at all, a zombie (dead, not yet reaped) included."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def pid_alive(pid: int) -> bool:
    """Whether a process runs (a zombie, dead but not yet reaped by its parent, does not)."""
    if not pid_exists(pid):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True   # no /proc: trust the signal
    return stat[stat.rindex(")") + 2:][:1] not in ("Z", "X")


def processes_in(directory: Path) -> list[int]:
    """The processes whose working directory is `directory` (a server's: all of its processes)."""
    target, found = str(directory.resolve()), []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd") == target:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def cmdline(pid: int) -> str:
    """A process's command line ('' when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def end_process(pid: int, steps: Sequence[tuple[int, float]], poll_s: float = 0.05) -> None:
    """Send each (signal, seconds to wait) in turn until the process is gone; our own child is
    reaped on the way (else it would stay a zombie and look alive)."""
    for sig, wait in steps:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                pass
            if not pid_alive(pid):
                return
            time.sleep(poll_s)
