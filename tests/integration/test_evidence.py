"""Evidence of what real servers did during one measurement (pgpathbench.evidence).

The case: a separate connection to `work` runs 50 single-row SELECTs in autocommit and 10 INSERTs,
each in an explicit transaction, then disconnects; its counters must appear exactly in the
evidence, with server CPU, sampled wait events, and nothing of ours left connected afterwards.
Autovacuum is off: a worker visiting `work` would add its own commits.
"""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest

from conftest import cpu_bound_ms
from pgpathbench.evidence import Watched, collected, summary
from pgpathbench.procs import OsUser
from pgpathbench.servers import binaries
from pgpathbench.servers.cluster import Cluster
from pgpathbench.servers.postmaster import postmaster_pid

pytestmark = pytest.mark.integration

PSS = {"shared_preload_libraries": "pg_stat_statements", "autovacuum": "off"}
SELECTS, INSERTS = 50, 10
PREPARE_THRESHOLD = 5  # psycopg's default, pinned: the expectation below depends on it
# One commit per autocommit SELECT and per explicit transaction, plus one for the catalog
# transaction every backend runs at start-up (InitPostgres), plus one for psycopg preparing the
# SELECT at its 6th execution (Parse + Sync outside a transaction; the INSERT is prepared inside
# its explicit one). Measured: a bare connect adds 1, 50 SELECTs unprepared 50, prepared 51.
EXPECTED_COMMITS = 1 + SELECTS + 1 + INSERTS


def make_cluster(root, name: str, major: int, settings: dict) -> Cluster:
    c = Cluster(name, root / name, binaries.resolve(major, workspace=root), OsUser.for_servers(),
                settings=settings)
    c.start()
    c.execute("postgres", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    c.create_database("work")
    c.execute("work", "CREATE TABLE t (id int PRIMARY KEY, v text)",
              "INSERT INTO t SELECT i, 'row ' || i FROM generate_series(1, 100) AS i")
    return c


@pytest.fixture(scope="module")
def clusters(workspace_root):
    made = {}
    try:
        # Only 15 times its WAL flushes: the evidence holds their time where it is measured.
        made[15] = make_cluster(workspace_root, "ev15", 15, {**PSS, "track_wal_io_timing": "on"})
        started = time.monotonic()
        made[17] = make_cluster(workspace_root, "ev17", 17, PSS)
        print(f"\nPG 17 cluster (bundle resolve + initdb + start): {time.monotonic() - started:.1f} s")
        # Extension created but not preloaded: querying it fails, which must cost only that section.
        made["plain"] = make_cluster(workspace_root, "evplain", 15, {"autovacuum": "off"})
        yield made
    finally:
        for c in made.values():
            c.remove()


def watched(c: Cluster, role: str = "source", visible: bool = True) -> Watched:
    return Watched(role, c.connect, postmaster_pid(c.data) if visible else None, ("work",))


def run_case(c: Cluster) -> None:
    with psycopg.connect(c.conninfo("work"), autocommit=True, prepare_threshold=PREPARE_THRESHOLD) as conn:
        for i in range(SELECTS):
            conn.execute("SELECT * FROM t WHERE id = %s", (i % 100 + 1,))
        for i in range(INSERTS):
            with conn.transaction():
                conn.execute("INSERT INTO t (id, v) VALUES (%s, %s)", (1000 + i, "new"))
            # the session outlasts two sampling intervals (1 s), and is seen between statements too
            time.sleep(0.1)


def others_connected(c: Cluster, timeout_s: float = 2.0) -> tuple[int, float]:
    """Client backends other than this check's, once they had timeout_s to finish exiting."""
    started = time.monotonic()
    with c.connect() as conn:
        while True:
            n = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                             "AND pid <> pg_backend_pid()").fetchone()[0]
            if n == 0 or time.monotonic() - started > timeout_s:
                return n, (time.monotonic() - started) * 1000


def measure(c: Cluster, **kw) -> tuple[dict, float, object]:
    started = time.monotonic()
    with collected([watched(c, **kw)]) as ev:
        run_case(c)
    wall_ms = (time.monotonic() - started) * 1000
    json.dumps(ev.data)  # JSON-able as it is
    print(f"\n{c.name}: wall {wall_ms:.0f} ms, timings {ev.timings}\n{json.dumps(ev.data, indent=1)}")
    return ev.data, wall_ms, ev


