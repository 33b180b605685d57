"""interfaces' and interfaces-fidelity's bad input: one line naming the option, exit 2, nothing written."""

import json

import pytest

from conftest import assert_user_error, pgpathbench

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
    ([*RUN, "--jvm-options=-jar x.jar"], "--jvm-options: '-jar x.jar': give JVM options only"),
    ([*RUN, "--latency", "0.5ms"], "--latency: latency '0.5ms': whole milliseconds only"),
    ([*FIDELITY, "--tool", "libpq"], "--tool: the ratios need the reference tool"),
    ([*FIDELITY, "--workload", "bulk"], "--workload: unknown value 'bulk'; choose from copy,loop"),
    ([*FIDELITY, "--rows", "none"], "--rows: 'none' is not a row count"),
])
def test_bad_option_is_one_line_exit_2(tmp_path, args, message):
    assert_user_error(pgpathbench(*args, workspace=tmp_path / "ws"), message, untouched=tmp_path / "ws")


def test_studies_lists_the_seeds_driver_tables():
    res = pgpathbench("studies", "--format", "json")
    study = {s["name"]: s for s in json.loads(res.stdout)}["interfaces"]
    assert list(study["dimensions"]) == ["interface", "method", "transport", "sqlstrat", "output", "latency", "pg"]
    assert study["dimensions"]["output"]["values"] == ["p-none:null", "p-all:null", "p-all:file"]
    assert study["presets"]["paper"]["iterations"] == 50_000 and study["presets"]["paper"]["repeat"] == 9
