"""Where the tool keeps its state, and who is alive in it.

Layout under the workspace root:
  results/          the persistent results cluster (unless --results-dsn)
  servers/RUN/ROLE  a run's managed servers, removed when the run ends
  servers/RUN.lock  held by the run's process while it lives
  workspace.lock    held shared by every pgpathbench process in the workspace; `clean --all` alone
  processes/PID     what each of them does, held while it lives

Every lock is an flock, which the kernel drops when its process ends, however it ends (SIGKILL,
the OOM killer): a lock nobody holds is a process that is gone, whatever files it left.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from . import validate
from .errors import UserError
from .procs import OsUser

ENV_VAR = "PGPATHBENCH_HOME"
TEMPLATES_VAR = "PGPATHBENCH_TEMPLATES"   # a folder of templates (servers/template.py) shared by workspaces
GATE = "workspace.lock"
PROCESSES = "processes"
NAMING_S = 1.0     # how long `clean --all` looks for the records of the processes it was refused by

_present: dict[Path, tuple[int, int]] = {}   # root -> (our record, the gate): fds held until we exit


def default_root() -> Path:
    """PGPATHBENCH_HOME, else a per-user default; set but empty is a mistake, never the default."""
    value = os.environ.get(ENV_VAR)
    if value is not None:
        if not value.strip():
            raise UserError(f"{ENV_VAR}: set but empty; export {ENV_VAR}=DIR, or unset it for the default "
                            "workspace")
        return Path(value)
    if os.geteuid() == 0:
        # root's home is 0700: servers run as another user must be able to reach their data.
        return Path("/var/lib/pgpathbench")
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "pgpathbench"


def shared_templates() -> Path | None:
    """PGPATHBENCH_TEMPLATES: where new clusters' templates are kept for every workspace that names it
    (initdb once, not once per workspace). A template becomes a server's data directory, so the
    folder must be ours alone: one another user owns, or anyone else may write, is refused."""
    value = os.environ.get(TEMPLATES_VAR)
    if value is None:
        return None
    try:
        path = Path(validate.directory(value))
    except ValueError as e:
        raise UserError(f"{TEMPLATES_VAR}: {e}") from None
    with contextlib.suppress(FileNotFoundError):   # made at the first template (0711)
        found = os.lstat(path)
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o022:
            raise UserError(f"{TEMPLATES_VAR}: {path} must be a folder of yours that others cannot write; "
                            f"name a new one, or unset {TEMPLATES_VAR} for the workspace's own")
    return path


@dataclass(frozen=True)
class Workspace:
    root: Path
    server_user: OsUser
    shared_templates: Path | None = None   # PGPATHBENCH_TEMPLATES; None: the workspace's own folder

    @classmethod
    def open(cls, root: str | Path | None, server_user: str | None = None) -> "Workspace":
        """Check the workspace can be used; nothing is created until something is written."""
        where = "--workspace" if root else ENV_VAR if ENV_VAR in os.environ else "workspace"
        try:
            path = Path(validate.directory(str(root or default_root())))
        except ValueError as e:
            raise UserError(f"{where}: {e}") from None
        ws = cls(path, OsUser.for_servers(server_user), shared_templates())
        ws._check_reachable(path, "--workspace", "choose a path such as /var/lib/pgpathbench")
        if ws.shared_templates:
            ws._check_reachable(ws.shared_templates, TEMPLATES_VAR, "chmod o+x that folder, or choose another")
        return ws

    def _check_reachable(self, path: Path, where: str, fix: str) -> None:
        """The server user must be able to traverse every existing parent of `path`."""
        if self.server_user.is_me:
            return
        existing = next(p for p in [path, *path.parents] if p.exists())
        for parent in [existing, *existing.parents]:
            st = parent.stat()
            if not st.st_mode & 0o001 and st.st_uid != self.server_user.uid:
                raise UserError(
                    f"{where}: {path} is not reachable by server user "
                    f"'{self.server_user.name}' ({parent} is not world-searchable); {fix}"
                )

    def free_bytes(self) -> int:
        existing = next(p for p in [self.root, *self.root.parents] if p.exists())
        return shutil.disk_usage(existing).free

    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    @property
    def templates_dir(self) -> Path:
        """Pristine data directories that new clusters are copied from (servers/template.py)."""
        return self.shared_templates or self.root / "templates"

    @property
    def servers_dir(self) -> Path:
        return self.root / "servers"

    def run_servers_dir(self, run_id: str) -> Path:
        return self.servers_dir / run_id

    # -- who is alive here ------------------------------------------------------------------
    def enter(self, doing: str, alone: bool = False) -> None:
        """Be seen in the workspace until this process ends: our record says what we do (said
        again when called again), then the gate, shared. alone (`clean --all`): the gate exclusive,
        without waiting; UserError naming the others when any is in. A process that enters while
        `clean --all` works waits for it, so that nothing it starts is removed."""
        if self.root in _present:
            _write(_present[self.root][0], doing)
            return
        try:
            (self.root / PROCESSES).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"--workspace: cannot create {self.root} ({e.strerror}); "
                            "choose a writable directory") from None
        record_path = self.root / PROCESSES / str(os.getpid())
        record = _locked(record_path, fcntl.LOCK_EX)
        _write(record, doing)
        gate = os.open(self.root / GATE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB if alone else fcntl.LOCK_SH)
        except BlockingIOError:
            os.close(gate)
            _leave(record_path, record)
            others = self._others_named()
            raise UserError(f"--all: other pgpathbench processes use workspace {self.root}: {', '.join(others)}; "
                            "wait for them to end or stop them, then run clean --all again "
                            "('pgpathbench clean' alone leaves what they use)") from None
        _present[self.root] = (record, gate)

    def live(self) -> dict[int, str]:
        """pid -> what it does, for each other live pgpathbench process here: a record its process
        holds locked (a pid alone may be another program's since: a killed run's record stays). The
        records of processes that are gone are removed on the way."""
        found = {}
        for path in sorted(self.root.glob(f"{PROCESSES}/*")):
            if path.name == str(os.getpid()) or not path.name.isdigit():
                continue
            text = _holder(path, remove_unheld=True)
            if text is not None:
                found[int(path.name)] = text
        return found

    def others(self) -> list[str]:
        """What each other live pgpathbench process here does: 'run R (pid P)', 'report (pid P)'."""
        return [f"{text or 'starting'} (pid {pid})" for pid, text in self.live().items()]

    def _others_named(self) -> list[str]:
        """others(), waiting a moment for a record: a process may hold the gate while its record is
        being read, or have just left."""
        deadline = time.monotonic() + NAMING_S
        while not (found := self.others()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return found or ["a process that has just ended"]

    def run_lock(self, run_id: str) -> Path:
        return self.servers_dir / f"{run_id}.lock"

    def hold_run(self, run_id: str) -> int:
        """The run's lock, ours (with our pid in it) until closed or until we end; taken before
        anything of the run is made. Waits while `clean` removes what a killed session of it left."""
        fd = _locked(self.run_lock(run_id), fcntl.LOCK_EX)
        _write(fd, f"pid {os.getpid()}")
        return fd

    def release_run(self, run_id: str, fd: int) -> None:
        """Give the run's lock up, its file removed (under the lock: a waiter takes a new one)."""
        self.run_lock(run_id).unlink(missing_ok=True)
        os.close(fd)

    @contextlib.contextmanager
    def claim_run(self, run_id: str) -> Iterator[str | None]:
        """Who runs run_id: 'pid P' while its process lives (nothing of it may be touched), or None
        when it is gone: then its lock is ours until the block ends, so that a resume waits for
        what is removed meanwhile, and is removed after."""
        fd = _locked(self.run_lock(run_id), fcntl.LOCK_EX | fcntl.LOCK_NB)
        if fd is None:
            yield _holder(self.run_lock(run_id)) or "starting"
            return
        try:
            yield None
        finally:
            self.release_run(run_id, fd)


