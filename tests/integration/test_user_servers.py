"""fdw-overhead on servers pgpathbench does not manage (--server ROLE=DSN), as a user's would be.

Two servers of the user (tests/user_server.py): on 127.0.0.2 (scram, pg_stat_statements in
template1) and on 127.0.0.3 (TLS only, verify-full), each holding the user's table, the tool's
login a non-superuser with CREATEDB only. Checked: the measured figures; the user's rows and
catalog unchanged; no statement by the tool's login outside its own databases (log_statement =
all); nothing of the tool left after the run, after SIGTERM, after SIGKILL + clean; no password in
the results, exports, reports, the tool's output or any process's command line; bad input refused
in one line with nothing written.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main, report_json, run_watching_ps, spawn_pgpathbench
from pgpathbench.errors import ServerRefused
from pgpathbench.servers.ledger import MARK, Ledger
from pgpathbench.servers.user import parse_server
from pgpathbench.tools import pgbench
from user_server import UserServer, assert_no_secret, expected_fingerprint, source_and_external, use_passfile


@pytest.fixture(scope="module")
def servers(workspace_root):
    with source_and_external(workspace_root / "user-servers") as pair:
        yield pair


def _args(src: UserServer, ext: UserServer, *extra: str) -> list[str]:
    return ["run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--repeat", "2",
            "--server", f"source={src.dsn()} password={src.password()}", "--server", f"external={ext.dsn()}", *extra]


def test_fdw_overhead_on_two_user_servers_leaves_them_as_found(servers, workspace_root, monkeypatch):
    src, ext = servers
    ws = workspace_root / "ws-user-run"
    use_passfile(monkeypatch, workspace_root / "pgpass", ext)   # the external's password by a file, the source's in its DSN
    before = {s.dsn(): s.known_objects() for s in servers}
    src.mark_log()
    ext.mark_log()
    res, cmdlines = run_watching_ps(*_args(src, ext), workspace=ws)
    assert res.returncode == 0, res.stderr
    assert "warning: --server source: its DSN holds a password" in res.stderr
    secrets = [src.password(), ext.password()]

    run = report_json(ws)
    by_target = {}
    for m in run["measurements"]:
        assert m["error"] is None, m["error"]
        by_target.setdefault(m["dims"]["target"], []).append(m)
    assert set(by_target) == {"local", "fdw_local", "fdw_external", "fdw_external_ro"}
    assert all(m["metrics"]["tps"] > 0 and m["metrics"]["transactions"] > 0 for ms in by_target.values() for m in ms)
    # Counted by the user's pg_stat_statements, which we may not reset: on 15 each DECLARE keeps its
    # constant, so once its entries are full (20,000 on this fixture), evictions void a pass's count
    # (said, not guessed).
    remote = by_target["fdw_external"] + by_target["fdw_external_ro"]
    counted = [m["metrics"]["remote_statements_per_txn"] for m in remote if "remote_statements_per_txn" in m["metrics"]]
    assert counted and all(4 <= c < 8 for c in counted), (counted, [m["evidence"]["missing"] for m in remote])
    assert all("evicted" in m["evidence"]["missing"]["source.statement_pass"]
               for m in remote if "remote_statements_per_txn" not in m["metrics"])
    # The real link from here, and the FDW hop from the external server, probed every round.
    probes = {}
    for p in run["link_probes"]:
        probes.setdefault(p["link"], []).append(p["rtt_median_ms"])
    assert set(probes) == {"pg15_source_0ms", "pg15_source_0ms+fdw_scan"} and len(probes["pg15_source_0ms"]) == 4
    # A foreign scan takes postgres_fdw's several round trips over the same path.
    assert min(probes["pg15_source_0ms+fdw_scan"]) > min(probes["pg15_source_0ms"])
    text = json.dumps(run)   # the fingerprint of each user server, read from SQL
    assert '"user_source"' in text and '"user_external"' in text and '"user_server": true' in text

    # The user's servers as found: rows, catalog, and no statement of ours outside our databases.
    for s in servers:
        s.assert_as_found(before[s.dsn()])
    assert json.loads((ws / "user-objects.json").read_text()) == []

    # No password anywhere we write or show, nor on any command line during the run.
    markdown = pgpathbench_main("report", "latest", "--format", "markdown", workspace=ws).stdout
    csv = pgpathbench_main("export", "latest", "--format", "csv", workspace=ws).stdout
    assert "| user server source |" in markdown and "| user server external |" in markdown
    assert_no_secret(secrets, {"stdout": res.stdout, "stderr": res.stderr, "json": text, "markdown": markdown,
                               "csv": csv, "ps": "\n".join(cmdlines)})
    assert any("pgbench" in c and "pgpathbench_" in c for c in cmdlines), "pgbench was never seen running"


def test_a_killed_run_is_cleaned_from_the_user_servers(servers, workspace_root, monkeypatch):
    src, ext = servers
    ws = workspace_root / "ws-user-kill"
    use_passfile(monkeypatch, workspace_root / "pgpass", src, ext)   # clean reads the recorded DSNs, without passwords
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = spawn_pgpathbench(*_args(src, ext, "--repeat", "30"), workspace=ws)
        _wait_for_round(proc)
        assert src.ours() and ext.ours()
        proc.send_signal(sig)
        proc.communicate(timeout=120)
        if sig == signal.SIGTERM:   # the run dropped its databases itself
            assert src.ours() == [] and ext.ours() == []
            continue
        assert src.ours() and ext.ours(), "SIGKILL leaves them: clean's work"
        res = pgpathbench("clean", workspace=ws)
        assert res.returncode == 0, res.stderr
        assert "dropped database pgpathbench_" in res.stdout
        # localfdw (foreign tables on the source) before the source: servers/ledger.py says why
        dropped = [line.split()[2].rsplit("_", 1)[1] for line in res.stdout.splitlines()
                   if line.startswith("dropped database ") and f"port={src.port}" in line]
        assert dropped == ["localfdw", "source"], res.stdout
        assert src.ours() == [] and ext.ours() == []
    for s in servers:
        assert s.user_data_fingerprint() == expected_fingerprint()


def _wait_for_round(proc, timeout_s: float = 120) -> None:
    """Until the run measures (its databases are made by then)."""
    deadline = time.monotonic() + timeout_s
    for line in proc.stderr:
        if "round 1" in line and "[" in line:
            return
        assert time.monotonic() < deadline, "no measurement within the timeout"
    raise AssertionError(f"the run ended first: {proc.wait()}")


# file-fdw-tpch's roles a user server cannot take: test_user_servers_tpch.py
@pytest.mark.parametrize("case", ["wrong password", "no createdb", "no postgres_fdw", "fdw_local without postgres_fdw",
                                  "unknown role", "twice"])
def test_bad_user_servers_are_refused_with_nothing_written(servers, workspace_root, case):
    src, ext = servers
    ws = workspace_root / f"ws-user-bad-{case.replace(' ', '-')}"
    with src.connect("dba", "postgres") as conn:
        conn.execute("DROP ROLE IF EXISTS nocreate")
        conn.execute("CREATE ROLE nocreate LOGIN PASSWORD 'nocreate-pw'")
        conn.execute("DROP ROLE IF EXISTS nofdw")
        conn.execute("CREATE ROLE nofdw LOGIN CREATEDB PASSWORD 'nofdw-pw'")
    base = f"host={src.address} port={src.port} dbname=userdb"
    args, message = {
        "wrong password": (["--server", f"source={src.dsn()} password=wrong"], "--server source: cannot connect"),
        "no createdb": (["--server", f"source={base} user=nocreate password=nocreate-pw"],
                        "--server source: role nocreate may not create databases"),
        "no postgres_fdw": (["--server", f"external={base} user=nofdw password=nofdw-pw"],
                            "--server external: postgres_fdw is not usable by nofdw"),
        # a CREATEDB-only source: the default targets' fdw_local runs postgres_fdw there (issue 42)
        "fdw_local without postgres_fdw": (["--server", f"source={base} user=nofdw password=nofdw-pw"],
                                           "--server source: for --target fdw_local, postgres_fdw is not usable by "
                                           "nofdw in the databases it creates; a DBA runs, in template1: "),
        "unknown role": (["--server", f"worker={src.dsn()}"], "--server worker: not a role of this study"),
        "twice": (["--server", f"source={src.dsn()}", "--server", f"source={src.dsn()}"], "--server source: given twice"),
    }[case]
    src.mark_log()
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", *args, workspace=ws)
    assert_user_error(res, message, untouched=ws)
    assert "wrong" not in res.stderr and "-pw" not in res.stderr
    assert src.ours() == [] and src.foreign_statements() == []


def test_doctor_checks_a_user_server(servers, workspace_root):
    src, ext = servers
    ws = workspace_root / "ws-user-doctor"
    res = pgpathbench("doctor", "--server", f"source={src.dsn()} password={src.password()}",
                      "--server", f"external={ext.dsn()} password={ext.password()}", workspace=ws)
    text = " ".join(res.stdout.split())
    assert "as app, no TLS" in text and "as app, TLS" in text, res.stdout
    for role in ("source", "external"):
        for check in ("createdb", "postgres_fdw"):
            assert f"server {role}: {check} ok" in text, res.stdout
        assert f"server {role}: round trip ok median" in text
    assert src.password() not in res.stdout + res.stderr and ext.password() not in res.stdout + res.stderr
    bad = pgpathbench("doctor", "--server", f"source={src.dsn()} password=wrong-pw", workspace=ws)
    assert bad.returncode == 1 and "MISSING" in bad.stdout
    assert "password authentication failed" in " ".join(bad.stdout.split())
    assert "wrong-pw" not in bad.stdout + bad.stderr


def test_a_script_over_tables_copied_from_the_users_database(servers, workspace_root, tmp_path):
    """--script-tables: the user's table read (only) into our database, the script run through every target."""
    src, ext = servers
    ws = workspace_root / "ws-user-script-tables"
    script = tmp_path / "balance.sql"
    script.write_text("\\set id random(1, 1000)\nSELECT balance FROM accounts WHERE id = :id;\n")
    before = src.known_objects()
    src.mark_log()
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--repeat", "1", "--target", "local,fdw_local",
                      "--server", f"source={src.dsn()} password={src.password()}", "--script", str(script),
                      "--script-tables", "public.accounts", workspace=ws)
    assert res.returncode == 0, res.stderr
    assert "--script-tables: accounts (1,000 rows) copied" in res.stderr
    run = report_json(ws)
    assert {m["dims"]["target"] for m in run["measurements"]} == {"local", "fdw_local"}
    assert all(m["error"] is None and m["metrics"]["transactions"] > 0 for m in run["measurements"])
    assert src.user_data_fingerprint() == expected_fingerprint() and src.known_objects() == before and src.ours() == []
    # In the user's database, the table was only read: its rows by COPY TO, its definition from the catalogs.
    foreign = [s.text for s in src.foreign_statements()]
    assert foreign and all(t.startswith('COPY "public"."accounts" TO STDOUT') or t.startswith("SELECT ")
                           for t in foreign), foreign


