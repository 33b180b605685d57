"""A pgbench script split as pgbench splits it (tools/pgbench_script.py), and pgbench's own dry parse."""

from __future__ import annotations

import pytest

from pgpathbench.tools.pgbench_script import dry_parse, sql_commands

PGBENCH = "/usr/lib/postgresql/15/bin/pgbench"


@pytest.mark.parametrize("script, expected", [
    ("SELECT 1;\nSELECT 2;\n", [(0, "SELECT 1;"), (9, "\nSELECT 2;")]),
    # meta-commands are pgbench's; a variable is a parameter, each occurrence its own
    ("\\set aid random(1, 100000 * :scale)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid OR aid = :aid;\n",
     [(36, "SELECT abalance FROM pgbench_accounts WHERE aid = $1 OR aid = $2;")]),
    # a meta-command continued by a backslash before its newline
    ("\\set x 1 + \\\n  2\nSELECT :x;", [(17, "SELECT $1;")]),
    # \gset after a command without ';' ends it; casts are no variables
    ("SELECT 1::int AS one \\gset\nSELECT :one::text;", [(0, "SELECT 1::int AS one "), (27, "SELECT $1::text;")]),
    # ';' in quotes, comments, dollar quotes and parentheses ends nothing
    ("SELECT ';', $$a;b$$, $t$;$t$, \"x;\" /* ; /* ; */ */ -- ;\n, (SELECT 1; );",
     [(0, "SELECT ';', $$a;b$$, $t$;$t$, \"x;\" /* ; /* ; */ */ -- ;\n, (SELECT 1; );")]),
    # E'' takes backslash escapes; a plain string does not
    ("SELECT E'\\';', 'a\\';\nSELECT 2;", [(0, "SELECT E'\\';', 'a\\';"), (20, "\nSELECT 2;")]),
    # \; joins two statements into one command, \: is a colon (and a variable in quotes is one too)
    ("SELECT 1 \\; SELECT 2;\nSELECT 3 \\:\\: int, ':x';",
     [(0, "SELECT 1 ; SELECT 2;"), (21, "\nSELECT 3 :: int, '$1';")]),
    # a backslash in a quoted stretch is no meta-command; blanks alone are no command
    ("SELECT '\\set';\n\n\\sleep 1\n", [(0, "SELECT '\\set';")]),
    # an unterminated string runs to the end, as pgbench reads it
    ("SELECT 'abc;\n\\sleep 1\n", [(0, "SELECT 'abc;\n\\sleep 1\n")]),
])
def test_sql_commands(script, expected):
    assert sql_commands(script) == expected


def test_dry_parse_tells_a_script_pgbench_parses_from_one_it_refuses():
    good = ("good", "\\set aid random(1, 100000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n", 1)
    assert dry_parse(PGBENCH, [good]) is None
    bad = ("bad", "SELECT 1;\n\\set aid random(1,\n", 2)
    assert dry_parse(PGBENCH, [good, bad]) == ("bad", 2, "syntax error in command")


@pytest.mark.parametrize("text", ["\\TOKEN_7f3q x\n", "\\sleep TOKEN_7f3q xx yy\n", "\\set TOKEN_7f3q 1 +\n"])
def test_dry_parse_never_repeats_the_script(text):
    name, line, why = dry_parse(PGBENCH, [("s", text, 1)])
    assert (name, line) == ("s", 1) and why and "TOKEN_7f3q" not in why
