"""file-fdw-tpch's citus layout and columnar storage, without servers: which options ask for Citus
and the build with it, what a user's Citus cluster runs, the shape of a run, its disk, and how a
Citus plan is read (its tasks on the shards, what it read)."""

from __future__ import annotations

import dataclasses

import pytest

from pgpathbench.datasets.tpch.plans import distributed_tasks, plan_shape, read_bytes
from pgpathbench.errors import UserError
from pgpathbench.servers import citus as engine
from pgpathbench.servers.binaries import PgBinaries
from pgpathbench.studies.file_fdw_tpch import user_role
from pgpathbench.studies.file_fdw_tpch.shape import Shape
from pgpathbench.studies.file_fdw_tpch.spec import disk_needed
from test_file_fdw_tpch_report import measurement, study_result
from test_file_fdw_tpch_study import STUDY, options

COORDINATOR = {"servers": {"coordinator": "host=db1 user=bench dbname=app"}}
DEBIAN = PgBinaries(15, engine.TREE.parent / "no-such-postgres" / "bin", origin="--pg-bindir somewhere")


def with_params(o, **params):
    return dataclasses.replace(o, params={**o.params, **params})


def test_citus_and_columnar_are_asked_by_the_layout_and_the_storage():
    assert user_role.citus_option(options(layout=("single", "citus"))) == "--layout citus"
    assert user_role.citus_option(options(storage=("regular", "columnar"), layout=("single",))) == "--storage columnar"
    assert user_role.citus_option(options(layout=("single", "partitioned"))) is None
    # a stock run keeps the binaries it was given; one with Citus refuses binaries without it
    assert user_role.server_binaries(options(layout=("single",)), DEBIAN) is DEBIAN
    with pytest.raises(UserError, match=r"--layout citus: the PostgreSQL of --pg-bindir .* has no Citus"):
        user_role.server_binaries(options(layout=("citus",)), DEBIAN)


def test_a_user_coordinator_runs_citus_with_its_own_citus():
    """Its Citus is the user's: the managed servers need none unless they run columnar themselves."""
    o = STUDY.refine(with_params(options(), **COORDINATOR), set())
    assert o.dims["layout"] == ("citus",) and o.dims["storage"] == ("regular",)   # foreign left out, said
    assert user_role.server_binaries(o, DEBIAN) is DEBIAN
    columnar = STUDY.refine(with_params(options(storage=("regular", "columnar")), **COORDINATOR), {"storage"})
    assert columnar.dims["storage"] == ("regular", "columnar") and Shape.of(columnar).storages == ("regular", "columnar")
    with pytest.raises(UserError, match="--storage foreign: your Citus cluster"):
        STUDY.refine(with_params(options(), **COORDINATOR), {"storage"})
    both = STUDY.refine(with_params(options(layout=("single", "citus"), storage=("regular", "columnar")),
                                    **COORDINATOR), {"layout", "storage"})
    with pytest.raises(UserError, match="--storage columnar: the PostgreSQL of --pg-bindir"):   # managed single
        user_role.server_binaries(both, DEBIAN)


def test_other_majors_are_refused():
    with pytest.raises(UserError, match="--layout citus: Citus is for PostgreSQL 15 here, and --pg asks for 17"):
        STUDY.refine(options(layout=("citus",), pg=("15", "17")), {"layout", "pg"})


def test_shape_sets_up_columnar_only_when_asked_and_citus_needs_no_parts():
    assert Shape.of(options(layout=("single", "citus"))).storages == ("regular", "foreign")
    shape = Shape.of(options(layout=("single", "citus"), storage=("columnar",)))
    assert shape.storages == ("regular", "foreign", "columnar") and shape.columnar
    assert not shape.needs_parts and shape.stock_layouts == ("single",)
    assert Shape.of(options(layout=("scaleout",))).layouts == ("postgres_fdw",)   # a stored run's name
    assert Shape.of(with_params(options(layout=("citus",)), workers=3)).workers == 3


def test_disk_of_the_citus_layout():
    single = disk_needed(10, ("single",), True, True)
    citus = disk_needed(10, ("single", "citus"), True, True, workers=1)
    # its tables, lineitem and orders again as shard files, the small tables on both nodes, two nodes' WAL
    assert citus - single == pytest.approx((1.4e9 + 0.95e9 + 2 * 0.22e9) * 10 + 2 * 2.5e9)
    assert disk_needed(10, ("citus",), True, True) < citus
    assert disk_needed(10, ("single", "citus"), True, True, columnar=True) == pytest.approx(citus + 2 * 5e9)


def task(port: int, shard: int, top: dict) -> dict:
    return {"Node": f"host=127.0.0.1 port={port} dbname=tpch", "Remote Plan": [[{"Plan": top}]]}


def partial_aggregate(scan: str, shard: int, **counts) -> dict:
    """What Q1's task runs on a shard (EXPLAIN's JSON, cut down): a hashed aggregate over its scan."""
    leaf = {"Node Type": scan, "Relation Name": f"lineitem_{shard}", **(
        {"Foreign File": f"/srv/lineitem_{shard}.tbl", "Foreign File Size": 1000} if scan == "Foreign Scan" else {})}
    return {"Node Type": "Aggregate", "Strategy": "Hashed", "Partial Mode": "Simple", "Plans": [leaf], **counts}


