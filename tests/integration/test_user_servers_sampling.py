"""remote-sampling on servers pgpathbench does not manage (--server ROLE=DSN), as a user's would be.

The user's servers of tests/user_server.py (PostgreSQL 15): on 127.0.0.2 (scram, pg_stat_statements
in template1) and on 127.0.0.3 (TLS only, verify-full), the tool's login a non-superuser with
CREATEDB only. Two runs: both roles the user's (their postgres_fdw has no analyze_sampling: local
and off only), and a user's source behind a managed external of 17 (every analyze_sampling mode,
its remote SQL read back from the user's pg_stat_statements, which the tool may not reset).
Checked as for fdw-overhead: the figures; the user's rows, catalog and statistics as found; no
statement of ours outside our databases; nothing of ours left; no password anywhere we write or
show, nor on any command line.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main, report_json, run_watching_ps
from user_server import UserServer, source_and_external, use_passfile

pytestmark = pytest.mark.integration

# The cheapest matrix: one table of 10k rows, one fraction, target 10 (a sample of 3,000 rows).
QUICK = ("--preset", "quick", "--rows", "10k", "--fraction", "0.1", "--stats-target", "10", "--repeat", "2")
TABLESAMPLE = {"system": "TABLESAMPLE SYSTEM", "bernoulli": "TABLESAMPLE BERNOULLI", "auto": "TABLESAMPLE BERNOULLI",
               "random": "random() <"}


@pytest.fixture(scope="module")
def servers(workspace_root):
    with source_and_external(workspace_root / "user-servers-sampling") as pair:
        yield pair


def _stats_reset(server: UserServer) -> str:
    """When the user's pg_stat_statements was last reset (ours would move it); read where the DBA
    installed it, before or after a run (CREATE DATABASE needs template1 idle)."""
    with server.connect("dba", "template1") as conn:
        return str(conn.execute("SELECT stats_reset FROM pg_stat_statements_info").fetchone()[0])


def _run(ws, *args: str, users: tuple[UserServer, ...]):
    """The run, with the user's servers checked as found after it; its JSON report, result, ps lines."""
    before = {s.dsn(): s.known_objects() for s in users}
    for s in users:
        s.mark_log()
    res, cmdlines = run_watching_ps("run", "remote-sampling", *QUICK, *args, workspace=ws)
    assert res.returncode == 0, res.stderr[-3000:]
    for s in users:
        s.assert_as_found(before[s.dsn()])
    assert json.loads((ws / "user-objects.json").read_text()) == []
    run = report_json(ws)
    for m in run["measurements"]:
        assert m["error"] is None, (m["case_id"], m["error"])
    return run, res, cmdlines


def _assert_sampled(run: dict) -> None:
    """Every method sampled where its case says, through the FDW and directly."""
    for m in run["measurements"]:
        d, mt = m["dims"], m["metrics"]
        if d["test"] != "sampling":
            continue
        assert mt["rows_table"] == 10_000 and mt["duration_ms"] > 0
        if d["access"] == "direct":
            assert mt["rows_transferred"] == 0
        elif d["method"] == "full":   # everything sent, sampled on arrival
            assert mt["rows_transferred"] == 10_000 and "random()" in mt["local_filter"], mt
        else:                         # sampled on the source: only the sample crosses
            assert mt["rows_transferred"] == mt["rows_sampled"] < 2_500, mt
            assert mt["local_filter"] == "" and mt["remote_sql"].startswith("SELECT id, a, b, c, pad FROM public.v_")
            assert re.search(re.escape(TABLESAMPLE[d["method"]]), mt["remote_view_sql"], re.I), mt


def _assert_analyzed(run: dict, modes: set[str], recorded: bool = True) -> dict[str, str]:
    """ANALYZE of the table itself and through the FDW: sample sizes, statistics; the remote SQL by
    mode (recorded: the source has pg_stat_statements in our database; else it is missing, not wrong)."""
    remote = {}
    for m in run["measurements"]:
        d, mt = m["dims"], m["metrics"]
        if d["test"] != "analyze":
            continue
        slack = 0.35 if d["analyze_sampling"] == "system" else 0.15   # SYSTEM draws whole pages
        assert mt["rows_sampled"] == pytest.approx(3000, rel=slack), (m["case_id"], mt)
        assert {"ndistinct_error", "null_frac_error", "mcv_freq_error", "histogram_error"} <= set(mt)
        if d["analyze_sampling"] != "local" and recorded:
            remote[d["analyze_sampling"]] = mt["remote_sql"]   # every round's, read back alike
            assert "public.t_10k" in mt["remote_sql"], mt
        elif d["analyze_sampling"] != "local":
            remote[d["analyze_sampling"]] = None
            assert "remote_sql" not in mt, mt
    assert set(remote) == modes
    return remote


