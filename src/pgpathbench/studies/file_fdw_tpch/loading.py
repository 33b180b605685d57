"""Every layout's load on one pool of connections (one per core): the COPYs, then every VACUUM,
ANALYZE, columnar copy and Citus foreign shard, then what needs those done first (the postgres_fdw
coordinator's statistics of its columnar partitions); their figures."""

from __future__ import annotations

import time

from ...datasets.tpch.files import MB, TpchFiles
from ...datasets.tpch.load import Task, run_tasks
from . import citus, objects
from .nodes import Nodes
from .shape import Shape
from .spec import COLUMNAR, CORES, DB


def tasks(nodes: Nodes, files: TpchFiles, shape: Shape) -> tuple[list[Task], list[Task], list[Task]]:
    """(load, analyze, after) of every server."""
    load: list[Task] = []
    analyze: list[Task] = []
    after: list[Task] = []
    if nodes.main is not None:
        load, analyze = objects.load_tasks(nodes.main, nodes.fdw_workers, files, shape)
        if shape.columnar:
            after = objects.coordinator_analyses(nodes.main, shape, files.sizes(), [COLUMNAR])
    if nodes.citus is not None:
        more, analyses = citus.load_tasks(nodes.citus, files, shape)
        load, analyze = load + more, analyze + analyses
    return load, analyze, after


def load_and_analyze(nodes: Nodes, files: TpchFiles, shape: Shape, log) -> dict:
    load, analyze, after = tasks(nodes, files, shape)
    t0 = time.monotonic()
    loaded = run_tasks(load, CORES)
    load_bytes = sum(t.bytes for t in load)
    facts: dict = {"load": {"seconds": loaded.wall_s, "bytes": load_bytes,
                            "mb_per_s": round(load_bytes / MB / max(loaded.wall_s, 1e-9), 1),
                            "connections": CORES, "by_layout": loaded.groups}}
    log(f"loaded {load_bytes / MB:,.0f} MB with COPY in {loaded.wall_s:.1f} s "
        f"({facts['load']['mb_per_s']:,.0f} MB/s on {CORES} connections)")
    analysed = run_tasks(analyze, CORES)
    groups = dict(analysed.groups)
    if after:
        groups.update(run_tasks(after, CORES).groups)
    facts["analyze"] = {"seconds": round(time.monotonic() - t0 - loaded.wall_s, 3), "by_layout": groups}
    log(f"analysed {' and '.join(shape.storages)} tables in {facts['analyze']['seconds']:.1f} s"
        + (" (columnar copies and Citus's foreign shards made meanwhile)" if shape.columnar or nodes.citus else ""))
    facts["load_and_analyze_s"] = round(time.monotonic() - t0, 3)
    if nodes.main is not None:
        facts["loaded_once"] = loaded_once(nodes.main)
    return facts


def loaded_once(main) -> dict[str, dict]:
    """What LOADED_ONCE left on the tpch instance's regular tables: the share of their pages VACUUM
    marked all-visible, and whether autovacuum is off on them."""
    with main.connect(DB) as conn:
        rows = conn.execute(
            "SELECT format('%I.%I', n.nspname, c.relname), c.relallvisible, c.relpages, "
            "  'autovacuum_enabled=off' = ANY (coalesce(c.reloptions, '{}')) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname IN ('single_regular', 'partitioned_regular') ORDER BY 1").fetchall()
    return {name: {"all_visible": round(visible / pages, 4) if pages else 1.0, "autovacuum_off": off}
            for name, visible, pages, off in rows}