def q1_plan(scan: str = "Seq Scan", **counts) -> dict:
    tasks = [task(5433, 102008 + k, partial_aggregate(scan, 102008 + k, **counts)) for k in range(4)]
    return {"Node Type": "Sort", "Shared Hit Blocks": 3, "Plans": [{
        "Node Type": "Aggregate", "Strategy": "Hashed", "Plans": [{
            "Node Type": "Custom Scan", "Custom Plan Provider": "Citus Adaptive",
            "Distributed Query": {"Job": {"Task Count": 4, "Tasks Shown": "All", "Tasks": tasks}}}]}]}


def test_a_citus_plans_tasks_what_ran_on_each_shard():
    tasks = distributed_tasks(q1_plan())
    assert [t["node"] for t in tasks] == ["127.0.0.1:5433"] * 4
    assert {t["top"] for t in tasks} == {"Aggregate (Hashed)"}
    assert [t["scans"] for t in tasks] == [[f"Seq Scan lineitem_{102008 + k}"] for k in range(4)]
    assert plan_shape(q1_plan()) == "tasks(lineitem)"          # storage-neutral: a shard reads as its table
    assert plan_shape(q1_plan("Foreign Scan")) == "tasks(lineitem)"
    assert distributed_tasks({"Node Type": "Seq Scan", "Relation Name": "lineitem"}) == []


def test_what_a_plan_read_counts_every_tasks_pages_and_files():
    pages = read_bytes(q1_plan(**{"Shared Hit Blocks": 10, "Shared Read Blocks": 5}), 8192)
    assert pages == {"buffer_bytes": (3 + 4 * 15) * 8192, "file_bytes": 0}
    assert read_bytes(q1_plan("Foreign Scan"))["file_bytes"] == 4 * 1000


# --- the report's tables of the citus layout and the columnar storage ----------------------------------
def run_with(measurements, facts):
    return study_result(measurements, facts)


CITUS_FACTS = {
    "scale": 0.1, "partitions": 4, "layouts": ["single", "citus"], "storages": ["regular", "foreign", "columnar"],
    "files": {"lineitem": 1000, "orders": 400},
    "plans": {"q1:regular:citus": {"shape": "tasks(lineitem)", "workers": 0,
                                   "tasks": distributed_tasks(q1_plan())},
              "q1:regular:single": {"shape": "lineitem", "workers": 0},
              "q3:regular:postgres_fdw": {"shape": "HashJoin(remote(orders INNER JOIN lineitem), customer)",
                                          "workers": 0},
              "q22:regular:citus": {"shape": "refused by Citus", "workers": 0, "refused": "Citus cannot run it: x"}},
    "reads": {f"q6:{st}:single": {"buffer_bytes": b, "file_bytes": f}
              for st, b, f in (("regular", 100e6, 0), ("foreign", 0, 80e6), ("columnar", 10e6, 0))},
    "citus": {"version": "Citus 13.2.0 on x86_64", "extension": "13.2-1", "managed": True,
              "node_conninfo": "sslmode=require",
              "nodes": [{"host": "127.0.0.1", "port": 5432, "group": 0}, {"host": "127.0.0.1", "port": 5433, "group": 1}],
              "links": [{"worker": "127.0.0.1:5433", "connections": 4,
                         "tls": [{"ssl": True, "version": "TLSv1.3", "cipher": "TLS_AES_256_GCM_SHA384"}]}],
              "schemas": {"regular": "citus_regular"},
              "shards": [{"schema": "citus_regular", "table": "lineitem", "shard": 102008 + k} for k in range(4)],
              "shard_files": [{"table": "lineitem", "shard": 102040 + k, "bytes": 300} for k in range(4)]}}


def table(tables, title):
    return next(t for t in tables if t.title.startswith(title))


def test_the_report_says_where_each_layout_ran_and_what_columnar_read():
    from pgpathbench.studies.file_fdw_tpch.report import tables
    ms = [{**m, "metrics": {"duration_ms": ms_}} for m, ms_ in (
        (measurement_of("q6", st, "single", rnd), base * f) for rnd, f in ((1, 1.0), (2, 1.2), (3, 0.9))
        for st, base in (("regular", 100.0), ("foreign", 500.0), ("columnar", 50.0)))]
    found = tables(run_with(ms, CITUS_FACTS))
    rows = {(r[0], r[1], r[2]): r for r in table(found, "Where each layout ran").rows}
    assert rows[("Q1", "citus", "regular")][4:] == ["4 tasks: worker1 x4", "Aggregate (Hashed) over Seq Scan lineitem (x4)"]
    assert rows[("Q3", "postgres_fdw", "regular")][4:] == ["4 instances", "pushed down: orders INNER JOIN lineitem"]
    assert rows[("Q22", "citus", "regular")][5] == "Citus cannot run it: x"
    (q6,) = table(found, "Columnar against regular").rows
    assert q6[:7] == ["Q6", "single", "15", 100.0, 80.0, 10.0, 0.1]
    assert q6[10] == pytest.approx(0.5)                 # columnar / regular seconds, paired by round
    cluster = {r[1]: r for r in table(found, "The Citus cluster").rows}
    assert cluster["nodes"][2] == "coordinator 127.0.0.1:5432, worker1 127.0.0.1:5433"
    assert cluster["links"][3] == "worker1: 4 connections, TLSv1.3 TLS_AES_256_GCM_SHA384"
    assert cluster["foreign shard files: lineitem"][3] == "4 files; 1.20x the .tbl's bytes (COPY pads char(n) columns)"


def measurement_of(q, storage, layout, rnd):
    return measurement(q, storage, layout, rnd, 0)
