"""--set NAME=V1,V2 refused before anything is written: one line naming the option and the fix, exit 2."""

import json

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main

TPCH = ["run", "file-fdw-tpch", "--preset", "quick"]
FDW = ["run", "fdw-overhead", "--preset", "quick"]


@pytest.mark.parametrize("args, message", [
    ([*TPCH, "--set", "wrk_mem=64kB"], "--set: unknown setting 'wrk_mem' for PostgreSQL 15; see SHOW ALL"),
    ([*FDW, "--set", "work_mem"], "--set: 'work_mem' is not NAME=V1,V2; write e.g. --set work_mem=..."),
    ([*FDW, "--set", "=64kB"], "--set: '=64kB' is not NAME=V1,V2"),
    ([*TPCH, "--set", "work_mem="], "--set work_mem: empty value in ''; give a comma-separated list"),
    ([*TPCH, "--set", "work_mem=1MB,,2MB"], "--set work_mem: empty value"),
    ([*TPCH, "--set", "work-mem=1MB"], "--set: 'work-mem' is not a setting name"),
    ([*TPCH, "--set", "search_path=a b"], "--set search_path: 'a b' is not a setting value --set takes"),
    ([*TPCH, "--set", "work_mem=1MB", "--set", "WORK_MEM=2MB"], "--set: 'work_mem' given twice"),
    ([*FDW, "--set", "log_connections=on,off"],
     "--set log_connections: a superuser-backend setting (it is fixed when a session starts); leave it out: "
     "--set varies settings of contexts user, superuser, sighup and postmaster only"),
    ([*FDW, "--set", "shared_buffers=128MB,lots"], "--set shared_buffers: 'lots' is not a whole number"),
    ([*FDW, "--set", "server_version_num=1"], "--set: unknown setting 'server_version_num' for PostgreSQL 15; see SHOW ALL (--set takes settings of contexts user, superuser, sighup and postmaster)"),
    ([*TPCH, "--set", "enable_sort=maybe"], "--set enable_sort: 'maybe' is not on or off"),
    ([*TPCH, "--set", "work_mem=lots"], "--set work_mem: 'lots' is not a whole number"),
    ([*TPCH, "--set", "random_page_cost=fast"], "--set random_page_cost: 'fast' is not a number"),
    (["run", "interfaces", "--set", "wrk_mem=1MB"], "--set: unknown setting 'wrk_mem'"),
    (["run", "remote-sampling", "--set", "log_disconnections=on"], "--set log_disconnections: a superuser-backend setting"),
    (["run", "interfaces-fidelity", "--set", "jit"], "--set: 'jit' is not NAME=V1,V2"),
])
def test_bad_set_is_one_line_exit_2(args, message, workspace_root):
    ws = workspace_root.parent / (workspace_root.name + "-untouched")   # reachable by the servers' user
    assert_user_error(pgpathbench_main(*args, workspace=ws), message, untouched=ws)


def test_bad_set_is_one_line_exit_2_by_a_process(workspace_root):
    """As a user runs it: a name postgres --describe-config does not know (the rest in-process above)."""
    ws = workspace_root.parent / (workspace_root.name + "-untouched")
    res = pgpathbench(*TPCH, "--set", "wrk_mem=64kB", workspace=ws)
    assert_user_error(res, "--set: unknown setting 'wrk_mem' for PostgreSQL 15; see SHOW ALL", untouched=ws)


def test_every_study_has_set():
    studies = json.loads(pgpathbench_main("studies", "--format", "json").stdout)
    for s in studies:
        assert s["knob_families"]["set"]["option"] == "--set" and s["knob_families"]["set"]["names"] is None
