"""The user's own queries against real managed servers: `interfaces --query` through every client
(each one's rows, bytes and checksum equal psql's COPY of the query), `--fetch` multiplying only
the cursor cases, a query the server rejects failing in prepare (exit 2, nothing measured), and
`file-fdw-tpch --query-file` checked across storages."""

from __future__ import annotations

import pytest

from conftest import finished_run, pgpathbench, report_json

pytestmark = pytest.mark.integration

T50K = 5000
MINE = "select id, x1 from t50k where id % 7 = 0"
SMALL = ["--preset", "quick", "--transport", "tcp", "--output", "p-none:null", "--t50k-rows", str(T50K),
         "--t10m-rows", "1000", "--repeat", "1"]


@pytest.fixture(scope="module")
def mine(workspace_root):
    return finished_run("run", "interfaces", *SMALL, "--query", f"mine={MINE}", "--sqlstrat", "mine:once",
                        "--fetch", "10,1000", workspace=workspace_root, timeout=900)


def test_every_client_returns_the_users_query_as_psql_does(mine):
    res, rep = mine
    ms = rep["measurements"]
    assert ms and all(m["ok"] for m in ms), [(m["case_id"], m["error"]) for m in ms if not m["ok"]]
    ref = rep["run"]["environment"]["sessions"][-1]["setup"]["15"]["interfaces"]["reference"]["mine"]
    assert ref["rows"] == T50K // 7                      # psql's COPY, and the count by hand
    assert {m["dims"]["interface"] for m in ms} == {"libpq", "odbc", "jdbc", "psycopg"}
    for m in ms:
        mt = m["metrics"]
        assert (mt["rows"], mt["bytes"], mt["checksum"]) == (ref["rows"], ref["bytes"], ref["checksum"]), m["case_id"]
    assert "Every client returns the same data" in res.stdout   # (the SQL is a detail column: --wide, html)


def test_fetch_multiplies_only_the_cursor_cases(mine):
    _, rep = mine
    ids = {m["case_id"] for m in rep["measurements"]}
    tail = "tcp:mine:once:p-none:null:0ms:15"
    assert ids == {f"{c}:{tail}" for c in (
        "libpq:normal:-", "libpq:single-row:-", "libpq:copy:-", "odbc:normal:-", "odbc:cursor:10", "odbc:cursor:1000",
        "jdbc:normal:-", "jdbc:cursor:10", "jdbc:cursor:1000", "jdbc:copy:-", "psycopg:normal:-",
        "psycopg:cursor:10", "psycopg:cursor:1000", "psycopg:copy:-")}
    modes = {m["case_id"]: m["metrics"]["mode"] for m in rep["measurements"]}
    assert modes[f"jdbc:cursor:10:{tail}"] == "cursor:10" and modes[f"odbc:normal:-:{tail}"] == "normal"


def test_a_query_the_server_rejects_fails_in_prepare_with_exit_2(workspace_root):
    res = pgpathbench("run", "interfaces", *SMALL, "--interface", "libpq", "--method", "normal", "--query",
                      "bad=select nope from t50k", "--sqlstrat", "bad:once", workspace=workspace_root)
    assert res.returncode == 2, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--query bad: psql COPY of it on" in errors[0] and 'column "nope" does not exist' \
        in errors[0], res.stderr
    assert "Traceback" not in res.stderr
    assert report_json(workspace_root)["measurements"] == []
    writes = pgpathbench("run", "interfaces", *SMALL, "--interface", "libpq", "--method", "normal", "--query",
                         "w=with d as (delete from t50k returning id) select * from d", "--sqlstrat", "w:once",
                         workspace=workspace_root)
    assert writes.returncode == 2 and "read-only transaction" in writes.stderr, writes.stderr[-2000:]


def test_file_fdw_tpch_checks_the_users_query_across_storages(workspace_root, tmp_path):
    sql = tmp_path / "nations.sql"
    sql.write_text("-- revenue by nation\nselect n_name, count(*) as orders\nfrom orders, customer, nation\n"
                   "where o_custkey = c_custkey and c_nationkey = n_nationkey\ngroup by n_name;\n")
    res = pgpathbench("run", "file-fdw-tpch", "--preset", "quick", "--layout", "single", "--queries", "6",
                      "--query-file", f"nations={sql}", "--repeat", "2", workspace=workspace_root, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    rep = report_json(workspace_root)
    ms = rep["measurements"]
    assert {m["case_id"] for m in ms} == {f"{q}:{st}:single:15" for q in ("q6", "nations")
                                          for st in ("regular", "foreign")}
    assert len(ms) == 8 and all(m["ok"] for m in ms), [m["error"] for m in ms if not m["ok"]]
    answers = rep["run"]["environment"]["sessions"][-1]["setup"]["15"]["file-fdw-tpch"]["answers"]
    assert answers["nations"]["rows"] == 25 and answers["nations"]["agreeing"] == ["regular/single", "foreign/single"]
    assert answers["nations"]["duckdb"].startswith("not applicable") and answers["q6"]["duckdb"] == "agrees"
    assert {m["metrics"]["answer"] for m in ms if m["dims"]["queries"] == "nations"} == {answers["nations"]["digest"]}


def test_file_fdw_tpch_refuses_a_query_the_server_rejects(workspace_root, tmp_path):
    sql = tmp_path / "bad.sql"
    sql.write_text("select n_nope from nation")
    res = pgpathbench("run", "file-fdw-tpch", "--preset", "quick", "--layout", "single", "--queries", "bad",
                      "--query-file", f"bad={sql}", "--repeat", "1", workspace=workspace_root, timeout=900)
    assert res.returncode == 2, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--query-file bad: the server refuses it on regular/single" in errors[0] \
        and "n_nope" in errors[0], res.stderr
    assert report_json(workspace_root)["measurements"] == []
