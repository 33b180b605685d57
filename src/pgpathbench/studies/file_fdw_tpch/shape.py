"""What a file-fdw-tpch run sets up (its Shape), read from its options: the module every part of
the study imports (objects.py, citus.py, checks.py, study.py), so that none imports study.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ...datasets.tpch.queries import ALL_QUERIES, query_text
from ...errors import UserError
from ..base import StudyOptions, user_roles
from .spec import CITUS, COLUMNAR, DEFAULT_STORAGES, LAYOUTS, STORAGES, canonical, expand_queries


@dataclass(frozen=True)
class Shape:
    """What a run sets up: the scale, the number of partitions (the postgres_fdw layout's instances,
    the citus layout's shards), the layouts and queries it measures, the statement timeout, and the
    citus layout's worker nodes."""
    scale: float
    partitions: int
    layouts: tuple[str, ...]
    queries: tuple[str, ...]
    timeout: int = 3600
    user: Mapping[str, str] = field(default_factory=dict)     # the user's queries: {NAME: SQL}
    # The storages set up and checked: on managed servers regular and foreign whatever --storage
    # measures (the answers are compared across them), and columnar when asked; with a user
    # server (tpch, coordinator), those it measures only (user_role.py).
    storages: tuple[str, ...] = DEFAULT_STORAGES
    workers: int = 1

    @classmethod
    def of(cls, options: StudyOptions) -> "Shape":
        p = options.params
        user = p.get("query_file") or {}
        unknown = [q for q in options.dims["queries"] if q != "all" and q not in ALL_QUERIES and q not in user]
        if unknown:
            raise UserError(f"--queries: '{unknown[0]}' is no TPC-H query (1-22) and no NAME of a --query-file; "
                            f"give --query-file {unknown[0]}=FILE or choose TPC-H queries (e.g. 1,6)")
        asked = options.dims["storage"]
        storages = tuple(st for st in STORAGES if st in asked) if user_roles(options) else \
            DEFAULT_STORAGES + ((COLUMNAR,) if COLUMNAR in asked else ())
        layouts = {canonical(la) for la in options.dims["layout"]}
        return cls(float(p["scale"]), int(p["partitions"]), tuple(la for la in LAYOUTS if la in layouts),
                   expand_queries(options.dims["queries"], user), int(p["timeout"]), user, storages,
                   int(p.get("workers", 1)))

    def text(self, query: str) -> str:
        """The PostgreSQL text of a query: TPC-H's at this scale, or the user's."""
        return self.user[query] if query in self.user else query_text(query, self.scale)

    @property
    def stock_layouts(self) -> tuple[str, ...]:
        """The layouts of the tpch instance (and the postgres_fdw layout's workers): all but citus."""
        return tuple(la for la in self.layouts if la != CITUS)

    @property
    def needs_parts(self) -> bool:
        """The part files: the partitioned and postgres_fdw layouts load them (Citus routes whole files)."""
        return any(la in ("partitioned", "postgres_fdw") for la in self.layouts)

    @property
    def columnar(self) -> bool:
        return COLUMNAR in self.storages

    @property
    def sides(self) -> list[tuple[str, str]]:
        """(layout, storage) of every side a query runs on, in report order."""
        return [(la, st) for la in self.layouts for st in self.storages]
