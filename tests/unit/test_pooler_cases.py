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


def _pooler(tmp_path, server, tls_files=None):
    from pgpathbench.servers.pgbouncer import Pooler
    return Pooler("pg15_local_pgbouncer_tls", tmp_path, None, server, tls=tls_files,
                  root_cert=tmp_path / "ca.crt" if tls_files else None, port=6432)


def test_both_legs_in_the_config(tmp_path):
    """--tls on: clients must come by TLS, the pooler verifies its server over TCP; off: neither, by the socket;
    in front of a user's server the server leg is the DSN's (its CA a copy the pooler can read)."""
    from types import SimpleNamespace
    from pgpathbench.servers.tls import ServerFiles
    managed = SimpleNamespace(managed=True, netns=None, tcp_host="127.0.0.1", self_host="127.0.0.1", port=5433,
                              sockdir=tmp_path / "s", name="pg15_local")
    files = ServerFiles(tmp_path / "p.crt", tmp_path / "p.key")
    on, off = _pooler(tmp_path, managed, files), _pooler(tmp_path, managed)
    on.serve("iftest", "session")
    off.serve("iftest", "session")
    ini = on.config()
    assert "iftest__session = host=127.0.0.1 port=5433 dbname=iftest user=pgpathbench pool_mode=session" in ini
    assert "client_tls_sslmode = require\n" in ini and "server_tls_sslmode = verify-full\n" in ini
    assert f"server_tls_ca_file = {tmp_path / 'ca.crt'}\n" in ini and f"client_tls_key_file = {files.key}\n" in ini
    assert "password" not in ini   # the server's secret is the auth file's
    assert "_tls_sslmode" not in off.config() and f"host={tmp_path / 's'} port=5433" in off.config()
    dsn = SimpleNamespace(params={"host": "db1", "sslmode": "verify-full", "sslrootcert": "/x/ca.pem"})
    theirs = SimpleNamespace(managed=False, netns=None, tcp_host="db1", port=5432, user="app", dsn=dsn,
                             name="local", dbname=lambda n: f"pgpathbench_ab12_{n}")
    user_pooler = _pooler(tmp_path, theirs)
    user_pooler.serve("iftest", "transaction")
    user_ini = user_pooler.config()
    assert "iftest__transaction = host=db1 port=5432 dbname=pgpathbench_ab12_iftest user=app " in user_ini
    assert "server_tls_sslmode = verify-full\n" in user_ini and "client_tls" not in user_ini
    assert f"server_tls_ca_file = {tmp_path / 'server_ca.crt'}\n" in user_ini and "admin_users = app\n" in user_ini


def test_logins_seen_from_the_pooler_log(tmp_path):
    pooler = _pooler(tmp_path, None)
    pooler.logfile.write_text(
        "2026-11-28 05:17:02.719 UTC [1] LOG C-0x1: pgbouncer/pgpathbench@unix(2):6432 login attempt: db=pgbouncer "
        "user=pgpathbench tls=no\n")
    offset = pooler.log_offset()
    with pooler.logfile.open("a") as f:
        f.write("2026-11-28 05:17:02.799 UTC [1] LOG C-0x2: a__session/pgpathbench@127.0.0.1:45146 login attempt: "
                "db=a__session user=pgpathbench tls=TLSv1.3/TLS_AES_256_GCM_SHA384\n"
                "2026-11-28 05:17:02.800 UTC [1] LOG C-0x3: a__session/pgpathbench@127.0.0.1:45147 login attempt: "
                "db=a__session user=pgpathbench tls=no\n"
                "2026-11-28 05:17:02.801 UTC [1] LOG C-0x4: b__session/pgpathbench@127.0.0.1:45148 login attempt: "
                "db=b__session user=pgpathbench tls=no\n")
    assert pooler.logins_seen(offset, "a__session") == ["TLSv1.3 TLS_AES_256_GCM_SHA384", "off"]
    assert pooler.logins_seen(0, "pgbouncer") == ["off"]
