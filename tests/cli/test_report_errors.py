"""report --html, export and compare: bad input is one line, exit 2, no traceback."""

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main

# Rejected before anything opens: the workspace is not even created.
EARLY = [
    (["export", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
    (["compare", "onlyone"], "the following arguments are required: RUN_B"),
    (["compare", "a", "b", "--format", "csv"], "argument --format: invalid choice: 'csv'"),
    (["report", "--html", "/nonexistent/dir/report.html"], "--html: directory /nonexistent/dir does not exist"),
    (["report", "--html", "/tmp"], "--html: /tmp is a directory"),
    (["compare", "a", "b", "--html", "/nonexistent/dir/c.html"], "--html: directory /nonexistent/dir does not exist"),
]


@pytest.mark.parametrize("argv, message", EARLY, ids=[" ".join(a) for a, _ in EARLY])
def test_rejected_before_anything_is_written(argv, message, workspace_root):
    ws = workspace_root.parent / (workspace_root.name + "-untouched")
    assert_user_error(pgpathbench_main(*argv, workspace=ws), message, untouched=ws)


# Past the workspace, into the results cluster: as a user runs them (a process of the CLI holds the
# workspace while it lives, which pytest's own process must not).
UNKNOWN = [
    (["export", "nosuchrun"], "RUN: no run 'nosuchrun'"),
    (["export", "nosuchrun", "--format", "csv"], "RUN: no run 'nosuchrun'"),
    (["compare", "nosuchrun", "latest"], "RUN_A: no run 'nosuchrun'"),
    (["report", "nosuchrun", "--html", "{tmp}/r.html"], "RUN: no run 'nosuchrun'"),
]


@pytest.mark.integration   # each starts the workspace's results cluster
@pytest.mark.parametrize("argv, message", UNKNOWN, ids=[" ".join(a) for a, _ in UNKNOWN])
def test_unknown_run_is_one_line_exit_2(argv, message, workspace_root, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert_user_error(pgpathbench(*argv, workspace=workspace_root), message)
    assert list(tmp_path.iterdir()) == [], "no HTML file, not even a temporary one"
