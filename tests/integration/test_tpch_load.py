"""The TPC-H loader (datasets/tpch/load.py) against a real server set as file-fdw-tpch sets its
own, synchronous_commit = off: the VACUUM right after a load must find every page all-visible."""

from __future__ import annotations

import pytest

from conftest import started_cluster
from pgpathbench.datasets.tpch.load import Task, copy_slice


@pytest.fixture(scope="module")
def server(workspace_root):
    # a WAL writer that sleeps 10 s: an asynchronous commit stays unflushed until long after the VACUUM
    yield from started_cluster("tpch-load", workspace_root, {"synchronous_commit": "off",
                                                             "wal_writer_delay": "10s"})


def test_vacuum_after_the_load_marks_every_page_all_visible(server, tmp_path):
    tbl = tmp_path / "t.tbl"
    tbl.write_text("".join(f"{i}|row {i}|\n" for i in range(20_000)))
    server.execute("postgres", "CREATE TABLE loaded (id int, s text) WITH (autovacuum_enabled = off)")
    assert copy_slice(server.conninfo("postgres"), "loaded", tbl, 0, tbl.stat().st_size) == tbl.stat().st_size
    with server.connect() as conn:
        conn.execute("VACUUM loaded")
        visible, pages = conn.execute("SELECT relallvisible, relpages FROM pg_class "
                                      "WHERE relname = 'loaded'").fetchone()
        assert conn.execute("SELECT count(*) FROM loaded").fetchone()[0] == 20_000
    assert pages > 100 and visible == pages


def test_an_analyze_committed_beside_the_load_leaves_its_pages_markable(server, tmp_path):
    """clog keeps one commit LSN for each group of 32 transactions, its latest asynchronous commit's,
    and a row's commit hint waits for the WAL up to it: an ANALYZE task committed asynchronously in
    the load's group, just before the VACUUM (the load's ANALYZE phase), left every page unmarked
    (0 of 345 pages, 6 tries of 6 by hand) until the WAL writer's next flush. The tasks commit
    synchronously."""
    tbl = tmp_path / "g.tbl"
    tbl.write_text("".join(f"{i}|row {i}|\n" for i in range(20_000)))
    server.execute("postgres", "CREATE TABLE grouped (id int, s text) WITH (autovacuum_enabled = off);"
                   "CREATE TABLE other (id int) WITH (autovacuum_enabled = off);"
                   "INSERT INTO other SELECT generate_series(1, 100)")   # no autovacuum commit in the group
    ci = server.conninfo("postgres")
    with server.connect() as conn:   # the next transaction id the first of a group of 32
        while (conn.execute("SELECT txid_current()").fetchone()[0] + 1) % 32:
            pass
    copy_slice(ci, "grouped", tbl, 0, tbl.stat().st_size)
    Task("analyze", ci, sql="ANALYZE other").run()   # its transaction id in the load's group
    Task("analyze", ci, sql="VACUUM (FREEZE) grouped").run()
    with server.connect() as conn:
        visible, pages = conn.execute("SELECT relallvisible, relpages FROM pg_class "
                                      "WHERE relname = 'grouped'").fetchone()
    assert pages > 100 and visible == pages
