"""Roles -> servers for one run: the managed clusters a study asks for, and their teardown.

A study asks for clusters by name (`source`, `external`, ...) and maps its roles onto them.
Every cluster made here is stopped, and its data removed, when the run ends, however it ends.
"""

from __future__ import annotations

from pathlib import Path

from ..workspace import Workspace
from .binaries import PgBinaries
from .cluster import Cluster


class Servers:
    def __init__(self, workspace: Workspace, run_id: str, bins: PgBinaries, keep: bool = False):
        self.workspace = workspace
        self.root: Path = workspace.run_servers_dir(run_id)
        self.bins = bins
        self.keep = keep
        self.clusters: dict[str, Cluster] = {}

    def cluster(self, name: str, settings: dict[str, str] | None = None) -> Cluster:
        """A started cluster named `name` for this run (made fresh on first request)."""
        if name not in self.clusters:
            c = Cluster(name, self.root / name, self.bins, self.workspace.server_user, settings or {})
            c.remove()  # a resumed run starts from clean data, never from a killed run's leftovers
            self.clusters[name] = c
            c.start()
        return self.clusters[name]

    def fingerprint(self) -> dict:
        return {name: c.fingerprint() for name, c in self.clusters.items() if c.running}

    def close(self) -> None:
        for c in reversed(list(self.clusters.values())):
            if self.keep:
                c.stop()
            else:
                c.remove()
        if not self.keep:
            try:
                self.root.rmdir()
            except OSError:
                pass

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
