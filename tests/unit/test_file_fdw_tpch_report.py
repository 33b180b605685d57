"""file-fdw-tpch without servers: plan shapes and the report's arithmetic (slowdowns paired by
round, the user-CPU table)."""

from __future__ import annotations

import pytest

from pgpathbench.datasets.tpch.plans import base_table, plan_shape, plan_workers
from pgpathbench.results.model import RunResult
from pgpathbench.studies.file_fdw_tpch.report import UNDER_A_TICK
from test_file_fdw_tpch_study import STUDY


# --- plans -------------------------------------------------------------------------------------------
def scan(rel, kind="Seq Scan", **kw):
    return {"Node Type": kind, "Relation Name": rel, **kw}


def join(kind, outer, inner, jt="Inner"):
    return {"Node Type": kind, "Join Type": jt, "Plans": [outer, {"Node Type": "Hash", "Plans": [inner]}
                                                          if kind == "Hash Join" else inner]}


def test_plan_shape_is_storage_neutral():
    regular = {"Node Type": "Aggregate", "Plans": [join("Hash Join", scan("orders"), scan("lineitem"))]}
    foreign = {"Node Type": "Aggregate", "Plans": [join("Hash Join", scan("orders", "Foreign Scan"),
                                                        scan("lineitem", "Foreign Scan"))]}
    swapped = {"Node Type": "Aggregate", "Plans": [join("Hash Join", scan("lineitem", "Foreign Scan"),
                                                        scan("orders", "Foreign Scan"))]}
    assert plan_shape(regular) == plan_shape(foreign) == "HashJoin(orders, lineitem)"
    assert plan_shape(swapped) == "HashJoin(lineitem, orders)" != plan_shape(regular)


def test_plan_shape_partitions_partitionwise_pushdown_and_subplans():
    parts = {"Node Type": "Gather", "Workers Planned": 2, "Plans": [
        {"Node Type": "Append", "Plans": [scan("lineitem_1"), scan("lineitem_2")]}]}
    assert plan_shape(parts) == "lineitem" and plan_workers(parts) == 2
    pw = {"Node Type": "Append", "Plans": [join("Hash Join", scan(f"lineitem_{k}"), scan(f"orders_{k}"))
                                           for k in (1, 2)]}
    assert plan_shape(pw) == "per-partition HashJoin(lineitem, orders)"
    remote = {"Node Type": "Append", "Plans": [
        {"Node Type": "Foreign Scan", "Relations": f"(lineitem_{k} lineitem) INNER JOIN (orders_{k} orders)"}
        for k in (1, 2)]}
    assert plan_shape(remote) == "remote(lineitem INNER JOIN orders)"
    semi = {"Node Type": "Nested Loop", "Join Type": "Semi", "Plans": [
        scan("supplier"), scan("partsupp"),
        {"Node Type": "Aggregate", "Parent Relationship": "InitPlan", "Subplan Name": "InitPlan 1 (returns $0)",
         "Plans": [scan("partsupp")]}]}
    assert plan_shape(semi) == "NestLoop.semi(supplier, partsupp) [InitPlan 1 (returns $0): partsupp]"
    assert plan_workers(semi) == 0
    assert base_table("lineitem_12") == "lineitem" and base_table("revenue_1") == "revenue_1"


# --- the report ------------------------------------------------------------------------------------------
def measurement(q, storage, layout, rnd, seconds):
    return {"study": STUDY.name, "ok": True, "error": None, "round": rnd, "case_id": f"{q}:{storage}:{layout}:15",
            "dims": {"queries": q, "storage": storage, "layout": layout, "pg": "15"},
            "metrics": {"duration_ms": seconds * 1000}}


def study_result(measurements, facts):
    """The result model of a run of this study (model version 2: set-up facts per major and study)."""
    run = {"run_id": "r1", "studies": [STUDY.name], "options": {"model_version": 2},
           "environment": {"sessions": [{"version": 2, "setup": {"15": {STUDY.name: facts}}}]}}
    return RunResult.from_rows(run, [], measurements, []).study


