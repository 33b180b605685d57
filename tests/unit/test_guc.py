"""--set's pieces without a server: the open knob family, the describe-config lookup, PGOPTIONS."""

from __future__ import annotations

import pytest

from pgpathbench.tools.clients import SYNC_SCANS_OFF, session_env
from pgpathbench.errors import CaseError, UserError
from pgpathbench.matrix import Case, StudyOptions
from pgpathbench.servers import binaries, guc
from pgpathbench.studies import STUDIES
from pgpathbench.studies.base import StudyEnv


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
                   knobs=guc.KnobState({"work_mem": {"context": "user"}, "log_checkpoints": {"context": "sighup"}}))
    case = Case("fdw-overhead", (("pg", "15"), ("set.log_checkpoints", "on"), ("set.work_mem", "64kB")))
    assert guc.session(env, case) == {"work_mem": "64kB"}
    assert guc.pgoptions(guc.session(env, case)) == "-c work_mem=64kB"
    assert session_env(guc.session(env, case))["PGOPTIONS"].endswith(f"{SYNC_SCANS_OFF} -c work_mem=64kB")
    assert session_env()["PGOPTIONS"].endswith(SYNC_SCANS_OFF)


def test_postmaster_settings_are_taken_backend_and_internal_ones_refused():
    bins = binaries.resolve(15)
    guc.check(options(**{"set.shared_buffers": ("16MB", "32MB"), "set.max_connections": ("50",)}), bins)
    assert guc.refusal("shared_buffers", "postmaster") is None and "postmaster" in guc.HOW
    for context in ("backend", "superuser-backend", "internal"):
        assert guc.refusal("x", context).startswith(f"--set x: a {context} setting")
    with pytest.raises(UserError, match="--set log_connections: a superuser-backend setting"):
        guc.check(options(**{"set.log_connections": ("on",)}), bins)


class FakeCluster:
    """What apply_server_settings() asks of a managed server: a connection, a restart; `refuses`: the
    settings its pg_file_settings says are not applied, with that error."""

    def __init__(self, name: str, log: list, refuses: dict | None = None):
        self.name, self.log, self.refuses = name, log, refuses or {}

    def connect(self):
        cluster = self

        class Conn:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def execute(self, query, params=None):
                text = query if isinstance(query, str) else repr(query)
                cluster.log.append((cluster.name, "ALTER" if "ALTER SYSTEM" in text else text.split("(")[0]))
                self.params = params
                return self

            def fetchone(self):
                return (True,)

            def fetchall(self):   # pg_file_settings: (name, applied, error) of the names asked
                return [(n, n not in cluster.refuses, cluster.refuses.get(n)) for n in self.params[0]]
        return Conn()

    def restart(self):
        self.log.append((self.name, "restart"))


class FakeScope:
    def __init__(self, clusters):
        self._clusters = clusters

    def clusters(self):
        return self._clusters


def test_server_settings_restart_only_when_a_postmaster_value_changes_and_close_kept_connections():
    done: list = []
    lines: list = []
    env = StudyEnv(options(), "15", None, FakeScope([FakeCluster("a", done), FakeCluster("b", done)]), lines.append,
                   knobs=guc.KnobState({"shared_buffers": {"context": "postmaster"},
                                        "log_checkpoints": {"context": "sighup"}, "work_mem": {"context": "user"}}))

    class Kept:
        closed = False

        def close(self):
            self.closed = True
    kept = env.kept_connection("k", Kept)

    def case(sb, lc, wm="64kB"):
        return Case("fdw-overhead", (("pg", "15"), ("set.log_checkpoints", lc), ("set.shared_buffers", sb),
                                     ("set.work_mem", wm)))
    guc.apply_server_settings(env, case("16MB", "on"))
    assert [d for d in done if d[1] == "restart"] == [("a", "restart"), ("b", "restart")]
    assert kept.closed and env.kept == {} and env.knobs.restarts == 1
    assert lines == ["restart 1 for --set log_checkpoints=on shared_buffers=16MB: a, b in 0.0 s (cold shared buffers)"]
    done.clear()
    guc.apply_server_settings(env, case("16MB", "on", "1MB"))    # a session setting only: nothing
    assert done == []
    guc.apply_server_settings(env, case("16MB", "off"))          # a sighup one: a reload, no restart
    assert ("a", "SELECT pg_reload_conf") in done and not any(d[1] == "restart" for d in done)
    done.clear()
    guc.apply_server_settings(env, case("32MB", "off"))
    assert done.count(("a", "ALTER")) == 1 and ("b", "restart") in done and env.knobs.restarts == 2
    assert env.knobs.in_force == {"log_checkpoints": "off", "shared_buffers": "32MB"}


def test_a_setting_the_server_did_not_apply_fails_the_measurement():
    """Recorded as in force only when the server says so (pg_file_settings.applied)."""
    env = StudyEnv(options(), "15", None, FakeScope([FakeCluster("a", [], {"log_checkpoints": "bad value"})]),
                   print, knobs=guc.KnobState({"log_checkpoints": {"context": "sighup"}}))
    with pytest.raises(CaseError, match=r"^--set: not in force on server a, as it says: log_checkpoints=on \(bad value\)"):
        guc.apply_server_settings(env, Case("fdw-overhead", (("pg", "15"), ("set.log_checkpoints", "on"))))
    assert env.knobs.in_force == {}


def test_session_settings_and_fdw_knobs_go_on_the_foreign_server():
    from pgpathbench.servers import fdw
    env = StudyEnv(options(), "15", None, None, print,
                   knobs=guc.KnobState({"work_mem": {"context": "user"}, "enable_sort": {"context": "user"},
                                        "log_checkpoints": {"context": "sighup"}}))
    case = Case("fdw-overhead", (("pg", "15"), ("fdw.fetch_size", "100"), ("set.enable_sort", "off"),
                                 ("set.log_checkpoints", "on"), ("set.work_mem", "64kB")))
    assert fdw.case_options(env, case) == {"fetch_size": "100", "options": "-c enable_sort=off -c work_mem=64kB"}
    assert fdw.case_options(env, Case("x", (("pg", "15"),))) == {}
