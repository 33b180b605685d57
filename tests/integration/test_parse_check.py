"""The user's SQL parsed by a server of its own before anything is written (servers/parse_check.py):
what PostgreSQL parses passes whatever tables it names, what it cannot parse is refused at its
line without a word of it repeated, and nothing is ever executed."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from pgpathbench import scratch
from pgpathbench.errors import UserError
from pgpathbench.procs import OsUser
from pgpathbench.servers import parse_check
from pgpathbench.servers.binaries import resolve
from pgpathbench.tools.pgbench_script import sql_commands

pytestmark = pytest.mark.integration
TOKEN = "TOKEN_7f3q"
BINS = resolve(15)


@pytest.fixture(scope="module")
def conn():
    with parse_check._server(BINS, OsUser.for_servers()) as conn:
        yield conn


def script(text: str) -> parse_check.Sql:
    return parse_check.Sql("--script s.sql", text, tuple(sql_commands(text)), "fix it")


def statements(text: str) -> parse_check.Sql:
    return parse_check.Sql("--init i.sql", text, ((0, text),), "fix it")


def builtin(name: str) -> str:
    out = subprocess.run([str(BINS.path("pgbench")), f"--show-script={name}"], capture_output=True, text=True)
    return out.stderr.split("\n", 1)[1]   # after the script's title line


ACCEPTED = [
    script(builtin("tpcb-like")),
    script(builtin("select-only")),
    script("\\set n random(1, 10)\nSELECT * FROM no_such_table WHERE x = :n AND y = :n::int;  -- tables come later\n"
           "SELECT $$;$$, E'\\';', 'a\\' /* ; */;\nBEGIN;\nSELECT 1 \\; SELECT 2;\n\\sleep 1 ms\nEND;\n"
           "SELECT count(*) FROM t \\gset\nSELECT :count;"),
    script("CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT 2; END;\nSELECT f();"),
    script("\\set only 1\n"),   # meta-commands alone
    statements("CREATE TABLE t (id int PRIMARY KEY, v text);\nINSERT INTO t SELECT g, md5(g::text) FROM "
               "generate_series(1, 1000) g;\nDO $$ BEGIN PERFORM 1; END $$;\nANALYZE t\n"),
]


@pytest.mark.parametrize("sql", ACCEPTED, ids=range(len(ACCEPTED)))
def test_what_postgres_parses_passes(conn, sql):
    assert parse_check._refusal(conn, sql) is None


REFUSED = [
    (script(f"root:x:0:0:{TOKEN}:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"), "line 1:"),
    (script(f"SELECT 1;\n\\set n 1\nSELECT {TOKEN} FROM;\n"), "line 3:"),
    (script(f"SELECT 1;\nSELECT ({TOKEN}\n\\sleep 1\nSELECT 2;"), "line 2 (a statement, string or comment left unfinished)"),
    (script(f"SELECT 1; /* {TOKEN}"), "line 1:"),
    (script(f"SELECT :'{TOKEN}';"), "line 1:"),   # psql's quoting of a variable: not pgbench's
    (script(f'#!/bin/sh\necho "{TOKEN}"\n'), "line 1:"),
    (script(f'{{"key": "{TOKEN}"}}'), "line 1:"),
    (statements(f"CREATE TABLE t (x int);\n\\copy t from '{TOKEN}'\n"), "line 2:"),   # no psql meta-commands
    (statements(f"CREATE TABLE t (x int)\nINSERT INTO t VALUES ('{TOKEN}');"), "line 2:"),
]


@pytest.mark.parametrize("sql, where", REFUSED, ids=range(len(REFUSED)))
def test_what_it_cannot_parse_is_refused_at_its_line_unquoted(conn, sql, where):
    refusal = parse_check._refusal(conn, sql)
    assert refusal is not None and refusal.startswith(where), refusal
    assert "SQLSTATE 42601" in refusal and TOKEN not in refusal


def test_nothing_is_executed(conn):
    """Valid statements that would change the server are parsed, not run."""
    text = "CREATE TABLE executed_probe (x int);\nDROP DATABASE template1;\nSELECT pg_terminate_backend(pg_backend_pid());"
    assert parse_check._refusal(conn, statements(text)) is None
    assert parse_check._refusal(conn, script(text)) is None
    assert conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'executed_probe'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = 'template1'").fetchone()[0] == 1


def test_check_names_the_option_and_leaves_nothing():
    def ours() -> set:
        return {p for base in ("/dev/shm", tempfile.gettempdir()) for p in Path(base).glob(scratch.prefix("parse") + "*")}
    before = ours()
    with pytest.raises(UserError) as refused:
        parse_check.check([script("SELECT 1;"), statements(f"{TOKEN};")], BINS, OsUser.for_servers())
    assert str(refused.value) == "--init i.sql: line 1: the server cannot parse it (SyntaxError, SQLSTATE 42601); fix it"
    assert ours() == before, "the check's server and its directory are gone"
