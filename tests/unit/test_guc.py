"""--set's pieces without a server: the open knob family, the describe-config lookup, PGOPTIONS."""

from __future__ import annotations

import pytest

from pgpathbench.clients import SYNC_SCANS_OFF, session_env
from pgpathbench.errors import UserError
from pgpathbench.matrix import Case
from pgpathbench.servers import binaries, guc
from pgpathbench.studies import STUDIES
from pgpathbench.studies.base import StudyEnv, StudyOptions


def options(**dims) -> StudyOptions:
    return StudyOptions("fdw-overhead", "quick", 1, {}, {"pg": ("15",), **dims})


def test_open_names_any_setting_lowercased_after_declared_dimensions():
    dims = guc.FAMILY.parse(["Work_Mem=64kB,64MB", "jit=off"])
    assert dims == {"set.work_mem": ("64kB", "64MB"), "set.jit": ("off",)}
    assert all("set" in s.knob_families for s in STUDIES.values())


def test_describe_config_of_the_binaries_at_hand():
    gucs = guc.describe(str(binaries.resolve(15).path("postgres")))
    assert gucs["work_mem"] == guc.Guc("work_mem", "user", "INTEGER")
    assert gucs["shared_buffers"].context == "postmaster" and gucs["log_checkpoints"].context == "sighup"
    assert gucs["datestyle"].vartype == "STRING"


def test_check_defers_dotted_names_and_other_majors_to_the_server():
    bins = binaries.resolve(15)
    guc.check(options(**{"set.pg_stat_statements.track": ("all",)}), bins)     # an extension's: later
    guc.check(StudyOptions("x", "q", 1, {}, {"pg": ("16",), "set.new_in_16": ("1",)}), bins)
    with pytest.raises(UserError, match="unknown setting 'new_in_16' for PostgreSQL 15"):
        guc.check(options(**{"set.new_in_16": ("1",)}), bins)
    with pytest.raises(UserError, match="'2x' is not on or off"):
        guc.check(options(**{"set.jit": ("on", "2x")}), bins)
    guc.check(options(**{"set.work_mem": ("64kB", "1GB", "100")}), bins)


def test_session_settings_reach_pgoptions_after_our_own():
    env = StudyEnv(options(), "15", None, None, print,
                   {"server_settings": {"work_mem": {"context": "user"}, "log_checkpoints": {"context": "sighup"}}})
    case = Case("fdw-overhead", (("pg", "15"), ("set.log_checkpoints", "on"), ("set.work_mem", "64kB")))
    assert guc.session(env, case) == {"work_mem": "64kB"}
    assert guc.pgoptions(guc.session(env, case)) == "-c work_mem=64kB"
    assert session_env(guc.session(env, case))["PGOPTIONS"].endswith(f"{SYNC_SCANS_OFF} -c work_mem=64kB")
    assert session_env()["PGOPTIONS"].endswith(SYNC_SCANS_OFF)
