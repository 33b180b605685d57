"""Where the tool keeps its state: managed servers, the results cluster, secrets.

Layout under the workspace root:
  results/          the persistent results cluster (unless --results-dsn)
  servers/RUN/ROLE  a run's managed servers, removed when the run ends
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import validate
from .errors import UserError
from .procs import OsUser

ENV_VAR = "PGPATHBENCH_HOME"


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


@dataclass(frozen=True)
class Workspace:
    root: Path
    server_user: OsUser

    @classmethod
    def open(cls, root: str | Path | None, server_user: str | None = None) -> "Workspace":
        """Check the workspace can be used; nothing is created until something is written."""
        where = "--workspace" if root else ENV_VAR if ENV_VAR in os.environ else "workspace"
        try:
            path = Path(validate.directory(str(root or default_root())))
        except ValueError as e:
            raise UserError(f"{where}: {e}") from None
        existing = next(p for p in [path, *path.parents] if p.exists())
        ws = cls(path, OsUser.for_servers(server_user))
        ws._check_reachable(existing)
        return ws

    def _check_reachable(self, existing: Path) -> None:
        """The server user must be able to traverse every existing parent of the workspace."""
        if self.server_user.is_me:
            return
        for parent in [existing, *existing.parents]:
            st = parent.stat()
            if not st.st_mode & 0o001 and st.st_uid != self.server_user.uid:
                raise UserError(
                    f"--workspace: {self.root} is not reachable by server user "
                    f"'{self.server_user.name}' ({parent} is not world-searchable); "
                    f"choose a path such as /var/lib/pgpathbench"
                )

    def free_bytes(self) -> int:
        existing = next(p for p in [self.root, *self.root.parents] if p.exists())
        return shutil.disk_usage(existing).free

    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    @property
    def servers_dir(self) -> Path:
        return self.root / "servers"

    def run_servers_dir(self, run_id: str) -> Path:
        return self.servers_dir / run_id
