"""PgBouncer as a hop, without servers: the cases --via, --pool-mode and --fdw-via make (direct cases keep
their ids, what needs a session is excluded under transaction pooling), the paths' ids, and the pooler's
figures from SHOW STATS / SHOW POOLS rows (evidence/pooler.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pgpathbench.evidence import pooler
from pgpathbench.matrix import StudyOptions
from pgpathbench.report.compare import pair_cases
from pgpathbench.results.model import RunResult
from pgpathbench.servers.paths import NetworkPath, hop_text
from pgpathbench.studies import STUDIES

FDW, INTERFACES = STUDIES["fdw-overhead"], STUDIES["interfaces"]


def fdw_ids(**dims) -> set[str]:
    base = {**FDW.default_dims, "workload": ("ro",), "clients": ("1",), **dims}
    return {c.case_id for c in FDW.cases(StudyOptions(FDW.name, "quick", 3, {}, base))}


def test_direct_cases_keep_their_ids():
    assert fdw_ids(target=("local", "fdw_external")) == {"ro:local:1:0ms:15:simple", "ro:fdw_external:1:0ms:15:simple"}


def test_pooled_cases_and_their_exclusions():
    ids = fdw_ids(target=("local", "fdw_external"), via=("direct", "pgbouncer"), fdw_via=("direct", "pgbouncer"),
                  pool_mode=("session", "transaction"), protocol=("simple", "prepared"))
    assert "ro:local:1:0ms:15:prepared:pgbouncer:session" in ids
    assert not any("prepared" in i and "transaction" in i for i in ids), "prepared needs a session"
    assert not any(i.startswith("ro:local") and i.endswith(":pgbouncer") for i in ids), "local has no FDW hop"
    assert "ro:fdw_external:1:0ms:15:simple:transaction:pgbouncer" in ids        # the FDW hop's pooler only
    assert "ro:fdw_external:1:0ms:15:simple:pgbouncer:transaction:pgbouncer" in ids
    assert not any(i.endswith(":-") or ":-:" in i for i in ids), "the '-' pool mode is quiet"
    # local: direct x 2 protocols, pooled (session x 2 protocols, transaction x simple); FDW: direct x 2
    # protocols, and the 3 pooled ones through the client's pooler, the FDW hop's, and both
    assert len(ids) == 5 + 2 + 3 * 3


def test_fdw_via_not_behind_an_emulated_link():
    ids = fdw_ids(target=("fdw_external",), latency=("0ms", "5ms"), fdw_via=("direct", "pgbouncer"),
                  pool_mode=("session",))
    assert "ro:fdw_external:1:5ms:15:simple:session:pgbouncer" not in ids
    assert "ro:fdw_external:1:0ms:15:simple:session:pgbouncer" in ids


def test_interfaces_session_clients_not_in_transaction_mode():
    dims = {**INTERFACES.default_dims, "method": ("normal",), "transport": ("tcp",), "sqlstrat": ("sql001:once",),
            "output": ("p-all:file",), "via": ("direct", "pgbouncer"), "pool_mode": ("session", "transaction")}
    ids = {c.case_id for c in INTERFACES.cases(StudyOptions(INTERFACES.name, "quick", 3, {}, dims))}
    base = "normal:-:tcp:sql001:once:p-all:file:0ms:15"
    assert {f"{i}:{base}" for i in ("libpq", "odbc", "jdbc", "psycopg")} <= ids
    assert {f"libpq:{base}:pgbouncer:transaction", f"odbc:{base}:pgbouncer:transaction",
            f"jdbc:{base}:pgbouncer:session", f"psycopg:{base}:pgbouncer:session"} <= ids
    assert f"jdbc:{base}:pgbouncer:transaction" not in ids and f"psycopg:{base}:pgbouncer:transaction" not in ids
    assert len(ids) == 4 + 4 + 2


def test_path_ids_carry_the_hops():
    assert NetworkPath("15", "source").id == "pg15_source_0ms"
    path = NetworkPath("15", "source", "0ms", ("pgbouncer-transaction", "fdw-pgbouncer-session"))
    assert path.id == "pg15_source_0ms_pgbouncer-transaction_fdw-pgbouncer-session"
    assert path.describe({path.id: 0.25}) == "direct + PgBouncer (transaction) + FDW via PgBouncer (session), 0.25 ms"
    assert hop_text("pgbouncer-session") == "PgBouncer (session)"


def test_figures_from_the_counters():
    before = {"stats": {"total_xact_count": Decimal(10), "total_query_count": Decimal(12), "total_xact_time": 1000,
                        "total_query_time": 900, "total_wait_time": 0, "total_received": 5, "total_sent": 7},
              "pools": {"sv_idle": 1}}
    after = {"stats": {"total_xact_count": Decimal(410), "total_query_count": Decimal(412), "total_xact_time": 201000,
                       "total_query_time": 180900, "total_wait_time": 3000, "total_received": 50, "total_sent": 70},
             "pools": {"sv_idle": 1, "sv_used": 1, "sv_active": 0, "cl_waiting": 2, "maxwait": 1, "maxwait_us": 500,
                       "pool_mode": "transaction"}}
    rec = pooler.record(before, after)
    assert rec["stats_delta"]["total_xact_count"] == 400 and rec["pool_mode"] == "transaction"
    f = pooler.figures(rec, pooler.CLIENT_PREFIX)
    assert f["pooler_transactions"] == 400 and f["pooler_queries"] == 400
    assert f["pooler_server_connections"] == 2 and f["pooler_xacts_per_server_connection"] == 200
    assert f["pooler_avg_xact_ms"] == pytest.approx(0.5) and f["pooler_avg_query_ms"] == pytest.approx(0.45)
    assert f["pooler_wait_ms"] == 3 and f["pooler_cl_waiting"] == 2 and f["pooler_maxwait_ms"] == pytest.approx(1000.5)
    assert set(f) <= {m.name for m in pooler.METRICS}


def _run(run_id: str, pooled: bool, tps: list[float]) -> RunResult:
    """A stored fdw-overhead run of two cases, direct (dims as runs before --via stored them) or pooled."""
    ms = []
    for target in ("local", "fdw_external"):
        dims = {"workload": "ro", "target": target, "clients": "1", "latency": "0ms", "pg": "15", "protocol": "simple"}
        if pooled:
            dims |= {"via": "pgbouncer", "pool_mode": "transaction", "fdw_via": "direct"}
        case_id = ":".join(v for k, v in dims.items() if k != "fdw_via")
        ms += [{"study": FDW.name, "case_id": case_id, "dims": dims, "round": r, "ok": True, "metrics": {"tps": v}}
               for r, v in enumerate(tps, 1)]
    return RunResult.from_rows({"run_id": run_id, "studies": [FDW.name], "options": {"model_version": 2}}, [], ms, [])


def test_compare_pairs_runs_that_differ_only_in_the_hop():
    direct, pooled = _run("A", False, [40, 41, 42, 43]), _run("B", True, [400, 410, 420, 430])
    pairing = pair_cases(direct, pooled, STUDIES)
    assert [(a.case_id, b.case_id) for a, b in pairing.pairs] == [
        ("ro:local:1:0ms:15:simple", "ro:local:1:0ms:15:simple:pgbouncer:transaction"),
        ("ro:fdw_external:1:0ms:15:simple", "ro:fdw_external:1:0ms:15:simple:pgbouncer:transaction")]
    assert pairing.knobs == {"via": (("direct",), ("pgbouncer",)), "pool_mode": (("-",), ("transaction",))}
