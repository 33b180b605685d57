"""file-fdw-tpch's tables of why a layout costs what it costs: where each layout ran each query (its
plan on its nodes: Citus's tasks on the shards, what postgres_fdw pushed down), the Citus cluster
(its nodes, the links between them, how each storage's shards were made), and the columnar storage
against regular tables and file_fdw (bytes read and seconds per query). Read from the set-up facts
(report.setups) and the measurements; runs without the citus layout or columnar have none of them."""

from __future__ import annotations

import re
from collections import Counter

from ...datasets.tpch.files import MB
from ...report import Table
from ...stats import ratio_summary, summarise
from .spec import CITUS, COLUMNAR, STORAGES, canonical, layout_rank, query_label, query_rank

_SHARD = re.compile(r"_\d+$")


def node_names(citus: dict) -> dict[str, str]:
    """'host:port' -> coordinator, worker1, ... (pg_dist_node's groups in order)."""
    workers = [n for n in citus.get("nodes", []) if n["group"] != 0]
    return {**{f"{n['host']}:{n['port']}": "coordinator" for n in citus.get("nodes", []) if n["group"] == 0},
            **{f"{n['host']}:{n['port']}": f"worker{k}" for k, n in enumerate(workers, 1)}}


def spread(plan: dict, layout: str, fp: dict) -> tuple[str, str]:
    """(where the query ran, what ran there) for one plan of one layout."""
    layout = canonical(layout)
    if "refused" in plan:
        return "—", plan["refused"]
    if layout == CITUS:
        names = node_names(fp.get("citus") or {})
        tasks = plan.get("tasks", [])
        nodes = Counter(names.get(t["node"], t["node"]) for t in tasks)
        ran = Counter(f"{t['top']} over " + ", ".join(sorted({_SHARD.sub('', s) for s in t["scans"]}))
                      for t in tasks)
        return (f"{len(tasks)} tasks: " + ", ".join(f"{n} x{c}" for n, c in nodes.items()),
                "; ".join(f"{what} (x{c})" for what, c in ran.items()))
    if layout == "postgres_fdw":
        pushed = sorted(set(re.findall(r"remote\(([^()]*(?:\([^()]*\))?[^()]*)\)", plan.get("shape", ""))))
        return (f"{fp.get('partitions')} instances", "pushed down: " + "; ".join(pushed) if pushed else
                "scans and filters only: the coordinator joins and aggregates every row")
    workers = plan.get("workers", 0)
    return (f"1 + {workers} parallel workers" if workers else "1 process", plan.get("shape", ""))


def spread_table(env: dict[str, dict]) -> Table | None:
    rows = []
    for pg, fp in sorted(env.items()):
        plans = fp.get("plans") or {}
        if not any(canonical(k.split(":")[2]) == CITUS for k in plans):
            continue   # the stock layouts alone: the plans table says it all
        for key in sorted(plans, key=lambda k: (query_rank(k.split(":")[0]), layout_rank(k.split(":")[2]),
                                                STORAGES.index(k.split(":")[1]))):
            q, storage, layout = key.split(":")
            where, what = spread(plans[key], layout, fp)
            rows.append([query_label(q), layout, storage, pg, where, what])
    if not rows:
        return None
    return Table("Where each layout ran each query: its plan on its nodes", [
        "Query", "Layout", "Storage", "PG", "Ran on", "What ran there"], rows,
        ["citus: the coordinator's plan (EXPLAIN, citus.explain_all_tasks) has a task per shard, each run on the "
         "node holding it (pg_dist_node's groups: worker1...); what ran there is each task's top node over its "
         "scans (Aggregate over lineitem: a partial aggregate on each shard, the coordinator merging them). "
         "postgres_fdw: what its foreign scans pushed down to the instances (joins; 15 pushes no partial "
         "aggregate down). Full EXPLAIN texts: the JSON export's plans."], align_left=4, detail=(3,))


def cluster_table(env: dict[str, dict]) -> Table | None:
    rows = [row for pg, fp in sorted(env.items()) if fp.get("citus") for row in cluster_rows(pg, fp)]
    if not rows:
        return None
    return Table("The Citus cluster: nodes, links, shards", ["Set-up", "What", "Figure", "Detail"], rows,
                 ["Links: what Citus's connections to each worker used, read from pg_stat_ssl on the worker after "
                  "the warm-up (citus.node_conninfo's sslmode=require by default: CREATE EXTENSION citus made "
                  "each node a self-signed certificate)."], align_left=2, detail=(3,))