def test_script_tables_that_cannot_be_read_are_refused(servers, workspace_root, tmp_path):
    src, _ = servers
    ws = workspace_root / "ws-user-script-tables-bad"
    script = tmp_path / "s.sql"
    script.write_text("SELECT 1;\n")
    base = ["run", "fdw-overhead", "--preset", "quick", "--script", str(script)]
    assert_user_error(pgpathbench(*base, "--script-tables", "accounts", workspace=ws),
                      "--script-tables: copies tables of your own source server", untouched=ws)
    assert_user_error(pgpathbench(*base, "--server", f"source={src.dsn()} password={src.password()}",
                                  "--script-tables", "no_such_table", workspace=ws),
                      "--script-tables: no table no_such_table", untouched=ws)


@contextlib.contextmanager
def hasty_role(src: UserServer, timeout: str):
    """A DBA's login 'hasty' (CREATEDB) with a statement_timeout; dropped after, with its databases."""
    with src.connect("dba", "postgres") as conn:
        conn.execute("DROP ROLE IF EXISTS hasty")
        conn.execute("CREATE ROLE hasty LOGIN CREATEDB PASSWORD 'hasty-pw'")
        conn.execute(f"ALTER ROLE hasty SET statement_timeout = '{timeout}'")
    try:
        yield f"host={src.address} port={src.port} user=hasty password=hasty-pw"
    finally:
        with src.connect("dba", "postgres") as conn:
            for db in conn.execute("SELECT datname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba "
                                   "WHERE r.rolname = 'hasty'").fetchall():
                conn.execute(f'DROP DATABASE "{db[0]}" WITH (FORCE)')
            conn.execute("DROP ROLE hasty")