def check_full_record(c: Cluster, major: int) -> None:
    data, wall_ms, _ = measure(c)
    assert set(data["missing"]) <= {"source.io", "source.wal"}, data["missing"]
    src = data["servers"]["source"]
    db = src["database"]
    assert db["xact_commit"] == EXPECTED_COMMITS and db["xact_rollback"] == 0
    assert db["tup_inserted"] == INSERTS and db["tup_updated"] == 0 and db["tup_deleted"] == 0
    assert db["temp_files"] == 0 and db["temp_bytes"] == 0
    by_query = {s["query"]: s for s in src["statements"]}
    select = by_query["SELECT * FROM t WHERE id = $1"]
    assert (select["calls"], select["rows"]) == (SELECTS, SELECTS)
    assert by_query["INSERT INTO t (id, v) VALUES ($1, $2)"]["calls"] == INSERTS
    assert not any("pgpathbench-evidence" in q or "pg_stat_" in q for q in by_query)
    assert [s["calls"] for s in src["statements"]] == sorted((s["calls"] for s in src["statements"]), reverse=True)
    cpu = src["cpu_ms"]["user"] + src["cpu_ms"]["system"]
    assert 0 < src["cpu_window_ms"] <= wall_ms   # its snapshots lie inside the test's clock
    assert 0 <= cpu <= cpu_bound_ms(src)
    assert src["waits"]["samples"] > 0
    assert abs(sum(src["waits"]["shares"].values()) - 1) < 1e-9
    assert src["wal"]["wal_records"] >= INSERTS and src["wal"]["wal_bytes"] > 0
    assert src["wal"]["wal_sync"] >= INSERTS   # each commit flushes, 0.1 s apart
    assert ("wal_sync_time_us" in src["wal"]) == (major == 15)
    assert src["wal"].get("wal_sync_time_us", 1) > 0   # 10 flushes take more than 1 us
    if major >= 16:
        assert set(src["io"]) == {"reads", "writes", "extends", "hits", "evictions", "fsyncs"}
        assert src["io"]["hits"] > 0
    else:
        assert src["io"]["source"] == "pg_stat_bgwriter"
    left, waited_ms = others_connected(c)
    print(f"{c.name}: our connections gone {waited_ms:.0f} ms after collected() ended")
    assert left == 0, "a connection of ours (or the case's) is still there"
    assert not [t for t in threading.enumerate() if t.name.startswith("evidence-waits")]
    got = summary(data, transactions=SELECTS + INSERTS)
    assert got["remote_statements"]["source"] >= SELECTS + INSERTS


def test_pg15_full_record(clusters):
    check_full_record(clusters[15], 15)


def test_pg17_full_record_with_pg_stat_io(clusters):
    check_full_record(clusters[17], 17)


def test_temporary_files_are_counted(clusters):
    """A sort past work_mem spills to a temporary file: the database deltas count it (a file-fdw-tpch
    warm-up at SF 10 filled the disk with such files)."""
    c = clusters[15]
    with collected([watched(c)]) as ev:
        with psycopg.connect(c.conninfo("work"), autocommit=True) as conn:
            conn.execute("SET work_mem = '64kB'")
            conn.execute("SELECT i FROM generate_series(1, 200000) AS i ORDER BY i DESC").fetchall()
    db = ev.data["servers"]["source"]["database"]
    assert db["temp_files"] >= 1 and db["temp_bytes"] >= 1_000_000, db


def test_unloaded_statements_and_invisible_host_lose_only_their_sections(clusters):
    data, _, _ = measure(clusters["plain"], role="remote", visible=False)
    missing = data["missing"]
    assert set(missing) == {"remote.statements", "remote.evictions", "remote.cpu_ms"}, missing
    assert "shared_preload_libraries" in missing["remote.statements"]
    assert missing["remote.cpu_ms"] == "host processes not visible"
    assert all("\n" not in reason for reason in missing.values())
    remote = data["servers"]["remote"]
    assert set(remote) == {"database", "io", "wal", "waits"}
    assert remote["database"]["tup_inserted"] == INSERTS


def test_extension_absent_in_the_maintenance_database(clusters):
    c = clusters[15]
    w = Watched("source", lambda: c.connect("work"), postmaster_pid(c.data), ("work",))
    with collected([w]) as ev:
        pass
    assert set(ev.data["missing"]) == {"source.statements", "source.evictions"}
    assert "not installed in database work" in ev.data["missing"]["source.statements"]


def test_our_own_queries_are_not_the_case_s(clusters):
    """Watching the maintenance database itself: none of our snapshot, settle or sampling
    queries may appear as the case's statements."""
    c = clusters[15]
    with collected([Watched("source", c.connect, postmaster_pid(c.data), ("postgres",))], 0.01) as ev:
        time.sleep(0.1)
    assert ev.data["missing"] == {}
    assert ev.data["servers"]["source"]["statements"] == []
    assert ev.data["servers"]["source"]["waits"]["samples"] >= 5


def test_unreachable_server_and_failing_body(clusters):
    def refuse():
        raise psycopg.OperationalError("connection refused\nsecond line")

    with collected([Watched("gone", refuse, None, ("work",))]) as ev:
        pass
    missing = ev.data["missing"]
    assert set(missing) == {f"gone.{s}" for s in ("database", "io", "wal", "statements", "evictions", "cpu_ms", "waits")}
    assert missing["gone.database"] == "cannot connect: OperationalError: connection refused"
    assert ev.data["servers"]["gone"] == {}
    with pytest.raises(RuntimeError, match="case failed"):
        with collected([watched(clusters[15])]):
            raise RuntimeError("case failed")
    assert not [t for t in threading.enumerate() if t.name.startswith("evidence-waits")]
    assert others_connected(clusters[15])[0] == 0
