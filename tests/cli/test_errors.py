"""Bad input: one line naming the option and the fix, exit 2, no traceback, nothing written."""

import os

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main

RUN = ["run", "fdw-overhead", "--preset", "quick"]

CASES = [
    (["run", "nosuch"], "invalid choice: 'nosuch'"),
    (["nosuch"], "invalid choice: 'nosuch'"),
    (["run"], "name a study"),
    ([*RUN, "--workload", "xx"], "--workload: unknown value 'xx'; choose from ro,rw"),
    ([*RUN, "--target", "local,nope"], "--target: unknown value 'nope'"),
    ([*RUN, "--clients", "0"], "--clients: '0' is not a positive whole number"),
    ([*RUN, "--clients", "1,,5"], "--clients: empty value"),
    ([*RUN, "--duration", "-1"], "--duration: must be a positive number of seconds, got -1"),
    ([*RUN, "--duration", "abc"], "--duration: 'abc' is not a number of seconds"),
    ([*RUN, "--duration", "1.5"], "--duration: pgbench takes whole seconds"),
    ([*RUN, "--scale", "0"], "--scale: '0' is not a whole number >= 1"),
    ([*RUN, "--isolation", "dirty"], "--isolation: unknown isolation 'dirty'"),
    ([*RUN, "--repeat", "0"], "argument --repeat: '0' must be a whole number >= 1"),
    ([*RUN, "--preset", "huge"], "argument --preset: invalid choice: 'huge'"),
    ([*RUN, "--workload", "rw", "--target", "fdw_external_ro"], "no cases left after exclusions"),
    ([*RUN, "--pg-bindir", "/nonexistent/bin"], "--pg-bindir: /nonexistent/bin is not a directory"),
    ([*RUN, "--pg-bindir", "/usr/bin/../lib"], "--pg-bindir: initdb not found in /usr/bin/../lib"),
    ([*RUN, "--results-dsn", "host=127.0.0.1 port=1 user=nobody dbname=none connect_timeout=2"],
     "--results-dsn: cannot connect"),
    ([*RUN, "--workspace", "/etc/hostname/ws"], "--workspace: cannot write below /etc/hostname"),
    (["run", "--resume", "x", "fdw-overhead"], "--resume: takes no study"),
    (["report", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    ([*RUN, "--latency", "0.5ms"], "--latency: latency '0.5ms': whole milliseconds only"),
    ([*RUN, "--bandwidth", "fast"], "--bandwidth: "),
    ([*RUN, "--pg", "14"], "--pg: unknown value '14'; choose from 15,16,17,18"),
    (["run", "remote-sampling", "--pg", "15"], "--pg: analyze_sampling (auto,random,system,bernoulli) needs "
                                               "PostgreSQL 16+"),
    (["run", "remote-sampling", "--rows", "0"], "--rows: '0' is not a row count"),
    (["run", "remote-sampling", "--fraction", "2"], "--fraction: a sample fraction is in (0, 1], got 2"),
    (["run", "remote-sampling", "--stats-target", "20000"], "--stats-target: a statistics target is a whole number"),
    (["run", "remote-sampling", "--analyze-sampling", "sometimes"], "--analyze-sampling: unknown value 'sometimes'"),
]
if os.geteuid() == 0:
    CASES.append(([*RUN, "--server-user", "no_such_user_x"], "--server-user: no OS user 'no_such_user_x'"))


@pytest.mark.parametrize("argv, message", CASES, ids=[" ".join(a[-2:]) for a, _ in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(argv, message, workspace_root):
    ws = workspace_root.parent / (workspace_root.name + "-untouched")
    assert_user_error(pgpathbench_main(*argv, workspace=ws), message, untouched=ws)


# As a user runs them: argparse's refusal, a value's, a child's (initdb looked for) and a connection's.
BY_PROCESS = [(a, m) for a, m in CASES if m.startswith(("invalid choice", "--clients: '0'", "--pg-bindir: initdb",
                                                           "--results-dsn"))]


@pytest.mark.parametrize("argv, message", BY_PROCESS, ids=[" ".join(a[-2:]) for a, _ in BY_PROCESS])
def test_bad_input_is_one_line_exit_2_nothing_written_by_a_process(argv, message, workspace_root):
    ws = workspace_root.parent / (workspace_root.name + "-untouched")
    assert_user_error(pgpathbench(*argv, workspace=ws), message, untouched=ws)


@pytest.mark.parametrize("study", ["fdw-overhead", "file-fdw-tpch", "interfaces", "interfaces-fidelity",
                                   "remote-sampling"])
def test_every_study_has_its_help(study):
    """argparse reads % in a help text as a format: a preset's "95%" must come through escaped."""
    res = pgpathbench_main("run", study, "--help")
    assert res.returncode == 0 and "--preset" in res.stdout and not res.stderr, res.stderr[-500:]


def test_help_lists_every_study_option():
    res = pgpathbench("run", "fdw-overhead", "--help")   # --help as a user runs it
    assert res.returncode == 0
    for option in ("--preset", "--repeat", "--duration", "--clients", "--workload", "--target", "--scale",
                   "--max-tries", "--seed"):
        assert option in res.stdout


def test_studies_lists_dimensions_and_presets():
    import json
    res = pgpathbench_main("studies", "--format", "json")
    study = {s["name"]: s for s in json.loads(res.stdout)}["fdw-overhead"]
    assert study["dimensions"]["target"]["values"] == ["local", "fdw_local", "fdw_external", "fdw_external_ro"]
    assert study["presets"]["paper"] == {"help": study["presets"]["paper"]["help"], "repeat": 10,
                                         "scale": 100, "duration": 10}
    assert study["presets"]["quick"]["repeat"] == 6 and study["presets"]["quick"]["duration"] == 1
    assert "1 client" in study["presets"]["quick"]["help"]


@pytest.mark.parametrize("extra, message", [
    (["--fdw-option", "fetch_size=0"], "--fdw-option fetch_size: '0' is not a positive whole number"),
    (["--fdw-option", "fetchsize=10"], "--fdw-option: unknown option 'fetchsize'; choose from fetch_size,"),
    (["--fdw-option", "fetch_size"], "--fdw-option: 'fetch_size' is not NAME=V1,V2"),
    (["--fdw-option", "async_capable=sometimes"], "--fdw-option async_capable: 'sometimes' is not a boolean"),
    (["--protocol", "binary"], "--protocol: unknown value 'binary'; choose from simple,extended,prepared"),
    (["--script", "{dir}/missing.sql"], "--script: cannot read {dir}/missing.sql: No such file or directory"),
    (["--script", "{dir}/bad.sql"], "--script {dir}/bad.sql: line 1: pgbench cannot parse it (syntax error in command)"),
    (["--script", "{dir}/good.sql", "--script", "{dir}/bad.sql@2"], "--script {dir}/bad.sql: line 1: pgbench cannot"),
    (["--script", "{dir}/good.sql@0"], "--script: weight '0' of"),
    (["--script", "{dir}/empty.sql"], "--script: {dir}/empty.sql is empty"),
    (["--script", "{dir}/good.sql", "--workload", "ro"], "--workload: not with --script"),
    (["--init", "{dir}/good.sql"], "--init: creates the tables your --script reads; give --script FILE too"),
    (["--script", "{dir}/good.sql", "--init", "{dir}/missing.sql"], "--init: cannot read {dir}/missing.sql"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_knobs_and_scripts_are_one_line_exit_2_nothing_written(extra, message, tmp_path, workspace_root):
    (tmp_path / "good.sql").write_text("SELECT sum(abalance) FROM pgbench_accounts;\n")
    (tmp_path / "bad.sql").write_text("\\set aid random(1,\n")
    (tmp_path / "empty.sql").write_text("\n")
    ws = workspace_root.parent / (workspace_root.name + "-untouched")
    argv = [a.format(dir=tmp_path) for a in extra]
    run = pgpathbench if "bad.sql" in extra[-1] else pgpathbench_main   # pgbench's refusal as a user meets it
    assert_user_error(run(*RUN, *argv, workspace=ws), message.format(dir=tmp_path), untouched=ws)


def test_help_lists_the_knob_and_script_options():
    res = pgpathbench_main("run", "fdw-overhead", "--help")
    for option in ("--protocol", "--fdw-option", "--script", "--init"):
        assert option in res.stdout