def cluster_rows(pg: str, fp: dict) -> list[list]:
    c = fp["citus"]
    names = node_names(c)
    shards = Counter((s["schema"], s["table"]) for s in c.get("shards", []))
    regular = (c.get("schemas") or {}).get("regular", "")
    rows = [[pg, "Citus", c.get("version", "").split(" on ")[0], c.get("extension", "")],
            [pg, "nodes", ", ".join(f"{name} {addr}" for addr, name in names.items()),
             "managed by pgpathbench" if c.get("managed") else "yours (--server coordinator): workers from pg_dist_node"],
            [pg, "links", c.get("node_conninfo", ""), "; ".join(link_text(names, link) for link in c.get("links", []))],
            [pg, "shards", f"lineitem {shards.get((regular, 'lineitem'), 0)}, orders {shards.get((regular, 'orders'), 0)} "
                           "placements", "distributed on the order key, co-located; the other six: reference "
                                         "tables, a placement on every node"]]
    rows += [[pg, f"{storage} storage", "", how] for storage, how in (c.get("made") or {}).items()]
    files = fp.get("files") or {}
    by_table: dict[str, list[int]] = {}
    for f in c.get("shard_files", []):
        by_table.setdefault(f["table"], []).append(f["bytes"])
    for table, sizes in sorted(by_table.items()):
        ratio = f"; {sum(sizes) / files[table]:.2f}x the .tbl's bytes (COPY pads char(n) columns)" \
            if table in ("lineitem", "orders") and files.get(table) else ""
        rows.append([pg, f"foreign shard files: {table}", f"{sum(sizes) / MB:,.1f} MB", f"{len(sizes)} files{ratio}"])
    return rows


def link_text(names: dict[str, str], link: dict) -> str:
    if "error" in link:
        return f"{link.get('worker', '?')}: {link['error']}"
    tls = ", ".join(f"{t['version']} {t['cipher']}" if t["ssl"] else "no TLS" for t in link.get("tls", []))
    return f"{names.get(link['worker'], link['worker'])}: {link['connections']} connections, {tls or 'none open'}"


def columnar_table(env: dict[str, dict], series) -> Table | None:
    """series: report.seconds_series (query, storage, layout, pg) -> round: seconds."""
    rows = []
    for pg, fp in sorted(env.items()):
        reads = fp.get("reads") or {}
        keys = {(k.split(":")[0], k.split(":")[2]) for k in reads}
        for q, layout in sorted(keys, key=lambda k: (query_rank(k[0]), layout_rank(k[1]))):
            got = {st: reads.get(f"{q}:{st}:{layout}") or {} for st in ("regular", "foreign", COLUMNAR)}
            secs = {st: series.get((q, st, layout, pg)) for st in got}
            ratio = ratio_summary(secs[COLUMNAR], secs["regular"]) if secs[COLUMNAR] and secs["regular"] else None
            regular_b, columnar_b = got["regular"].get("buffer_bytes"), got[COLUMNAR].get("buffer_bytes")
            rows.append([query_label(q), layout, pg, mb(regular_b), mb(got["foreign"].get("file_bytes")),
                         mb(columnar_b), columnar_b / regular_b if columnar_b and regular_b else None,
                         median(secs["regular"]), median(secs["foreign"]), median(secs[COLUMNAR]),
                         ratio.median if ratio else None, ratio.ci_text if ratio else "—"])
    if not rows:
        return None
    return Table("Columnar against regular tables and file_fdw: bytes read and seconds per query", [
        "Query", "Layout", "PG", "Regular MB", "file_fdw MB", "Columnar MB", "Columnar / regular bytes",
        "Regular s", "file_fdw s", "Columnar s", "Columnar / regular s", "95% CI"], rows,
        ["MB read: one execution before the rounds, EXPLAIN (ANALYZE, BUFFERS): the pages its scans read through "
         "shared buffers (hit or read, 8 kB each; every Citus task's included), and for file_fdw the bytes of the "
         "files it parsed (on citus, the shards' files). postgres_fdw's instances' reads are not in its "
         "coordinator's plan. Seconds: medians of the rounds; columnar / regular paired by round. Columnar reads "
         "only the columns a query needs, compressed (the seed's 'deserialize only the needed columns')."],
        align_left=3, detail=(2, 11))


def mb(nbytes) -> float | None:
    return nbytes / MB if nbytes is not None else None


def median(values: dict | None) -> float | None:
    return summarise(list(values.values())).median if values else None
