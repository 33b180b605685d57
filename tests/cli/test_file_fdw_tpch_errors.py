"""file-fdw-tpch's bad input: one line naming the option and the fix, exit 2, nothing written."""

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main

RUN = ["run", "file-fdw-tpch", "--preset", "quick"]


@pytest.mark.parametrize("args, message", [
    ([*RUN, "--queries", "1,23"], "--queries: unknown query '23'; TPC-H has queries 1 to 22"),
    ([*RUN, "--queries", "q1,,q6"], "--queries: empty value"),
    ([*RUN, "--queries", "1,mine"], "--queries: 'mine' is no TPC-H query (1-22) and no NAME of a --query-file"),
    ([*RUN, "--query-file", "q6=x.sql"], "--query-file: name 'q6' is one of the study's own queries"),
    ([*RUN, "--query-file", "all=x.sql"], "--query-file: name 'all' is one of the study's own queries"),
    ([*RUN, "--query-file", "mine"], "--query-file: give NAME=FILE"),
    ([*RUN, "--query-file", "mine=/nonexistent/q.sql"], "--query-file: mine: cannot read /nonexistent/q.sql: No such file"),
    ([*RUN, "--query", "mine=select 1"], "--query: unknown option"),
    ([*RUN, "--storage", "parquet"], "--storage: unknown value 'parquet'; choose from regular,foreign,columnar"),
    ([*RUN, "--layout", "cluster"], "--layout: unknown value 'cluster'; choose from single,partitioned,postgres_fdw,citus"),
    ([*RUN, "--layout", "single,citus", "--pg", "16"], "--layout citus: Citus is for PostgreSQL 15 here, and --pg asks "
                                                       "for 16; give --pg 15"),
    ([*RUN, "--storage", "columnar", "--pg", "15,17"], "--storage columnar: Citus is for PostgreSQL 15 here"),
    ([*RUN, "--workers", "0"], "--workers: '0' is not a number of worker nodes from 1 to 16"),
    ([*RUN, "--server", "coordinator=host=127.0.0.1 port=1 dbname=x", "--storage", "regular,foreign"],
     "--storage foreign: your Citus cluster (--server coordinator) cannot run it: its shards would be file_fdw tables "
     "over files on the workers' own disks"),
    ([*RUN, "--server", "coordinator=host=127.0.0.1 port=1 dbname=x", "--layout", "single"],
     "--server coordinator: no case runs on your Citus cluster; add citus to --layout"),
    ([*RUN, "--scale", "0"], "--scale: scale must be from 0.01 to 300, got 0"),
    ([*RUN, "--scale", "big"], "--scale: 'big' is not a TPC-H scale factor"),
    ([*RUN, "--partitions", "0"], "--partitions: '0' is not a number of partitions from 1 to 16"),
    ([*RUN, "--timeout", "-5"], "--timeout: '-5' is not a whole number of seconds >= 1"),
])
def test_bad_option_is_one_line_exit_2(tmp_path, args, message):
    assert_user_error(pgpathbench_main(*args, workspace=tmp_path / "ws"), message, untouched=tmp_path / "ws")


@pytest.mark.parametrize("args, message", [
    ([*RUN, "--layout", "citus"], "--layout citus: the PostgreSQL of --pg-bindir (/usr/lib/postgresql/15/bin) has no "
                                  "Citus; install Citus into it, or leave --pg-bindir out"),
    ([*RUN, "--storage", "regular,columnar"], "--storage columnar: the PostgreSQL of --pg-bindir "
                                              "(/usr/lib/postgresql/15/bin) has no Citus"),
])
def test_citus_refused_where_it_is_not_installed(args, message, workspace_root):
    """Pointed at a PostgreSQL 15 without Citus (Debian's here: pgpathbench's own tree is not swapped in
    for binaries the user named), the citus layout and the columnar storage are refused."""
    ws = workspace_root.parent / (workspace_root.name + "-untouched")   # reachable by the servers' user
    res = pgpathbench_main(*args, "--pg-bindir", "/usr/lib/postgresql/15/bin", workspace=ws)
    assert_user_error(res, message, untouched=ws)


def test_studies_lists_file_fdw_tpch():
    import json
    res = pgpathbench_main("studies", "--format", "json")
    study = {s["name"]: s for s in json.loads(res.stdout)}["file-fdw-tpch"]
    assert study["dimensions"]["layout"]["values"] == ["single", "partitioned", "postgres_fdw", "citus"]
    assert study["dimensions"]["layout"]["default"] == ["single", "partitioned", "postgres_fdw"]   # stock PostgreSQL
    assert study["dimensions"]["storage"]["values"] == ["regular", "foreign", "columnar"]
    assert study["dimensions"]["queries"]["default"] == ["q1", "q3", "q5", "q6", "q10", "q12", "q14", "q19"]
    assert study["presets"]["paper"]["scale"] == 10 and study["presets"]["standard"]["scale"] == 1


def test_bad_query_file_content_is_one_line_exit_2(tmp_path):
    for name, text, message in (("empty.sql", "-- nothing\n", "the SQL is empty"),
                                ("two.sql", "select 1 from nation;\nselect 2;\n", "the SQL holds more than one statement"),
                                ("write.sql", "delete from nation", "the SQL must be one query that returns rows")):
        (tmp_path / name).write_text(text)
        run = pgpathbench if name == "two.sql" else pgpathbench_main   # one as a user runs it
        res = run(*RUN, "--query-file", f"mine={tmp_path / name}", workspace=tmp_path / "ws")
        assert_user_error(res, f"--query-file: mine: {message}", untouched=tmp_path / "ws")
