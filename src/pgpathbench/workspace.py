"""Where the tool keeps its state: managed servers, the results cluster, secrets.

Layout under the workspace root:
  results/          the persistent results cluster (unless --results-dsn)
  servers/RUN/ROLE  a run's managed servers, removed when the run ends
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError
from .procs import OsUser

ENV_VAR = "PGPATHBENCH_HOME"


def default_root() -> Path:
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    if os.geteuid() == 0:
        # root's home is 0700: servers run as another user must be able to reach their data.
        return Path("/var/lib/pgpathbench")
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "pgpathbench"


@dataclass(frozen=True)
class Workspace:
    root: Path
    server_user: OsUser

    @classmethod
    def open(cls, root: str | Path | None, server_user: str | None = None) -> "Workspace":
        path = Path(root or default_root()).absolute()
        user = OsUser.for_servers(server_user)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"--workspace: cannot create {path} ({e.strerror}); choose a writable directory") from None
        ws = cls(path, user)
        ws._check_reachable()
        return ws

    def _check_reachable(self) -> None:
        """The server user must be able to traverse every parent of the workspace."""
        if self.server_user.is_me:
            return
        for parent in [self.root, *self.root.parents]:
            mode = parent.stat().st_mode
            if not mode & 0o001 and parent.stat().st_uid != self.server_user.uid:
                raise UserError(
                    f"--workspace: {self.root} is not reachable by server user "
                    f"'{self.server_user.name}' ({parent} is not world-searchable); "
                    f"choose a path such as /var/lib/pgpathbench"
                )

    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    @property
    def servers_dir(self) -> Path:
        return self.root / "servers"

    def run_servers_dir(self, run_id: str) -> Path:
        return self.servers_dir / run_id
