"""file-fdw-tpch against real managed PostgreSQL servers, at the quick preset (TPC-H SF 0.01, 6
rounds) with the stock layouts (the preset has two: the test asks for the postgres_fdw one too).

Asserts answers (every query's rows the same on regular, foreign and every layout, and the same
as DuckDB's over the same files), that every query x storage x layout was measured, stored and
reported, that Q6 slows down through file_fdw more than Q1 does (seed 002), and that the files
are generated once per scale and reused.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import median

import pytest

from conftest import our_processes, pgpathbench, pgpathbench_main, report_json

pytestmark = pytest.mark.integration

QUERIES = ("q1", "q3", "q5", "q6", "q10", "q12", "q14", "q19")
LAYOUTS = ("single", "partitioned", "postgres_fdw")
STORAGES = ("regular", "foreign")
# Rows each query returns at any scale (Q3 and Q10 are LIMITed, the others group on few keys).
ROWS = {"q1": 4, "q3": 10, "q5": 5, "q6": 1, "q10": 20, "q12": 2, "q14": 1, "q19": 1}
SCALE, ROUNDS = 0.01, 6                 # the quick preset's
LINEITEM_BYTES_PER_SF = 0.6e9           # lineitem.tbl is about 0.73 GB per unit of scale


@pytest.fixture(scope="module")
def quick(workspace_root):
    res = pgpathbench("run", "file-fdw-tpch", "--preset", "quick", "--layout", ",".join(LAYOUTS),
                      workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    rep = report_json(workspace_root)
    return res, rep, rep["run"]["environment"]["sessions"][-1]


def setup_of(session: dict) -> dict:
    """The study's set-up facts of PostgreSQL 15 in a session of the run's fingerprint."""
    return session["setup"]["15"]["file-fdw-tpch"]


def test_every_case_measured_with_the_checked_answer(quick):
    _, rep, _ = quick
    ms = rep["measurements"]
    assert all(m["ok"] for m in ms), [m["error"] for m in ms if not m["ok"]][:5]
    expected = {f"{q}:{s}:{la}:15" for q in QUERIES for s in STORAGES for la in LAYOUTS}
    assert Counter(m["case_id"] for m in ms) == {cid: ROUNDS for cid in expected}
    digests = defaultdict(set)
    for m in ms:
        d, mt = m["dims"], m["metrics"]
        assert set(d) == {"queries", "storage", "layout", "pg"}
        assert mt["rows"] == ROWS[d["queries"]]
        assert 0 < mt["duration_ms"] / 1000 <= m["duration_s"] < 60
        digests[d["queries"]].add(mt["answer"])
        if d["storage"] == "foreign" and d["queries"] in ("q1", "q6"):
            assert mt["bytes_scanned"] > LINEITEM_BYTES_PER_SF * SCALE and mt["mb_per_s"] == pytest.approx(
                mt["bytes_scanned"] / 1e6 / (mt["duration_ms"] / 1000), rel=0.01)
    # One answer per query, whatever the storage and layout.
    assert all(len(v) == 1 for v in digests.values()), digests


def test_answer_checks_passed_against_every_side_and_duckdb(quick):
    _, _, env = quick
    fp = setup_of(env)
    assert fp["duckdb"]["checked"] is True and fp["duckdb"]["version"].startswith("2.")
    assert set(fp["answers"]) == set(QUERIES)
    for q, a in fp["answers"].items():
        assert a["duckdb"] == "agrees", (q, a)
        assert sorted(a["agreeing"]) == sorted(f"{s}/{la}" for s in STORAGES for la in LAYOUTS), (q, a)
        assert a["rows"] == ROWS[q] and not a["unchecked"]


def slowdowns(rep) -> dict[tuple[str, str], float]:
    t = defaultdict(dict)
    for m in rep["measurements"]:
        d = m["dims"]
        t[(d["queries"], d["storage"], d["layout"])][m["round"]] = m["metrics"]["duration_ms"]
    return {(q, la): median(t[(q, "foreign", la)][r] / t[(q, "regular", la)][r] for r in range(1, ROUNDS + 1))
            for q in QUERIES for la in LAYOUTS}


def test_q6_slows_down_more_than_q1_through_file_fdw(quick):
    res, rep, _ = quick
    s = slowdowns(rep)
    for layout in LAYOUTS:
        assert s[("q6", layout)] > s[("q1", layout)], (layout, s[("q6", layout)], s[("q1", layout)])
        assert s[("q6", layout)] > 2
    # By how much is a timing claim: 1.47x once at these 6 rounds (4.54 / 3.08, 1.5x asserted before
    # 2026-12-01); bench/tpch_slowdowns.py measures the factor with its interval.
    out = res.stdout
    for layout in LAYOUTS:
        assert f"PG 15, {layout}: Q6 slowdown" in out
    assert "above Q1 slowdown" in out and "NOT above" not in out


def test_report_shows_every_query_storage_and_layout_beside_the_seed(quick, workspace_root):
    res, _, _ = quick
    out = res.stdout
    for title in ("TPC-H seconds per query", "Slowdown through file_fdw: foreign / regular",
                  "Parse rate of file_fdw", "Plans: join tree of each query on each side", "Answer checks",
                  "Data, load and settings", "Slowdown in the servers' user CPU: foreign / regular"):
        assert title in out
    # The published seconds are detail columns (--wide, markdown, HTML); the slowdowns they give
    # and the parse rate are on every terminal.
    wide = pgpathbench_main("report", "latest", "--wide", workspace=workspace_root)
    assert wide.returncode == 0, wide.stderr
    for published in ("311.3", "531.5", "218.8", "55.10", "56.90", "36.00"):
        assert published in wide.stdout
    for published in ("1.707", "11.76", "10.35", "36.00"):   # Q1, Q6 slowdowns (PostgreSQL, CitusDB), MB/s
        assert published in out
    for layout in LAYOUTS:   # six columns of figures: at 120 columns their headers wrap; --wide keeps them whole
        assert f"{layout} regular" in wide.stdout and f"{layout} foreign" in wide.stdout
    lines = out.splitlines()
    for q in QUERIES:
        for layout in LAYOUTS:
            # the slowdown tables (seconds, user CPU) and the plans table (and for Q1, Q6 the parse
            # rates) have one row each
            expected = 4 if q in ("q1", "q6") else 3
            assert sum(1 for line in lines if line.split()[:2] == [q.upper(), layout]) == expected, (q, layout)


def test_settings_load_figures_and_plans_recorded(quick):
    _, rep, env = quick
    fp = setup_of(env)
    assert fp["scale"] == SCALE and fp["partitions"] >= 1 and fp["files"]["lineitem"] > LINEITEM_BYTES_PER_SF * SCALE
    assert fp["load"]["bytes"] > sum(fp["files"].values()) and fp["load"]["mb_per_s"] > 1
    assert fp["generate"]["seconds"] > 0 and fp["analyze"]["seconds"] > 0
    assert fp["settings"]["layouts"]["partitioned"]["enable_partitionwise_join"] == "on"
    # the regular tables vacuumed once after the load, autovacuum off them: no worker during a measurement
    once = fp["loaded_once"]
    assert {"single_regular.lineitem", "partitioned_regular.lineitem_1", "partitioned_regular.orders_2"} <= set(once)
    assert "partitioned_regular.lineitem" not in once           # the parent holds no pages
    assert all(t == {"all_visible": 1.0, "autovacuum_off": True} for t in once.values()), \
        {name: t for name, t in once.items() if t != {"all_visible": 1.0, "autovacuum_off": True}}
    servers = env["servers"]
    assert {"pg15_tpch", *(f"pg15_worker{k}" for k in range(1, fp["partitions"] + 1))} == set(servers)
    settings = servers["pg15_tpch"]["settings"]
    assert settings["work_mem"] == "65536" and settings["shared_buffers"] == "262144"   # 64MB, 2GB in 8kB pages
    plans = fp["plans"]
    assert len(plans) == len(QUERIES) * 2 * 3
    assert "Foreign Scan" in plans["q6:foreign:single"]["text"] and "Seq Scan" in plans["q6:regular:single"]["text"]
    assert "Async Foreign Scan" in plans["q6:foreign:postgres_fdw"]["text"]
    assert plans["q1:regular:single"]["workers"] == 0


def test_no_server_survives(quick, workspace_root):
    assert our_processes(workspace_root) == []


def test_files_are_generated_once_per_scale_and_reused(quick, workspace_root):
    res = pgpathbench("run", "file-fdw-tpch", "--preset", "quick", "--queries", "6", "--layout", "single",
                      "--repeat", "1", workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-2000:]
    rep = report_json(workspace_root)
    fp = setup_of(rep["run"]["environment"]["sessions"][-1])
    assert fp["generate"]["cached"] is True and "generate_parts" not in fp
    assert len(rep["measurements"]) == 2 and all(m["ok"] for m in rep["measurements"])
    assert "generated" not in res.stderr


def test_a_query_past_temp_file_limit_fails_alone(workspace_root, tmp_path):
    """The run's cap on temporary files (spec.cluster_settings) stops a query that would spill past
    it, not the run: a sort of every l_comment spills at 64kB of work_mem and fails each round with
    the reason, Q6 (no spill) is measured. (The warm-up runs at the run's own settings: its side of
    this is a unit test.)"""
    spill = tmp_path / "spill.sql"
    spill.write_text("select count(*) from (select l_comment from lineitem order by l_comment offset 0) as s")
    res = pgpathbench("run", "file-fdw-tpch", "--preset", "quick", "--queries", "6", "--query-file",
                      f"spill={spill}", "--layout", "single", "--repeat", "1", "--set", "work_mem=64kB",
                      "--set", "temp_file_limit=64kB", workspace=workspace_root)
    assert res.returncode == 1 and "2 of 4 measurements failed" in res.stderr, res.stderr[-2000:]
    rep = report_json(workspace_root)
    by_query = defaultdict(list)
    for m in rep["measurements"]:
        by_query[m["dims"]["queries"]].append(m)
    assert all(m["ok"] for m in by_query["q6"]) and len(by_query["spill"]) == 2
    for m in by_query["spill"]:
        assert not m["ok"] and "temporary file size exceeds temp_file_limit (64kB)" in m["error"], m["error"]
        assert "--set temp_file_limit=SIZE raises it" in m["error"]
    assert our_processes(workspace_root) == []
