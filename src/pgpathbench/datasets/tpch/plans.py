"""A query plan in one line: its join tree over base tables, storage-neutral, so that the plans
of regular and file_fdw tables (and of partitions, and of postgres_fdw pushdowns) compare; and the
parallel workers it asked for.
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
