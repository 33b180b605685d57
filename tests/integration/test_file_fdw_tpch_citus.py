"""file-fdw-tpch's citus layout and columnar storage on managed servers: the single and citus layouts
on the regular, foreign and columnar storages, TPC-H SF 0.01 (DuckDB checks every answer), 4 shards
on one worker, on pgpathbench's own PostgreSQL with Citus (scripts/install-citus: make bootstrap).

One run, stopped by SIGTERM part way and resumed (the resume starts every server again, re-creates
every table and shard, and measures only what is missing), proves: the answers equal DuckDB's on
every layout and storage; Q1 on citus runs a partial aggregate on each of the 4 shards, and on the
foreign storage a Foreign Scan of each shard's own file; Q6 reads fewer bytes on columnar than on
regular tables; every managed server runs the one build with Citus, only the citus layout's nodes
preload citus; Citus's links between nodes are TLS.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest

from conftest import our_processes, pgpathbench, pgpathbench_main, report_json, spawn_pgpathbench
from pgpathbench.servers import citus
from pgpathbench.servers.binaries import resolve

pytestmark = pytest.mark.integration

# The seed's scans (Q1, Q6), its largest join (Q5: lineitem and orders co-located, four reference
# tables) and a co-located join alone (Q12): half the seed's queries, half the test's time.
QUERIES = ("q1", "q5", "q6", "q12")
LAYOUTS, STORAGES, SHARDS = ("single", "citus"), ("regular", "foreign", "columnar"), 4
CASES = len(QUERIES) * len(LAYOUTS) * len(STORAGES)
ARGS = ["run", "file-fdw-tpch", "--preset", "quick", "--queries", ",".join(QUERIES), "--scale", "0.01",
        "--layout", ",".join(LAYOUTS),
        "--storage", ",".join(STORAGES), "--partitions", str(SHARDS), "--repeat", "1"]
SERVERS = ("pg15_tpch", "pg15_coordinator", "pg15_citus_worker1")


def stored_measurements(proc, count: int, timeout: float = 900) -> None:
    """Read the progress lines ('[k/n] round ...') until `count` measurements are stored."""
    deadline, seen = time.monotonic() + timeout, 0
    while seen < count:
        assert time.monotonic() < deadline, "run made no progress"
        line = proc.stderr.readline()
        assert line, f"run ended early: {proc.wait()}"
        seen += line.startswith("[") and "round" in line


@pytest.fixture(scope="module")
def resumed(workspace_root):
    assert citus.find(resolve(15)) is not None, "Citus is not installed: make bootstrap (scripts/install-citus)"
    t0 = time.monotonic()
    proc = spawn_pgpathbench(*ARGS, workspace=workspace_root)
    stored_measurements(proc, CASES // 3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert our_processes(workspace_root) == []
    first = report_json(workspace_root)
    res = pgpathbench("run", "--resume", first["run"]["run_id"], workspace=workspace_root, timeout=1800)
    assert res.returncode == 0, res.stderr[-3000:]
    print(f"\ncitus run, stopped and resumed: {time.monotonic() - t0:.0f} s")
    return first, res, report_json(workspace_root, first["run"]["run_id"])


def setup(rep, session: int = -1) -> dict:
    return rep["run"]["environment"]["sessions"][session]["setup"]["15"]["file-fdw-tpch"]


def test_resume_re_creates_everything_and_measures_only_what_is_missing(resumed, workspace_root):
    first, res, rep = resumed
    before = len(first["measurements"])
    assert 0 < before < CASES and f"{before} of {CASES} measurements already stored" in res.stderr
    ms = rep["measurements"]
    assert all(m["ok"] for m in ms), [(m["case_id"], m["error"]) for m in ms if not m["ok"]][:5]
    assert Counter(m["case_id"] for m in ms) == {f"{q}:{s}:{la}:15": 1 for q in QUERIES for s in STORAGES
                                                 for la in LAYOUTS}
    assert Counter(m["session"] for m in ms) == {1: before, 2: CASES - before}
    again = setup(rep)     # the second session made its servers, tables and shards anew
    assert len(again["citus"]["shard_files"]) == 2 * SHARDS + 6 * 2   # lineitem, orders; 6 reference tables x 2 nodes
    assert all(f["bytes"] > 0 for f in again["citus"]["shard_files"])
    assert our_processes(workspace_root) == []


def test_every_answer_is_duckdbs_on_every_layout_and_storage(resumed):
    fp = setup(resumed[2])
    assert fp["duckdb"]["checked"] is True
    for q in QUERIES:
        a = fp["answers"][q]
        assert a["duckdb"] == "agrees" and not a["unchecked"], (q, a)
        assert sorted(a["agreeing"]) == sorted(f"{s}/{la}" for s in STORAGES for la in LAYOUTS), (q, a)
    assert len({m["metrics"]["answer"] for m in resumed[2]["measurements"] if m["dims"]["queries"] == "q1"}) == 1


def test_q1_on_citus_aggregates_on_each_shard_and_reads_each_shards_file(resumed):
    plans = setup(resumed[2])["plans"]
    worker = next(n for n in setup(resumed[2])["citus"]["nodes"] if n["group"] != 0)
    for storage, scan in (("regular", "Seq Scan"), ("foreign", "Foreign Scan"), ("columnar", "Custom Scan")):
        tasks = plans[f"q1:{storage}:citus"]["tasks"]
        assert len(tasks) == SHARDS and {t["node"] for t in tasks} == {f"{worker['host']}:{worker['port']}"}
        assert all(t["top"] == "Aggregate (Hashed)" for t in tasks), tasks   # the partial aggregate, per shard
        shards = [s for t in tasks for s in t["scans"]]
        assert len(set(shards)) == SHARDS and all(s.startswith(f"{scan} lineitem_") for s in shards), shards
    assert plans["q1:foreign:citus"]["text"].count("Foreign File: ") == SHARDS


def test_columnar_reads_fewer_bytes_for_q6(resumed):
    reads = setup(resumed[2])["reads"]
    for layout in LAYOUTS:
        regular, columnar = reads[f"q6:regular:{layout}"], reads[f"q6:columnar:{layout}"]
        assert 0 < columnar["buffer_bytes"] < regular["buffer_bytes"] / 2, (layout, regular, columnar)
        assert reads[f"q6:foreign:{layout}"]["file_bytes"] > regular["buffer_bytes"] / 2   # the text parsed


def test_one_build_for_every_server_and_citus_preloaded_on_its_nodes_only(resumed):
    servers = resumed[2]["run"]["environment"]["sessions"][-1]["servers"]
    assert set(servers) == set(SERVERS)
    tree = citus.tree_binaries() or resolve(15)
    for name in SERVERS:
        s = servers[name]
        assert s["bindir"] == str(tree.bindir) and s["version"] == servers["pg15_tpch"]["version"], name
        assert s["preload"] == ("" if name == "pg15_tpch" else "citus"), name
        assert ("citus_settings" in s) == (name != "pg15_tpch") == (s.get("citus") == citus.tree_facts()["citus_extension"]), name
    assert servers["pg15_coordinator"]["citus_settings"]["citus.node_conninfo"] == "sslmode=require"
    links = setup(resumed[2])["citus"]["links"]
    assert links and all(link["connections"] > 0 and all(t["ssl"] for t in link["tls"]) for link in links), links
    assert json.dumps(resumed[2]).count(tree.origin) >= len(SERVERS)


def test_the_report_says_where_each_layout_ran_and_what_columnar_read(resumed, workspace_root):
    run_id = resumed[2]["run"]["run_id"]
    md = pgpathbench_main("report", run_id, "--format", "markdown", workspace=workspace_root).stdout
    for title in ("Where each layout ran each query: its plan on its nodes",
                  "Columnar against regular tables and file_fdw: bytes read and seconds per query",
                  "The Citus cluster: nodes, links, shards", "Slowdown through file_fdw: foreign / regular"):
        assert f"### {title}" in md, title
    assert "| Q1 | citus | regular | 15 | 4 tasks: worker1 x4 | Aggregate (Hashed) over Seq Scan lineitem (x4) |" in md
    assert "| Q5 | citus | regular | 15 | 4 tasks: worker1 x4 | Aggregate (" in md
    assert "| Q1 | citus | foreign | 15 | 4 tasks: worker1 x4 | Aggregate (Hashed) over Foreign Scan lineitem (x4) |" in md
    assert "| citus foreign |" in md and "| single columnar |" in md and "| 55.10 | 109.2 |" in md   # seed's CitusDB Q1
    assert "TLSv1.3" in md
