"""interfaces' and interfaces-fidelity's bad input: one line naming the option, exit 2, nothing written."""

import json

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main

RUN = ["run", "interfaces", "--preset", "quick"]
FIDELITY = ["run", "interfaces-fidelity", "--preset", "quick"]


@pytest.mark.parametrize("args, message", [
    ([*RUN, "--interface", "npgsql"], "--interface: unknown value 'npgsql'; choose from libpq,odbc,jdbc,psycopg"),
    ([*RUN, "--method", "chunked"], "--method: unknown value 'chunked'; choose from normal,single-row,cursor,copy"),
    ([*RUN, "--transport", "ssl"], "--transport: unknown value 'ssl'; choose from unix,tcp,remote"),
    ([*RUN, "--sqlstrat", "sql001:twice"], "--sqlstrat: unknown value 'sql001:twice'"),
    ([*RUN, "--output", "p-none:file"], "--output: unknown value 'p-none:file'"),
    ([*RUN, "--interface", "jdbc", "--transport", "unix"], "no cases left after exclusions"),
    ([*RUN, "--interface", "odbc", "--method", "copy"], "no cases left after exclusions"),
    ([*RUN, "--t50k-rows", "1000"], "--t50k-rows: '1000' is not a row count >= 4242"),
    ([*RUN, "--iterations", "0"], "--iterations: '0' is not a row count >= 1"),
    ([*RUN, "--fetch", "0"], "--fetch: '0' is not a whole number >= 1 of rows"),
    ([*RUN, "--fetch", "100,x"], "--fetch: 'x' is not a whole number of rows"),
    ([*RUN, "--fetch", "100,,1000"], "--fetch: empty value in '100,,1000'"),
    ([*RUN, "--query", "mine"], "--query: give NAME=SQL"),
    ([*RUN, "--query", "sql10m=select 1"], "--query: name 'sql10m' is one of the study's own queries"),
    ([*RUN, "--query", "my-q=select 1"], "--query: name 'my-q' is not a simple lower-case identifier"),
    ([*RUN, "--query", "mine=  "], "--query: mine: the SQL is empty"),
    ([*RUN, "--query", "mine=select 1; drop table t50k"], "--query: mine: the SQL holds more than one statement"),
    ([*RUN, "--query", "mine=update t50k set x1 = ''"], "--query: mine: the SQL must be one query that returns rows"),
    ([*RUN, "--query", "a=select 1", "--query", "a=select 2"], "--query: name 'a' is given twice"),
    ([*RUN, "--sqlstrat", "mine:once"], "--sqlstrat: 'mine:once' names no query; give --query mine=SQL"),
    ([*RUN, "--query-file", "mine=/nonexistent/q.sql"], "--query-file: mine: cannot read /nonexistent/q.sql: No such file"),
    ([*RUN, "--jvm-options=-jar x.jar"], "--jvm-options: '-jar x.jar': give JVM options only"),
    ([*RUN, "--latency", "0.5ms"], "--latency: latency '0.5ms': whole milliseconds only"),
    ([*FIDELITY, "--tool", "libpq"], "--tool: the ratios need the reference tool"),
    ([*FIDELITY, "--workload", "bulk"], "--workload: unknown value 'bulk'; choose from copy,loop"),
    ([*FIDELITY, "--rows", "none"], "--rows: 'none' is not a row count"),
])
def test_bad_option_is_one_line_exit_2(tmp_path, args, message):
    assert_user_error(pgpathbench_main(*args, workspace=tmp_path / "ws"), message, untouched=tmp_path / "ws")


def test_bad_option_is_one_line_exit_2_by_a_process(tmp_path):
    """As a user runs it: a refusal after the cases are crossed (the rest run in-process above)."""
    res = pgpathbench(*RUN, "--interface", "jdbc", "--transport", "unix", workspace=tmp_path / "ws")
    assert_user_error(res, "no cases left after exclusions", untouched=tmp_path / "ws")


def test_studies_lists_the_seeds_driver_tables():
    res = pgpathbench_main("studies", "--format", "json")
    study = {s["name"]: s for s in json.loads(res.stdout)}["interfaces"]
    assert list(study["dimensions"]) == ["interface", "method", "fetch", "transport", "sqlstrat", "output",
                                        "latency", "pg", "via", "pool_mode", "tls"]
    assert study["dimensions"]["output"]["values"] == ["p-none:null", "p-all:null", "p-all:file"]
    assert study["presets"]["paper"]["iterations"] == 50_000 and study["presets"]["paper"]["repeat"] == 9


def test_bad_query_file_is_one_line_exit_2(tmp_path):
    latin1, big, good = tmp_path / "latin1.sql", tmp_path / "big.sql", tmp_path / "good.sql"
    latin1.write_bytes("select 'é' from t50k".encode("latin-1"))
    big.write_text("select 1" + " " * (1 << 20))
    good.write_text("select 1 from t50k")
    for args, message in (([f"mine={latin1}"], f"--query-file: mine: {latin1} is not UTF-8 text"),
                          ([f"mine={big}"], f"--query-file: mine: {big} is over 1 MiB"),
                          ([f"mine={tmp_path}"], "is a directory; give a file holding one query"),
                          ([f"mine={good}", "--query", "mine=select 2"], "given by --query and by --query-file")):
        res = pgpathbench_main(*RUN, "--query-file", *args, workspace=tmp_path / "ws")
        assert_user_error(res, message, untouched=tmp_path / "ws")