def _assert_no_secret(ws, secrets: list[str], res, cmdlines: list[str], run: dict) -> None:
    markdown = pgpathbench_main("report", "latest", "--format", "markdown", workspace=ws).stdout
    csv = pgpathbench_main("export", "latest", "--format", "csv", workspace=ws).stdout
    assert "| user server source |" in markdown
    text = json.dumps(run)
    for secret in secrets:
        for where, content in {"stdout": res.stdout, "stderr": res.stderr, "json": text, "markdown": markdown,
                               "csv": csv, "ps": "\n".join(cmdlines)}.items():
            assert secret not in content, where
    assert any("pgpathbench_" in c for c in cmdlines), "no backend of ours was ever seen"


@pytest.mark.parametrize("tls_source", [False, True], ids=["statements-source", "tls-source-no-statements"])
def test_remote_sampling_on_two_user_servers_leaves_them_as_found(servers, workspace_root, monkeypatch, tls_source):
    # tls_source: the roles swapped: postgres_fdw reaches the source by TLS (verify-full), which
    # has no pg_stat_statements: ANALYZE's remote SQL is missing, and the facts say why.
    src, ext = servers[::-1] if tls_source else servers
    ws = workspace_root / f"ws-user-sampling-{tls_source}"
    use_passfile(monkeypatch, workspace_root / "pgpass-sampling", ext)   # the source's password in its DSN
    reset = None if tls_source else _stats_reset(src)
    run, res, cmdlines = _run(ws, "--pg", "15", "--analyze-sampling", "local,off",
                              "--server", f"source={src.dsn()} password={src.password()}",
                              "--server", f"external={ext.dsn()}", users=servers)
    assert "warning: --server source: its DSN holds a password" in res.stderr
    assert "warning: the external server logs statements" in res.stderr   # the fixture logs all, app may not stop it
    assert len(run["measurements"]) == (4 * 2 + 2) * 2
    _assert_sampled(run)
    # PostgreSQL 15's postgres_fdw fetches every row and samples on arrival, read back from the
    # user's pg_stat_statements (never reset).
    remote = _assert_analyzed(run, {"off"}, recorded=not tls_source)
    text = json.dumps(run)
    assert '"user_source"' in text and '"user_external"' in text
    if tls_source:
        assert "ANALYZE's remote SQL will not be recorded: Unavailable: pg_stat_statements is not installed" in res.stderr
        assert '"analyze_remote_sql": "not recorded: Unavailable: pg_stat_statements is not installed' in text
    else:
        assert "TABLESAMPLE" not in remote["off"] and "random" not in remote["off"]
        assert _stats_reset(src) == reset
        assert "pg_stat_statements of the source database" in text   # where the remote SQL came from
    _assert_no_secret(ws, [src.password(), ext.password()], res, cmdlines, run)


def test_remote_sampling_from_a_managed_external_on_a_user_source(servers, workspace_root, monkeypatch):
    src, _ = servers
    ws = workspace_root / "ws-user-sampling-mixed"
    use_passfile(monkeypatch, workspace_root / "pgpass-sampling-mixed", src)
    reset = _stats_reset(src)
    run, res, cmdlines = _run(ws, "--pg", "17", "--server", f"source={src.dsn()}", users=(src,))
    _assert_sampled(run)
    # postgres_fdw 17 samples on the user's source, as each mode says.
    remote = _assert_analyzed(run, {"off", "auto", "random", "system", "bernoulli"})
    assert "TABLESAMPLE" not in remote["off"]
    for mode, clause in TABLESAMPLE.items():
        assert clause in remote[mode], (mode, remote[mode])
    assert _stats_reset(src) == reset
    _assert_no_secret(ws, [src.password()], res, cmdlines, run)


def test_analyze_sampling_is_refused_on_a_user_external_before_16(servers, workspace_root, monkeypatch):
    src, ext = servers
    ws = workspace_root / "ws-user-sampling-old"
    use_passfile(monkeypatch, workspace_root / "pgpass-sampling-old", src, ext)
    res = pgpathbench("run", "remote-sampling", "--preset", "quick", "--server", f"source={src.dsn()}",
                      "--server", f"external={ext.dsn()}", workspace=ws)
    assert_user_error(res, "--server external: its postgres_fdw (PostgreSQL 15) has no analyze_sampling", untouched=ws)
    assert src.ours() == [] and ext.ours() == []