def test_a_server_error_while_preparing_is_one_line_and_leaves_nothing(servers, workspace_root):
    """A DBA's role with a statement_timeout: loading the pgbench tables on it is cancelled. That
    is the server's refusal, not a bug of ours: one line (exit 1, no traceback), the run marked
    failed and resumable, and nothing of ours left on the user's server."""
    src, _ext = servers
    with hasty_role(src, "20ms") as dsn:
        res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--repeat", "1",
                          "--target", "local",   # hasty has no postgres_fdw, which fdw_local needs on the source
                          "--server", f"source={dsn} dbname=userdb", workspace=workspace_root / "ws-user-timeout")
        assert res.returncode == 1, (res.returncode, res.stderr)
        assert "Traceback" not in res.stderr and "hasty-pw" not in res.stderr
        last = res.stderr.strip().splitlines()[-1]
        # the timeout may cancel a statement of ours or pgbench -i's (CI met the latter): one line either way
        assert "an error while servers and data were prepared: " in last, last
        assert "canceling statement due to statement timeout; run " in last, last
        assert "'pgpathbench run --resume" in last, last
        assert src.ours() == []


def test_our_databases_are_dropped_whatever_the_roles_statement_timeout(servers, workspace_root):
    """The clean-up runs as the user's role: its statement_timeout (1ms here) must not cancel the
    DROP of a database of ours (15's DROP DATABASE waits for a checkpoint; with the 20ms of the test
    above it was cancelled now and then, and the database stayed)."""
    src, _ext = servers
    with hasty_role(src, "1ms") as dsn:
        run_id, db = "20990101-000000-0000", "pgpathbench_0000_source"
        with src.connect("dba", "postgres") as conn:
            conn.execute(f'CREATE DATABASE "{db}" OWNER hasty')
            conn.execute(f"COMMENT ON DATABASE \"{db}\" IS '{MARK} {run_id}, role source'")
        ledger = Ledger(workspace_root / "ws-ledger-timeout")
        ledger.add(run_id, "source", dsn, db)
        said = ledger.drop(run_id, "source", parse_server(f"source={dsn} dbname=postgres").connect)
        assert said == [f"dropped database {db} on {dsn}"], said
        assert src.ours() == [] and ledger.entries() == []


