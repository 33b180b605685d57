"""interfaces-fidelity on a server pgpathbench does not manage (--server local=DSN).

The user's server (tests/user_server.py) on 127.0.0.2, scram over TCP with its password in the DSN,
the tool's login a non-superuser with CREATEDB only. Every client and reference tool on the quick
preset's workloads at a small size, over the DSN's transport (tcp; unix left out, said): every run
measured, the COPY clients' data equal to psql's, the user's server left as found, and no password
in anything the run writes or shows, nor on any process's command line.
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main, report_json, run_watching_ps
from user_server import UserServer, assert_left_as_found, assert_no_secret

pytestmark = pytest.mark.integration

ROWS, ITERATIONS, ROUNDS = 20_000, 200, 2
SMALL = ["--preset", "quick", "--repeat", str(ROUNDS), "--rows", str(ROWS), "--iterations", str(ITERATIONS)]
TOOLS = {"reference", "libpq", "libpq-nochecksum", "odbc", "jdbc", "psycopg"}


@pytest.fixture(scope="module")
def local(workspace_root):
    with UserServer(workspace_root / "user-servers-fidelity", "local", "127.0.0.2") as server:
        yield server


def test_fidelity_on_a_user_server_measures_every_tool_over_its_dsn(local, workspace_root):
    ws = workspace_root / "ws-user-fidelity"
    before = {local.dsn(): local.known_objects()}
    local.mark_log()
    t0 = time.monotonic()
    res, cmdlines = run_watching_ps("run", "interfaces-fidelity", *SMALL, "--server",
                                    f"local={local.dsn()} password={local.password()}", workspace=ws)
    print(f"\ninterfaces-fidelity on a user server: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "local is your server: measured over tcp (lcl:tcp) only" in res.stderr
    assert "Fidelity: each client against the reference tool" in res.stdout

    run = report_json(ws)
    ms = run["measurements"]
    assert all(m["ok"] for m in ms), [(m["case_id"], m["error"]) for m in ms if not m["ok"]][:3]
    assert {(m["dims"]["workload"], m["dims"]["tool"], m["dims"]["transport"]) for m in ms} == \
        {(w, t, "tcp") for w in ("copy", "loop") for t in TOOLS}
    assert len(ms) == 2 * len(TOOLS) * ROUNDS
    ref = run["run"]["environment"]["sessions"][-1]["setup"]["15"]["interfaces-fidelity"]["reference"]
    assert ref["rows"] == ROWS
    for m in ms:
        d, mt = m["dims"], m["metrics"]
        if d["tool"] != "reference" and d["workload"] == "copy":
            assert (mt["rows"], mt["bytes"]) == (ref["rows"], ref["bytes"])
        if d["workload"] == "loop":
            assert mt["rows"] == ITERATIONS and mt["work_ms"] > 0
        assert mt["cpu_ms"] > 0 and mt["peak_rss_mib"] > 1
    text = json.dumps(run)
    assert '"user_local"' in text

    assert_left_as_found([local], before, ws)
    markdown = pgpathbench_main("report", "latest", "--format", "markdown", workspace=ws).stdout
    csv = pgpathbench_main("export", "latest", "--format", "csv", workspace=ws).stdout
    assert "| user server local |" in markdown
    assert_no_secret([local.password()], {
        "stdout": res.stdout, "stderr": res.stderr, "json": text, "markdown": markdown, "csv": csv,
        "ps": "\n".join(cmdlines)})
    assert any("pgpathbench_" in c and ("pgpb" in c or "pgbench" in c) for c in cmdlines), "no client seen running"


def test_unix_is_refused_on_a_user_server_reached_over_tcp(local, workspace_root):
    ws = workspace_root / "ws-user-fidelity-unix"
    local.mark_log()
    res = pgpathbench("run", "interfaces-fidelity", *SMALL, "--transport", "unix", "--server",
                      f"local={local.dsn()} password={local.password()}", workspace=ws)
    assert_user_error(res, "--transport unix: your server in the local role is reached over TCP", untouched=ws)
    assert "(e.g. --transport tcp)" in res.stderr
    assert local.password() not in res.stderr
    assert local.statements_log() == [] and local.ours() == []
