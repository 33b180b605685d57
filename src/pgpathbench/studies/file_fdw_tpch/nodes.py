"""The servers of a file-fdw-tpch run: the tpch instance (the single and partitioned layouts, and
the postgres_fdw layout's coordinator), the postgres_fdw layout's workers, the citus layout's
cluster; started once per session, and which of them a case's measurement involves."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ...evidence import Watched
from ...servers.topology import Server
from ..base import StudyEnv
from . import citus
from .shape import Shape
from .spec import CITUS, DB, canonical, cluster_settings


@dataclass
class Nodes:
    main: Server | None = None                  # tpch: absent when the run measures the citus layout alone
    fdw_workers: list[Server] = field(default_factory=list)
    citus: citus.CitusNodes | None = None

    def server(self, layout: str) -> Server:
        """Where a layout's queries run: the citus coordinator, or the tpch instance."""
        return self.citus.coordinator if canonical(layout) == CITUS else self.main

    def watched(self, layout: str) -> list[Watched]:
        """The servers a case's measurement involves: the coordinator of its layout and its workers."""
        layout = canonical(layout)
        if layout == CITUS:
            return self.citus.watched()
        main = [self.main.watched("tpch", DB)]
        if layout != "postgres_fdw":
            return main
        return main + [w.watched(f"worker{k}", DB) for k, w in enumerate(self.fdw_workers, 1)]


def start_servers(env: StudyEnv, shape: Shape) -> Nodes:
    """The instance `tpch` (the user's with --server tpch) when a stock layout is measured, one per
    part for the postgres_fdw layout, and the citus layout's cluster."""
    t0 = time.monotonic()
    settings = cluster_settings(shape.scale, shape.partitions)
    nodes = Nodes()
    if shape.stock_layouts:
        nodes.main = env.servers.server("tpch", settings=settings)
        nodes.main.create_database(DB)
    if "postgres_fdw" in shape.layouts:
        # each here, or on its host (--place worker=NAME or workerK=NAME)
        nodes.fdw_workers = [env.servers.server(f"worker{k}", settings=settings)
                             for k in range(1, shape.partitions + 1)]
        for w in nodes.fdw_workers:
            w.create_database(DB)
    if CITUS in shape.layouts:
        nodes.citus = citus.start(env, shape, settings)
    count = (nodes.main is not None) + len(nodes.fdw_workers) + (
        1 + len(nodes.citus.workers) if nodes.citus else 0)
    env.log(f"{count} server(s) up in {time.monotonic() - t0:.1f} s")
    return nodes