def test_report_slowdowns_paired_by_round_and_the_seeds_comparison():
    ms = []
    for rnd, drift in enumerate((1.0, 1.5, 1.2), 1):     # machine drift cancels in paired ratios
        ms += [measurement("q1", "regular", "single", rnd, 1.0 * drift),
               measurement("q1", "foreign", "single", rnd, 2.0 * drift),
               measurement("q6", "regular", "single", rnd, 0.1 * drift),
               measurement("q6", "foreign", "single", rnd, 1.0 * drift)]
    run = study_result(ms, {
        "scale": 1.0, "partitions": 2, "layouts": ["single"], "files": {"lineitem": 760_000_000},
        "plans": {"q6:foreign:single": {"shape": "lineitem", "workers": 0, "text": ""},
                  "q6:regular:single": {"shape": "lineitem", "workers": 0, "text": ""}}})
    tables = {t.title: t for t in STUDY.report(run)}
    slow = tables["Slowdown through file_fdw: foreign / regular"]
    by_q = {row[0]: row for row in slow.rows}
    assert by_q["Q1"][7] == pytest.approx(2.0) and by_q["Q6"][7] == pytest.approx(10.0)
    assert by_q["Q6"][10] == pytest.approx(218.8 / 18.6)
    assert any("Q6 slowdown 10.00x above Q1 slowdown 2.00x" in n for n in slow.notes)
    seed = tables["TPC-H seconds per query (median of the rounds): regular vs foreign, per layout"]
    assert seed.rows[1][:3] == ["Q6", pytest.approx(0.12), pytest.approx(1.2)] and 18.6 in seed.rows[1]
    rate = tables["Parse rate of file_fdw: MB of lineitem's file per second"]
    q6 = next(r for r in rate.rows if r[0] == "Q6")
    assert q6[6] == pytest.approx(760 / 1.2) and q6[5] == 1
    plots = STUDY.plots(run)
    assert [p.title for p in plots] == ["Seconds per TPC-H query", "Slowdown through file_fdw (foreign / regular)"]
    assert "published PostgreSQL" in plots[1].series


def test_user_cpu_slowdown_sums_every_server_and_pairs_by_round():
    """The seed's CPU-bound view where the page cache decides a regular scan's seconds: user CPU of
    every server process of the case (a scale-out coordinator's and its workers'), paired by round."""
    def with_cpu(m, *users_ms):
        servers = {f"s{i}": {"cpu_ms": {"user": u, "system": 9_000}} for i, u in enumerate(users_ms)}
        return {**m, "evidence": {"servers": servers}}
    ms = []
    for rnd, (regular_s, regular_user) in enumerate(((15.0, 4_000), (5.5, 4_400), (14.0, 4_200)), 1):
        ms += [with_cpu(measurement("q6", "regular", "single", rnd, regular_s), regular_user),
               with_cpu(measurement("q6", "foreign", "single", rnd, 38.0), 32_000 + rnd * 1_000),
               with_cpu(measurement("q1", "regular", "scaleout", rnd, 20.0), 1_000, 10_000, 10_000),
               with_cpu(measurement("q1", "foreign", "scaleout", rnd, 40.0), 1_000, 21_000, 20_000)]
    ms.append(measurement("q6", "regular", "single", 4, 5.0))    # no evidence: no CPU, no pair
    run = study_result(ms, {"scale": 10.0, "partitions": 2, "layouts": ["single", "scaleout"]})
    cpu = {t.title: t for t in STUDY.report(run)}["Slowdown in the servers' user CPU: foreign / regular"]
    by = {(r[0], r[1]): r for r in cpu.rows}
    assert set(by) == {("Q6", "single"), ("Q1", "scaleout")}
    assert by[("Q6", "single")][3:6] == [pytest.approx(4.2), pytest.approx(34.0), pytest.approx(33 / 4.0)]   # paired: 33/4.0, 34/4.4, 35/4.2
    assert by[("Q1", "scaleout")][3:6] == [pytest.approx(21.0), pytest.approx(42.0), pytest.approx(2.0)]
    assert by[("Q6", "single")][7] == pytest.approx(218.8 / 18.6)


def test_user_cpu_row_stays_when_the_regular_side_is_under_a_tick_every_round():
    """CPU comes in 10 ms ticks: a quick query's regular side may read 0 in every round (Q14 on three
    postgres_fdw servers at SF 0.01). Its row stays, without a ratio, saying why."""
    def with_cpu(m, user_ms):
        return {**m, "evidence": {"servers": {"s0": {"cpu_ms": {"user": user_ms, "system": 0}}}}}
    ms = []
    for rnd in (1, 2, 3):
        ms += [with_cpu(measurement("q14", "regular", "scaleout", rnd, 0.01), 0),
               with_cpu(measurement("q14", "foreign", "scaleout", rnd, 0.03), 20)]
    run = study_result(ms, {"scale": 0.01, "partitions": 2, "layouts": ["scaleout"]})
    cpu = {t.title: t for t in STUDY.report(run)}["Slowdown in the servers' user CPU: foreign / regular"]
    (row,) = cpu.rows
    assert row[:2] == ["Q14", "scaleout"] and row[3:7] == [0.0, pytest.approx(0.02), None, UNDER_A_TICK]


