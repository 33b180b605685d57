"""A PostgreSQL major version -> the directory of its binaries.

15 is Debian's (postgresql-15, postgresql-client-15). Newer majors come from Maven Central
(a later issue); asking for one now is a clear error, not a silent fallback.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

DEBIAN_MAJORS = {15}
SERVER_TOOLS = ("initdb", "postgres", "pg_ctl")
CLIENT_TOOLS = ("psql", "pgbench")


@dataclass(frozen=True)
class PgBinaries:
    major: int
    bindir: Path

    def path(self, tool: str) -> Path:
        return self.bindir / tool

    def require(self, *tools: str, option: str = "--pg-bindir") -> "PgBinaries":
        for tool in tools:
            if not self.path(tool).is_file():
                raise UserError(
                    f"{option}: {tool} not found in {self.bindir}; install postgresql-{self.major} "
                    f"and postgresql-client-{self.major} (make bootstrap) or point {option} at a bin directory"
                )
        return self

    def sharedir(self) -> Path:
        # Debian splits /usr/lib/postgresql/N/bin and /usr/share/postgresql/N; bundles keep share/ beside bin/.
        debian = Path("/usr/share/postgresql") / str(self.major)
        return debian if self.bindir == Path(f"/usr/lib/postgresql/{self.major}/bin") else self.bindir.parent / "share"

    def has_extension(self, name: str) -> bool:
        return (self.sharedir() / "extension" / f"{name}.control").is_file()

    def version(self, tool: str = "postgres") -> str:
        out = subprocess.run([str(self.path(tool)), "--version"], capture_output=True, text=True).stdout
        return out.strip()


def resolve(major: int = 15, bindir: str | Path | None = None) -> PgBinaries:
    """The binaries for a major version, or those of an explicit --pg-bindir."""
    if bindir is not None:
        path = Path(bindir)
        if not path.is_dir():
            raise UserError(f"--pg-bindir: {path} is not a directory; give the bin directory of a PostgreSQL install")
        out = subprocess.run([str(path / "postgres"), "--version"], capture_output=True, text=True) \
            if (path / "postgres").is_file() else None
        found = re.search(r"\) (\d+)", out.stdout) if out else None
        return PgBinaries(int(found.group(1)) if found else major, path)
    if major not in DEBIAN_MAJORS:
        raise UserError(f"--pg: PostgreSQL {major} is not supported yet; use --pg 15")
    return PgBinaries(major, Path(f"/usr/lib/postgresql/{major}/bin"))
