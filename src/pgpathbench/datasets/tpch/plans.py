"""A query plan in one line: its join tree over base tables, storage-neutral, so that the plans
of regular and file_fdw tables (and of partitions, of postgres_fdw pushdowns and of Citus's tasks on
shards) compare; the parallel workers it asked for; Citus's tasks; what a plan read.
"""

from __future__ import annotations

import re

from .schema import TABLES

_JOINS = {"Hash Join": "HashJoin", "Merge Join": "MergeJoin", "Nested Loop": "NestLoop"}
_SUBPLAN = ("InitPlan", "SubPlan")


def base_table(relation: str) -> str:
    """lineitem_2 (a partition) -> lineitem; other names unchanged."""
    m = re.fullmatch(r"(\w+?)_(\d+)", relation)
    return m.group(1) if m and m.group(1) in TABLES else relation


def _relations_text(text: str) -> str:
    """postgres_fdw's 'Relations: (lineitem_1 l) INNER JOIN (orders_1)' without parts or aliases."""
    text = re.sub(r"\b\w+\.", "", text)
    text = re.sub(r"\((\w+)(?: \w+)?\)", lambda m: base_table(m.group(1)), text)
    return re.sub(r"\b(\w+?)_\d+\b", lambda m: base_table(m.group(0)), text)


def plan_shape(node: dict) -> str:
    """A plan's join tree in one line, storage-neutral: joins (method and type) over base tables.

    Scans of a table, its partitions, or a foreign table over its file all read as the table;
    sorts, hashes, gathers and aggregates are left out: what remains is what differs when the
    planner chooses differently (join order, join method, a per-partition join). Init and sub
    plans follow in brackets.
    """
    kids = node.get("Plans", [])
    main = [k for k in kids if k.get("Parent Relationship") not in _SUBPLAN]
    subs = [k for k in kids if k.get("Parent Relationship") in _SUBPLAN]
    kind = node.get("Node Type", "?")
    if kind in _JOINS and len(main) == 2:
        jt = node.get("Join Type", "Inner")
        s = f"{_JOINS[kind]}{'' if jt == 'Inner' else '.' + jt.lower()}({plan_shape(main[0])}, {plan_shape(main[1])})"
    elif "Relation Name" in node:
        s = base_table(node["Relation Name"])
    elif "Distributed Query" in node:   # Citus: what its tasks ran on the shards
        shapes = list(dict.fromkeys(t["shape"] for t in distributed_tasks(node)))
        s = "tasks(" + (shapes[0] if len(shapes) == 1 else "{" + " | ".join(shapes) + "}") + ")"
    elif kind == "Foreign Scan":        # a join or an aggregate pushed down by postgres_fdw
        s = f"remote({_relations_text(node.get('Relations', '?'))})"
    elif kind == "CTE Scan":
        s = f"cte {node.get('CTE Name', '?')}"
    elif kind in ("Append", "Merge Append"):
        shapes = list(dict.fromkeys(plan_shape(k) for k in main))
        joined = len(main) > 1 and any(n.get("Node Type") in _JOINS for k in main for n in _walk_main(k))
        one = shapes[0] if len(shapes) == 1 else "{" + " | ".join(shapes) + "}"
        s = f"per-partition {one}" if joined else one
    elif len(main) == 1:
        s = plan_shape(main[0])
    elif not main:
        s = kind.lower()
    else:
        s = f"{kind}(" + ", ".join(plan_shape(k) for k in main) + ")"
    for sub in subs:
        s += f" [{sub.get('Subplan Name', 'subplan')}: {plan_shape(sub)}]"
    return s


def _walk_main(node: dict):
    yield node
    for k in node.get("Plans", []):
        if k.get("Parent Relationship") not in _SUBPLAN and k.get("Node Type") not in ("Append", "Merge Append"):
            yield from _walk_main(k)


def plan_workers(node: dict) -> int:
    """The most parallel workers any Gather of the plan asked for (0: a serial plan)."""
    here = int(node.get("Workers Planned", 0)) if node.get("Node Type") in ("Gather", "Gather Merge") else 0
    return max([here, *(plan_workers(k) for k in node.get("Plans", []))])


# -- Citus's distributed plans (EXPLAIN with citus.explain_all_tasks = on) --------------------------
def _remote_plan(task: dict) -> dict:
    """A task's plan on its node: EXPLAIN's [[{"Plan": ...}]]."""
    remote = task.get("Remote Plan") or [[{}]]
    first = remote[0][0] if isinstance(remote[0], list) else remote[0]
    return first.get("Plan", {})


def _jobs(node: dict):
    """The Citus jobs under a plan node: its own, and those of its distributed subplans."""
    query = node.get("Distributed Query") or {}
    for sub in query.get("Subplans", []):
        for stmt in sub.get("PlannedStmt", []):
            yield from _jobs_below(stmt.get("Plan", {}))
    if "Job" in query:
        yield query["Job"]


def _jobs_below(node: dict):
    yield from _jobs(node)
    for k in node.get("Plans", []):
        yield from _jobs_below(k)


def _node_address(text: str) -> str:
    """'host=127.0.0.1 port=5432 dbname=tpch' -> '127.0.0.1:5432'."""
    parts = dict(p.split("=", 1) for p in text.split() if "=" in p)
    return f"{parts.get('host', '?')}:{parts.get('port', '?')}"


def distributed_tasks(root: dict) -> list[dict]:
    """Every task of a Citus plan: the node it ran on, what ran there (the remote plan's top node, its
    shape) and the scans it made (node type and shard)."""
    found = []
    for job in _jobs_below(root):
        for task in job.get("Tasks", []):
            plan = _remote_plan(task)
            top = plan.get("Node Type", "?") + (f" ({plan['Strategy']})" if "Strategy" in plan else "")
            scans = [f"{n['Node Type']} {n['Relation Name']}" for n in _walk_all(plan) if "Relation Name" in n]
            found.append({"node": _node_address(task.get("Node", "")), "top": top, "shape": plan_shape(plan),
                          "scans": scans})
    return found


def _walk_all(node: dict):
    yield node
    for k in node.get("Plans", []):
        yield from _walk_all(k)


def read_bytes(root: dict, block_size: int = 8192) -> dict[str, int]:
    """What an EXPLAIN (ANALYZE, BUFFERS) plan read: pages through shared buffers (hit or read; the
    root's counts hold its children's) and the files its file_fdw scans parsed, Citus's tasks
    included (postgres_fdw's remote scans are not in the coordinator's plan)."""
    plans = [root] + [_remote_plan(t) for job in _jobs_below(root) for t in job.get("Tasks", [])]
    pages = sum(p.get("Shared Hit Blocks", 0) + p.get("Shared Read Blocks", 0) for p in plans)
    files = sum(n.get("Foreign File Size", 0) for p in plans for n in _walk_all(p) if n.get("Node Type") == "Foreign Scan")
    return {"buffer_bytes": pages * block_size, "file_bytes": files}