def test_the_clean_ups_connection_is_untimed_from_its_start_and_keeps_the_dsns_options(servers):
    """The drop above once failed on CI: a SET statement_timeout = 0 after connecting ran under the
    role's 1ms and the timer fired, cancelling the next statement. The clean-up's connection now
    carries the overrides in its start-up packet (which wins over the role's settings), after the
    DSN's own options, which it keeps. (42s here: a statement under 1ms would itself be cancelled.)"""
    src, _ext = servers
    with hasty_role(src, "42s") as dsn:
        user = parse_server(f"source={dsn} dbname=postgres options='-c search_path=hasty_path'")
        for kw, timeout in (({}, "42s"), ({"untimed": True}, "0"), ({"untimed": True, "read_only": True}, "0")):
            with user.connect(**kw) as conn:
                shown = [conn.execute(f"SHOW {name}").fetchone()[0] for name in
                         ("statement_timeout", "lock_timeout", "search_path", "default_transaction_read_only")]
            ro = "on" if kw.get("read_only") else "off"
            assert shown == [timeout, "0", "hasty_path", ro], (kw, shown)


def test_pgbench_init_cancelled_by_the_server_is_its_refusal(servers, workspace_root):
    """pgbench -i's failure is the server's answer in one line (ServerRefused), which the runner
    says as it says a psycopg error: the path CI's slower machine took in the test above."""
    src, _ext = servers
    with hasty_role(src, "1ms"):
        with src.connect("dba", "postgres") as conn:
            conn.execute("CREATE DATABASE hasty_db OWNER hasty")
        password = workspace_root / "hasty-pgpass"
        password.write_text(f"{src.address}:{src.port}:*:hasty:hasty-pw\n")
        password.chmod(0o600)
        with pytest.raises(ServerRefused) as refused:
            pgbench.initialize(src.bins.path("pgbench"), "hasty_db", src.address, src.port, "hasty", 1,
                               passfile=str(password))
    assert str(refused.value) == ("pgbench -i failed: pgbench: error: query failed: ERROR: canceling statement "
                                  "due to statement timeout"), refused.value


