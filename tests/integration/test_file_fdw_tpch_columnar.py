"""Columnar storage on the stock layouts: partitioned and postgres_fdw (Citus's columnar access
method, citus_columnar only: these servers never preload citus, so their regular tables stay stock
PostgreSQL). TPC-H SF 0.01, Q1 and Q6 once each: the answers equal DuckDB's and the regular
side's, Q6 reads fewer bytes on columnar than on regular tables (partitioned), and the fingerprint records what
each server preloads.
"""

from __future__ import annotations

import pytest

from conftest import our_processes, pgpathbench, report_json
from pgpathbench.servers import citus
from pgpathbench.servers.binaries import resolve

pytestmark = pytest.mark.integration

QUERIES, LAYOUTS, STORAGES = ("q1", "q6"), ("partitioned", "postgres_fdw"), ("regular", "columnar")
ARGS = ["run", "file-fdw-tpch", "--preset", "quick", "--queries", ",".join(QUERIES),
        "--layout", ",".join(LAYOUTS), "--storage", ",".join(STORAGES), "--partitions", "2", "--repeat", "1"]


@pytest.fixture(scope="module")
def run(workspace_root):
    assert citus.find(resolve(15)) is not None, "Citus is not installed: make bootstrap (scripts/install-citus)"
    res = pgpathbench(*ARGS, workspace=workspace_root, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert our_processes(workspace_root) == []
    return report_json(workspace_root)


def setup(rep) -> dict:
    return rep["run"]["environment"]["sessions"][-1]["setup"]["15"]["file-fdw-tpch"]


def test_every_case_is_measured_and_every_answer_is_duckdbs(run):
    ms = run["measurements"]
    assert all(m["ok"] for m in ms) and {m["case_id"] for m in ms} == {
        f"{q}:{s}:{la}:15" for q in QUERIES for s in STORAGES for la in LAYOUTS}
    fp = setup(run)
    assert fp["duckdb"]["checked"] is True
    for q in QUERIES:
        a = fp["answers"][q]
        assert a["duckdb"] == "agrees" and not a["unchecked"], (q, a)
        assert {f"{s}/{la}" for s in STORAGES for la in LAYOUTS} <= set(a["agreeing"]), (q, a)


def test_columnar_reads_fewer_bytes_for_q6(run):
    """On partitioned; postgres_fdw's instances' reads are not in its coordinator's plan (the report
    says so), and there columnar and regular both read nothing of their own."""
    reads = setup(run)["reads"]
    regular, columnar = reads["q6:regular:partitioned"], reads["q6:columnar:partitioned"]
    assert 0 < columnar["buffer_bytes"] < regular["buffer_bytes"] / 2, (regular, columnar)
    assert reads["q6:columnar:postgres_fdw"]["buffer_bytes"] == reads["q6:regular:postgres_fdw"]["buffer_bytes"] == 0


def test_no_server_preloads_citus_and_each_records_its_build(run):
    servers = run["run"]["environment"]["sessions"][-1]["servers"]
    assert len(servers) >= 3, sorted(servers)   # the partitioned server, the coordinator and its instances
    tree = citus.tree_binaries() or resolve(15)
    for name, s in servers.items():
        assert s["preload"] == "" and "citus_settings" not in s, (name, s.get("preload"))
        assert s["bindir"] == str(tree.bindir), name