def _locked(path: Path, how: int) -> int | None:
    """An fd of `path` (created with its directory if need be) under flock `how`; None if LOCK_NB and
    someone else holds it. Taken again if the file was removed or replaced meanwhile: a lock on a
    file nobody else can open any more keeps nobody out."""
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:   # its directory was removed in between
            continue
        try:
            fcntl.flock(fd, how)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if os.path.samestat(os.stat(path), os.fstat(fd)):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _holder(path: Path, remove_unheld: bool = False) -> str | None:
    """The text of a lock file while its process holds it; None when nobody does (the file then
    removed, if asked)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode(errors="replace").strip()
        if remove_unheld:
            path.unlink(missing_ok=True)
        return None
    finally:
        os.close(fd)


def _write(fd: int, text: str) -> None:
    """A lock file's text; none on a full disk, where `clean` must still get in to free space (the
    lock is what keeps others out; a reader of an empty record says 'starting')."""
    os.ftruncate(fd, 0)
    try:
        os.pwrite(fd, text.encode(), 0)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise


def _leave(record_path: Path, record: int) -> None:
    """Our record removed (under its lock: whoever reads it meanwhile still sees us)."""
    with contextlib.suppress(OSError):
        record_path.unlink(missing_ok=True)
        os.close(record)


def leave_all() -> None:
    """This process seen in no workspace any more: at exit, and after each call of a caller that
    runs the CLI's main() in its own process (the tests' pgpathbench_main)."""
    while _present:
        root, (record, gate) = _present.popitem()
        _leave(root / PROCESSES / str(os.getpid()), record)
        with contextlib.suppress(OSError):
            os.close(gate)


atexit.register(leave_all)   # once: a no-op for a process that entered no workspace