def test_a_createdb_only_source_by_the_login_its_environment_gives_beside_a_managed_external(servers,
                                                                                            workspace_root):
    """Issue 42: the TLS-only server as the source, by a login with CREATEDB and nothing else (no
    postgres_fdw for it in template1), its password and TLS settings exported (PGPASSWORD, PGSSLMODE,
    PGSSLROOTCERT), beside variables that would break the managed external's connections were they
    applied. Refused before anything is written with PGOPTIONS exported; without fdw_local (it runs
    postgres_fdw on the source: refused for such a login, test above) the run goes, the source by the
    environment's password and TLS (recorded by name), the managed external by its own."""
    _src, ext = servers
    with ext.connect("dba", "postgres") as conn:
        conn.execute("DROP ROLE IF EXISTS onlydb")
        conn.execute("CREATE ROLE onlydb LOGIN CREATEDB PASSWORD 'onlydb-pw'")
    env = {"PGPASSWORD": "onlydb-pw", "PGSSLMODE": "verify-full", "PGSSLROOTCERT": str(ext.root_cert),
           "PGHOST": "/nonexistent", "PGPORT": "1", "PGDATABASE": "nosuch", "PGUSER": "nobody",
           "PGAPPNAME": "hostile", "JAVA_TOOL_OPTIONS": "-Xmx1m"}
    source = f"source=host={ext.address} port={ext.port} user=onlydb dbname=userdb"
    ws = workspace_root / "ws-user-env"
    before = ext.known_objects()
    ext.mark_log()

    def run(*args: str, **more: str):
        proc = spawn_pgpathbench("run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--repeat", "1",
                                 "--server", source, *args, workspace=ws, env={**env, **more})
        out, err = proc.communicate(timeout=600)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    assert_user_error(run(PGOPTIONS="-c work_mem=64kB"), "--server source: PGOPTIONS is set in the environment "
                      "and it would change the sessions measured there", untouched=ws)
    assert ext.ours() == []
    res = run("--target", "local,fdw_external")
    assert res.returncode == 0, res.stderr[-3000:]
    report = report_json(ws)
    assert {m["dims"]["target"] for m in report["measurements"]} == {"local", "fdw_external"}
    assert all(m["error"] is None and m["metrics"]["tps"] > 0 for m in report["measurements"])
    (session,) = report["run"]["environment"]["sessions"]
    assert session["servers"]["user_source"]["auth"] == {
        "password": "PGPASSWORD", "tls": "on (sslmode verify-full)",
        "from the environment": "PGPASSWORD, PGSSLMODE, PGSSLROOTCERT"}
    assert session["servers"]["pg15_external"]["auth"]["tcp"] == "scram-sha-256"
    assert set(session["machine"]["environment_ignored"]) == set(env) - {"PGPASSWORD", "PGSSLMODE", "PGSSLROOTCERT"}
    assert "onlydb-pw" not in json.dumps(report) + res.stdout + res.stderr
    ext.assert_as_found(before)
