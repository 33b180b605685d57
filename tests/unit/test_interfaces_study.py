"""interfaces (seed 003): the matrix and its exclusions, the clients' JSON, the measured spawn,
the seed's labels and normalisation, the metric catalogues, and the published figures."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import contract_checksum
from pgpathbench.tools import clients
from pgpathbench.tools.clients import ClientOutputError, parse_client_json, repeated_checksum, spawn_measured
from pgpathbench.errors import CaseError, UserError
from pgpathbench.references import (INTERFACES_CANDIDATE_RANKING, INTERFACES_LOCCOMM_DURATION,
                                    INTERFACES_LOCATION_RANKING, INTERFACES_STRATEGY_AVG_DURATION,
                                    INTERFACES_TESTCASE_DURATION)
from pgpathbench.datasets.seed003 import QUERIES, row_bytes, seed_literal, table_sql
from pgpathbench.results.model import RunResult
from pgpathbench.results.upgrade import upgrade_run
from pgpathbench.servers.paths import NetworkPath
from pgpathbench.stats import Summary
from pgpathbench.studies import STUDIES
from pgpathbench.studies.base import StudyEnv
from pgpathbench.matrix import StudyOptions
from pgpathbench.studies.interfaces import study as interfaces_study
from pgpathbench.studies.interfaces.report import candidate_ranking, location_ranking, normalised, seed_groups
from pgpathbench.studies.interfaces.spec import conndesc, numiter_text
from pgpathbench.studies.interfaces_fidelity.spec import target_verdict
from pgpathbench.tools.psql_copy import Reference
from pgpathbench.tools.spawn import Measured

STUDY = STUDIES["interfaces"]


def options(**dims) -> StudyOptions:
    return StudyOptions(STUDY.name, "standard", 3, {}, {**STUDY.default_dims, **dims})


# -- the matrix ----------------------------------------------------------------------------------
def test_default_matrix_is_the_seeds_with_psycopg():
    cases = STUDY.cases(options())
    # per interface: its methods x its transports (libpq 3x3, ODBC 2x3, JDBC 3x2, psycopg 3x3),
    # x 6 query/strategy rows x 3 print/destination rows
    assert len(cases) == (9 + 6 + 6 + 9) * 6 * 3
    ids = {c.case_id for c in cases}
    assert "libpq:copy:-:unix:sql10m:once:p-all:null:0ms:15" in ids        # DESIGN.md's example, + latency, pg
    assert "odbc:normal:-:unix:sql001:each:p-all:file:0ms:15" in ids


def user_servers(**dsns) -> StudyOptions:
    """options() with user servers stored as the CLI stores them (servers/user.stored), the other
    parameters at their defaults."""
    params = {name: p.default for name, p in STUDY.parameters.items()}
    return StudyOptions(STUDY.name, "standard", 3, {**params, "servers": dsns}, dict(STUDY.default_dims))


@pytest.mark.parametrize("dsn, kept", [("host=db1 user=bench dbname=app", ("tcp", "remote")),
                                       ("hostaddr=10.0.0.5 host=/tmp dbname=app", ("tcp", "remote")),
                                       ("host=/var/run/postgresql dbname=app", ("unix", "remote")),
                                       ("dbname=app", ("unix", "remote"))])
def test_a_user_local_server_serves_its_dsns_transport_only(dsn, kept, monkeypatch):
    """No socket of ours on a user server: the local role keeps its DSN's transport (libpq's default,
    without host nor hostaddr, is its socket); the other is left out unless --transport names it."""
    monkeypatch.delenv("PGHOST", raising=False)
    assert STUDY.refine(user_servers(local=dsn), set()).dims["transport"] == kept
    missing = ({"unix", "tcp"} - set(kept)).pop()
    with pytest.raises(UserError, match=f"^--transport {missing}: your server in the local role is reached "):
        STUDY.refine(user_servers(local=dsn), {"transport"})
    given = StudyOptions(STUDY.name, "standard", 3, user_servers(local=dsn).params, {**STUDY.default_dims,
                                                                                    "transport": kept})
    assert STUDY.refine(given, {"transport"}) == given
    assert STUDY.refine(options(), set()) == options()            # managed: every transport


def test_a_user_remote_server_is_reached_over_tcp_and_links_need_no_hostname_check():
    with pytest.raises(UserError, match="^--server remote: its DSN names a unix socket"):
        STUDY.refine(user_servers(remote="host=/var/run/postgresql"), set())
    tls = "host=db2 sslmode=verify-full sslrootcert=ca.crt"
    assert STUDY.refine(user_servers(remote=tls), set()).dims["transport"] == ("unix", "tcp", "remote")
    linked = user_servers(remote=tls)
    linked = StudyOptions(linked.study, linked.preset, 3, linked.params, {**linked.dims, "latency": ("0ms", "5ms")})
    with pytest.raises(UserError, match="^--latency/--bandwidth: an emulated link reaches your remote server"):
        STUDY.refine(linked, {"latency"})
    verify_ca = StudyOptions(linked.study, linked.preset, 3, user_servers(remote=tls.replace("full", "ca")).params,
                             linked.dims)
    assert STUDY.refine(verify_ca, {"latency"}) == verify_ca


def test_tcp_auth_is_the_managed_servers_alone():
    """--tcp-auth md5 rewrites a managed server's pg_hba.conf and stored password: never a user's."""
    md5 = StudyOptions(STUDY.name, "standard", 3, {"servers": {"remote": "host=db2"}, "tcp_auth": "md5"},
                       dict(STUDY.default_dims))
    with pytest.raises(UserError, match=r"^--tcp-auth: your server \(--server remote\) checks passwords as its "
                                        "pg_hba.conf says.*; leave --tcp-auth out$"):
        STUDY.refine(md5, set())
    scram = StudyOptions(md5.study, md5.preset, 3, {**md5.params, "tcp_auth": "scram-sha-256"}, md5.dims)
    assert STUDY.refine(scram, set()) == scram                     # the default changes nothing of theirs
    managed = StudyOptions(md5.study, md5.preset, 3, {"tcp_auth": "md5"}, md5.dims)
    assert STUDY.refine(managed, set()) == managed


def test_seed_exclusions():
    cases = STUDY.cases(options())
    methods = {(c["interface"], c["method"]) for c in cases}
    assert methods == {("libpq", "normal"), ("libpq", "single-row"), ("libpq", "copy"), ("odbc", "normal"),
                       ("odbc", "cursor"), ("jdbc", "normal"), ("jdbc", "cursor"), ("jdbc", "copy"),
                       ("psycopg", "normal"), ("psycopg", "cursor"), ("psycopg", "copy")}
    assert not [c for c in cases if c["interface"] == "jdbc" and c["transport"] == "unix"]
    assert {c["transport"] for c in cases if c["interface"] == "jdbc"} == {"tcp", "remote"}


def test_seed_matrix_without_psycopg_has_the_seeds_288_testcases():
    cases = STUDY.cases(options(interface=("libpq", "odbc", "jdbc"), method=("normal", "single-row", "copy")))
    assert len(cases) == 288          # "Currently executes 288 test cases per run"


@pytest.mark.parametrize("latencies, remote_per_candidate, direct", [
    (("0ms", "5ms"), 2, True),
    (("5ms",), 1, False),
])
def test_links_only_multiply_the_remote_transport(latencies, remote_per_candidate, direct):
    cases = STUDY.cases(options(interface=("libpq",), method=("copy",), sqlstrat=("sql10m:once",),
                                output=("p-all:null",), latency=latencies))
    ids = [c.case_id for c in cases]
    assert "libpq:copy:-:unix:sql10m:once:p-all:null:0ms:15" in ids
    assert "libpq:copy:-:tcp:sql10m:once:p-all:null:0ms:15" in ids
    assert not [i for i in ids if ":unix:" in i and i.endswith(":5ms:15")]
    assert sum(":remote:" in i for i in ids) == remote_per_candidate
    assert ("libpq:copy:-:remote:sql10m:once:p-all:null:0ms:15" in ids) == direct
    assert "libpq:copy:-:remote:sql10m:once:p-all:null:5ms:15" in ids


def test_case_ids_survive_a_json_round_trip_of_options():
    opts = options()
    again = StudyOptions.from_json(json.loads(json.dumps(opts.to_json() | {
        "dims": dict(reversed(list(opts.to_json()["dims"].items())))})))
    assert [c.case_id for c in STUDY.cases(opts)] == [c.case_id for c in STUDY.cases(again)]


def test_presets():
    quick = STUDY.presets["quick"]
    opts = StudyOptions(STUDY.name, "quick", quick.repeat, quick.params,
                        {**STUDY.default_dims, **{k: tuple(v) for k, v in quick.dims.items()}})
    cases = STUDY.cases(opts)
    # every client and method over the three transports connecting once (30 candidates), and each
    # client's normal method connecting per query over TCP, where the four clients meet
    assert len(cases) == 30 + 4
    assert {c["transport"] for c in cases if c["sqlstrat"] == "sql001:once"} == {"unix", "tcp", "remote"}
    assert {(c["interface"], c["method"], c["transport"]) for c in cases if c["sqlstrat"] == "sql001:each"} == \
        {(i, "normal", "tcp") for i in ("libpq", "odbc", "jdbc", "psycopg")}
    assert {c["interface"] for c in cases} == {"libpq", "odbc", "jdbc", "psycopg"}
    assert quick.repeat >= 6                              # real 95% intervals
    paper = STUDY.presets["paper"]
    assert paper.params == {"iterations": 50_000, "t50k_rows": 50_000, "t10m_rows": 10_000_000}
    assert paper.repeat == 9 and not paper.dims          # the seed's group size, every driver row
    assert quick.params["t50k_rows"] >= 4242              # sql001 reads id 4242


def test_each_transports_and_methods_only_restrict_connect_per_query():
    params = {"each_transports": STUDY.parameters["each_transports"].parse("tcp,remote"),
              "each_methods": STUDY.parameters["each_methods"].parse("normal,copy")}
    cases = STUDY.cases(StudyOptions(STUDY.name, "standard", 3, params, STUDY.default_dims))
    each = [c for c in cases if c["sqlstrat"].endswith(":each")]
    assert {c["transport"] for c in each} == {"tcp", "remote"} and {c["method"] for c in each} == {"normal", "copy"}
    assert {c["transport"] for c in cases if c["sqlstrat"].endswith(":once")} == {"unix", "tcp", "remote"}
    assert {c["method"] for c in cases if c["sqlstrat"].endswith(":once")} == set(STUDY.dimensions["method"].values)
    with pytest.raises(UserError, match=r"connect per query runs only with transport tcp \(--each-transports\)"):
        STUDY.cases(StudyOptions(STUDY.name, "quick", 6, {"each_transports": "tcp"},
                                 {**STUDY.default_dims, "transport": ("unix",), "sqlstrat": ("sql001:each",)}))


def test_fetch_multiplies_only_the_cursor_method():
    cases = STUDY.cases(options(interface=("jdbc",), transport=("tcp",), sqlstrat=("sql50k:once",),
                                output=("p-none:null",), fetch=("10", "1000")))
    assert sorted(c.case_id for c in cases) == sorted([
        "jdbc:normal:-:tcp:sql50k:once:p-none:null:0ms:15", "jdbc:copy:-:tcp:sql50k:once:p-none:null:0ms:15",
        "jdbc:cursor:10:tcp:sql50k:once:p-none:null:0ms:15", "jdbc:cursor:1000:tcp:sql50k:once:p-none:null:0ms:15"])
    assert STUDY.dimensions["fetch"].knob and STUDY.dimensions["fetch"].validate("100, 1000", "--fetch") == \
        ("100", "1000")
    # a run stored before --fetch was a dimension (resumed): its --fetch parameter, by results/upgrade.py
    old = StudyOptions(STUDY.name, "standard", 3, {"fetch": 500},
                       {k: v for k, v in options(interface=("odbc",)).dims.items() if k != "fetch"})
    row = {"run_id": "r", "studies": [STUDY.name], "options": {"studies": [old.to_json()]}}
    resumed = StudyOptions.from_json(upgrade_run(row).study_options)
    assert {c["fetch"] for c in STUDY.cases(resumed) if c["method"] == "cursor"} == {"500"}


def test_user_queries_run_as_sqlstrat_name_once_unless_named():
    params = {"query": STUDY.parameters["query"].parse(["mine=select id, x1 from t50k where id % 7 = 0;"])}
    assert params["query"] == {"mine": "select id, x1 from t50k where id % 7 = 0"}
    small = dict(interface=("libpq",), method=("normal",), transport=("tcp",), output=("p-none:null",))
    cases = STUDY.cases(StudyOptions(STUDY.name, "standard", 3, params, options(sqlstrat=("sql001:once",), **small).dims))
    assert {c["sqlstrat"] for c in cases} == {"sql001:once", "mine:once"}
    named = options(sqlstrat=(STUDY.dimensions["sqlstrat"].validate("mine:each,mine:once", "--sqlstrat")), **small)
    assert {c["sqlstrat"] for c in STUDY.cases(StudyOptions(STUDY.name, "standard", 3, params, named.dims))} == \
        {"mine:each", "mine:once"}
    with pytest.raises(UserError, match="--sqlstrat: 'other:once' names no query"):
        STUDY.cases(options(sqlstrat=("other:once",), **small))
    with pytest.raises(UserError, match="given by --query and by --query-file"):
        STUDY.cases(StudyOptions(STUDY.name, "standard", 3, {**params, "query_file": params["query"]}, named.dims))


@pytest.mark.parametrize("raw, message", [
    (["mine"], "give NAME=SQL"),
    (["=select 1"], "give NAME=SQL"),
    (["Mine=select 1"], "not a simple lower-case identifier"),
    (["sql50k=select 1"], "one of the study's own queries"),
    (["a=select 1", "a=select 2"], "given twice"),
    (["a=  ;  "], "the SQL is empty"),
    (["a=-- nothing"], "the SQL is empty"),
    (["a=select 1; delete from t50k"], "more than one statement"),
    (["a=delete from t50k"], "returns rows"),
])
def test_bad_user_query(raw, message):
    with pytest.raises(ValueError, match=message):
        STUDY.parameters["query"].parse(raw)


def test_a_semicolon_inside_quotes_or_comments_is_no_second_statement():
    parse = STUDY.parameters["query"].parse
    assert parse(["a=select ';' as x, $q$;$q$ /* ; */ from t50k; -- end;"]) == \
        {"a": "select ';' as x, $q$;$q$ /* ; */ from t50k"}
    assert parse(['a=with "w;" as (select 1) table "w;"']) == {"a": 'with "w;" as (select 1) table "w;"'}


def test_query_file_must_be_readable_utf8_under_1_mb(tmp_path):
    parse = STUDY.parameters["query_file"].parse
    good = tmp_path / "q.sql"
    good.write_text("select x1\nfrom t10m\n")
    assert parse([f"mine={good}"]) == {"mine": "select x1\nfrom t10m"}
    (tmp_path / "latin1.sql").write_bytes("select 'é'".encode("latin-1"))
    (tmp_path / "big.sql").write_text("select 1 " + " " * (1 << 20))
    for path, message in ((tmp_path / "none.sql", "cannot read .*: No such file"), (tmp_path, "is a directory"),
                          (tmp_path / "latin1.sql", "not UTF-8"), (tmp_path / "big.sql", "is over 1 MiB")):
        with pytest.raises(ValueError, match=message):
            parse([f"mine={path}"])


def test_the_path_of_each_transport():
    cases = STUDY.cases(options(interface=("libpq",), method=("copy",), sqlstrat=("sql10m:once",),
                                output=("p-all:null",), latency=("0ms", "5ms"), pg=("16",)))
    assert {c.case_id: STUDY.path(c) for c in cases} == {
        "libpq:copy:-:unix:sql10m:once:p-all:null:0ms:16": None,
        "libpq:copy:-:tcp:sql10m:once:p-all:null:0ms:16": NetworkPath("16", "local", "0ms"),   # lcl:tcp is probed
        "libpq:copy:-:remote:sql10m:once:p-all:null:0ms:16": NetworkPath("16", "remote", "0ms"),
        "libpq:copy:-:remote:sql10m:once:p-all:null:5ms:16": NetworkPath("16", "remote", "5ms")}


@pytest.mark.parametrize("name, raw, message", [
    ("t50k_rows", "100", "is not a row count >= 4242"),
    ("iterations", "0", "is not a row count >= 1"),
    ("iterations", "x", "is not a row count"),
    ("jvm_options", "-jar other.jar", "give JVM options only"),
    ("each_transports", "ssl", "give transports among unix,tcp,remote"),
    ("each_methods", "normal,chunked", "give methods among normal,single-row,cursor,copy"),
])
def test_parameters_reject(name, raw, message):
    with pytest.raises(ValueError, match=message):
        STUDY.parameters[name].parse(raw)


def test_parameters_parse():
    assert STUDY.parameters["t10m_rows"].parse("10m") == 10_000_000
    assert STUDY.parameters["iterations"].parse("50k") == 50_000
    assert STUDY.parameters["jvm_options"].parse(" -Xmx1g   -XX:+UseSerialGC ") == "-Xmx1g -XX:+UseSerialGC"
    assert STUDY.parameters["each_transports"].parse("tcp,unix,tcp") == "tcp,unix"


# -- the seed's tables and labels ----------------------------------------------------------------
def test_seed_tables_have_the_seeds_widths():
    assert seed_literal(1, 99) == "1" + "a" * 98 and seed_literal(5, 57) == "5" + "b" * 56
    assert seed_literal(9, 15) == "9cccccccccccccc"
    sql = table_sql("t10m", 10)
    assert "'1aaaaaaaaaaaaa', '2" + "b" * 56 + "', '3cccccccccccccc'" in sql[2]
    assert "generate_series(1, 10)" in sql[2] and "PRIMARY KEY" not in sql[1]
    assert "id int PRIMARY KEY" in table_sql("t50k", 5000)[1]


@pytest.mark.parametrize("table, rows", [("t50k", 5000), ("t10m", 150_000), ("t10m", 1), ("t50k", 10)])
def test_row_bytes_is_the_copy_text_size(table, rows):
    widths = (99,) * 9 if table == "t50k" else (14, 57, 15, 15, 57, 15, 15, 57, 15)
    row_tail = sum(widths) + 10     # nine texts, ten separators ('\t' x 9 and '\n')
    assert row_bytes(table, rows) == sum(len(str(i)) + row_tail for i in range(1, rows + 1))


def test_copy_sizes_of_the_contracts_example():
    # clients/CONTRACT.md: 1M rows of the t10m shape are 275,888,896 bytes of COPY text
    assert row_bytes("t10m", 1_000_000) == 275_888_896


@pytest.mark.parametrize("n, text", [(1, "001"), (50, "050"), (999, "999"), (1000, "1k"), (50_000, "50k"),
                                     (1500, "1500"), (10_000_000, "10m"), (1_000_000, "1m")])
def test_numiter_text(n, text):
    assert numiter_text(n) == text


def test_conndesc():
    assert [conndesc(t) for t in ("unix", "tcp", "remote")] == ["lcl:ipc", "lcl:tcp", "rmt:tcp"]
    assert conndesc("remote", "5ms") == "rmt+5ms:tcp"


def test_reference_repeats_the_checksum_over_iterations():
    text = b"4242\taaa\n1\tb\n"
    ref = Reference(2, len(text), f"{clients.rows_checksum(text):016x}")
    rows, size, checksum = ref.repeated(3)
    assert (rows, size) == (6, 3 * len(text)) and checksum == f"{clients.rows_checksum(text * 3):016x}"
    assert checksum == contract_checksum(text, 3)
    assert ref.repeated(1) == (2, len(text), ref.checksum)
    big = Reference(10_000_000, 2_758_888_896, "ffffffffffffffff")             # -1: repeating wraps
    assert big.repeated(50_000)[2] == f"{(1 << 64) - 50_000:016x}"


class FakeCluster:
    """A server as prepare sees it, without a server: its tables load, its conninfo names it."""
    managed, transports = True, ("unix", "tcp")

    def __init__(self, name: str):
        self.name = name

    def client_env(self, base: dict) -> dict:
        return base

    def create_database(self, db: str) -> None:
        pass

    def connect(self, db: str) -> FakeCluster:
        return self

    def __enter__(self) -> FakeCluster:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def execute(self, sql: str) -> None:
        pass

    def conninfo(self, db: str, transport: str = "unix") -> str:
        return f"host={self.name}"


def test_servers_whose_tables_differ_are_one_user_error(monkeypatch):
    """psql's COPY of a query differs between the local and the remote server: a one-line UserError
    (the CLI prints it, exit 2) naming the query and each server's rows, bytes and checksum."""
    servers = SimpleNamespace(server=lambda name, **kw: FakeCluster(name),
                              path=lambda *a: SimpleNamespace(conninfo=lambda ci: ci),
                              workspace=SimpleNamespace(free_bytes=lambda: 1 << 50))
    checksums = {"host=local": "dbec46c5fb5c3985", "host=remote": "2b43fc3dcdf873af"}
    monkeypatch.setattr(interfaces_study, "copy_reference",
                        lambda psql, ci, sql, timeout, env: Reference(150_000, 41_288_895, checksums[ci]))
    opts = StudyOptions(STUDY.name, "quick", 3, {"t50k_rows": 5000, "t10m_rows": 150_000, "timeout": 60,
                                                 "tcp_auth": "scram-sha-256"},
                        {**STUDY.default_dims, "transport": ("tcp", "remote"), "sqlstrat": ("sql10m:once",)})
    env = StudyEnv(opts, "15", SimpleNamespace(path=lambda tool: tool), servers, lambda line: None)
    with pytest.raises(UserError) as e:
        STUDY.prepare(env)
    assert str(e.value) == ("sql10m: the servers' tables differ (psql COPY): local rows 150000, bytes 41288895, "
                            "checksum dbec46c5fb5c3985; remote rows 150000, bytes 41288895, checksum 2b43fc3dcdf873af")


# -- the seed's analysis -------------------------------------------------------------------------
def measurement(interface, method, transport, sqlstrat, round_no, duration_s, iterations=1, output="p-all:file",
                latency="0ms", pg="15", study="interfaces", ok=True):
    dims = {"interface": interface, "method": method, "transport": transport, "sqlstrat": sqlstrat,
            "output": output, "latency": latency, "pg": pg}
    return {"study": study, "ok": ok, "round": round_no, "dims": dims, "case_id": ":".join(dims.values()),
            "metrics": {"duration_ms": duration_s * 1000, "iterations": iterations}}


def result_of(measurements):
    """The result model of a run holding these measurements (model version 2: milliseconds)."""
    run = {"run_id": "r", "studies": ["interfaces"], "options": {"model_version": 2}}
    return RunResult.from_rows(run, [], measurements, []).study


def test_groups_carry_the_seeds_labels():
    (g,) = seed_groups(result_of([measurement("odbc", "normal", "unix", "sql001:each", 3, 2.5, 50_000,
                                              "p-all:null")]))
    # the seed's first testcase, ODBC:lcl:ipc:sql001:0:50k:acc-n:p-all:null, as its views take it apart
    assert (g.candidate, g.location, g.ifmeth_testcase, g.loccomm_testcase) == \
        ("ODBC:acc-n", "lcl:ipc", "sql001:50k:lcl:ipc:0:p-all:null", "ODBC:acc-n:sql001:50k:0:p-all:null")
    assert (g.grpsz, g.duration, g.drange) == (1, 2.5, 0.0)
    assert g.key.seed_testcase() == "sql001:50k:lcl:ipc:0:p-all:null"


def test_normalised_duration_and_ranking_by_hand():
    # one testcase (sql50k once over lcl:tcp), three candidates, two rounds each
    ms = [measurement("libpq", "copy", "tcp", "sql50k:once", 1, 1.0), measurement("libpq", "copy", "tcp", "sql50k:once", 2, 1.2),
          measurement("odbc", "normal", "tcp", "sql50k:once", 1, 2.0), measurement("odbc", "normal", "tcp", "sql50k:once", 2, 2.0),
          measurement("jdbc", "normal", "tcp", "sql50k:once", 1, 4.0), measurement("jdbc", "normal", "tcp", "sql50k:once", 2, 5.0)]
    groups = seed_groups(result_of(ms))
    by = {g.candidate: (g, nd, nr) for g, nd, nr in normalised(groups, "ifmeth_testcase")}
    # averages 1.1, 2.0, 4.5 -> (x - 1.1) / 3.4; ranges 0.2, 0, 1 -> x / 1
    assert by["libpq:acc-y"][1:] == (0.0, 0.2)
    assert by["ODBC:acc-n"][1] == round(0.9 / 3.4, 5) and by["ODBC:acc-n"][2] == 0.0
    assert by["JDBC:acc-n"][1:] == (1.0, 1.0)
    assert by["JDBC:acc-n"][0].grpsz == 2 and by["JDBC:acc-n"][0].drange == 1.0
    ranking = candidate_ranking(groups)["15"]
    assert [r.candidate for r in ranking] == ["libpq:acc-y", "ODBC:acc-n", "JDBC:acc-n"]
    assert ranking[1][:5] == ("ODBC:acc-n", 2.0, round(0.9 / 3.4, 3), 0.0, 1)


def test_a_testcase_with_one_candidate_normalises_to_zero_not_a_division_by_zero():
    ms = [measurement("libpq", "copy", "unix", "sql10m:once", r, 1.0 + r) for r in (1, 2)]
    (row,) = candidate_ranking(seed_groups(result_of(ms)))["15"]
    assert (row.avg_nml_dur, row.avg_nml_drng) == (0.0, 0.0)


def test_location_ranking_partitions_by_interface_and_method():
    ms = []
    for rnd in (1, 2):
        for transport, d in (("unix", 1.0), ("tcp", 2.0), ("remote", 3.0)):
            ms.append(measurement("libpq", "normal", transport, "sql50k:once", rnd, d))
            ms.append(measurement("odbc", "normal", transport, "sql50k:once", rnd, d * 10))
    ranking = location_ranking(seed_groups(result_of(ms)))["15"]
    assert [(r.candidate, r.avg_nml_dur, r.testcases) for r in ranking] == \
        [("lcl:ipc", 0.0, 2), ("lcl:tcp", 0.5, 2), ("rmt:tcp", 1.0, 2)]


def test_failed_and_other_studies_measurements_are_left_out():
    ms = [measurement("libpq", "copy", "unix", "sql10m:once", 1, 1.0),
          measurement("libpq", "copy", "unix", "sql10m:once", 2, 9.0, ok=False)]
    (g,) = seed_groups(result_of(ms))
    assert (g.grpsz, g.duration) == (1, 1.0)
    # A run holds one study: another study's measurement never reaches the analysis.
    with pytest.raises(ValueError, match="holds a measurement of fdw-overhead"):
        result_of(ms + [measurement("libpq", "copy", "unix", "sql10m:once", 3, 9.0, study="fdw-overhead")])


# -- the metric catalogues -----------------------------------------------------------------------
def fake_client(rows, size, checksum):
    """run_native_client's stand-in: a client run that read these rows, with the contract's times."""
    def run(client, conninfo, sql, *, mode="normal", iterations=1, dest="/dev/null", **kw):
        if dest != "/dev/null":
            Path(dest).write_bytes(b"x" * size * iterations)
        out = {**GOOD, "client": client, "mode": mode, "iterations": iterations, "rows": rows * iterations,
               "bytes": size * iterations, "checksum": f"{repeated_checksum(int(checksum, 16), iterations):016x}"}
        return clients.ClientRun(out, 0.25, 0.1, 0.05, 20480)
    return run


@pytest.mark.parametrize("sqlstrat, output", [("sql001:each", "p-all:file"), ("sql10m:once", "p-none:null")])
def test_every_metric_a_measurement_carries_is_declared(monkeypatch, tmp_path, sqlstrat, output):
    ref = Reference(3, 300, "00000000000000ff")
    monkeypatch.setattr(interfaces_study, "run_native_client", fake_client(3, 300, ref.checksum))
    (case,) = STUDY.cases(options(interface=("libpq",), method=("copy",), transport=("tcp",),
                                  sqlstrat=(sqlstrat,), output=(output,)))
    opts = StudyOptions(STUDY.name, "quick", 6, {"iterations": 20, "timeout": 60}, STUDY.default_dims)
    target = interfaces_study.Target("host=x", SimpleNamespace(client_env=lambda base: {**base, "PGPASSFILE": "pf"},
                                                                 tls=None))
    env = StudyEnv(opts, "15", None, None, lambda line: None,
                   interfaces_study.InterfacesState(dict(QUERIES), {"local": target.server},
                                                    {("tcp", "0ms", "direct"): target},
                                                    {"sql001": ref, "sql10m": ref}, [], str(tmp_path / "out")))
    metrics = STUDY.measure(env, case)
    assert set(metrics) <= set(STUDY.metrics), set(metrics) - set(STUDY.metrics)
    assert metrics["duration_ms"] == 250 and metrics["connect_ms"] == pytest.approx(1.0)
    assert metrics["startup_ms"] == pytest.approx(250 - 6) and metrics["cpu_ms"] == pytest.approx(150)
    assert STUDY.metrics[STUDY.primary_metric].better == "lower"


PGBENCH_LOOP = ("number of transactions actually processed: 2000/2000\n"
                "initial connection time = 3.500 ms\ntps = 8000.0 (without initial connection time)\n")


@pytest.mark.parametrize("workload, tool", [("copy", "reference"), ("loop", "reference"), ("copy", "libpq"),
                                            ("loop", "jdbc"), ("copy", "libpq-nochecksum")])
def test_every_fidelity_metric_is_declared(monkeypatch, workload, tool):
    from pgpathbench.studies.interfaces_fidelity import study as fidelity_study
    study = STUDIES["interfaces-fidelity"]
    ref = Reference(3, 300, "00000000000000ff")
    monkeypatch.setattr(fidelity_study, "run_native_client", fake_client(3 if workload == "copy" else 1, 300,
                                                                         ref.checksum))
    monkeypatch.setattr(fidelity_study, "spawn_measured", lambda args, timeout, env=None, stdout=None: Measured(
        tuple(args), 0, PGBENCH_LOOP if "pgbench" in args[0] else "", "", 0.5, 0.2, 0.1, 4096))
    (case,) = [c for c in study.cases(StudyOptions(study.name, "quick", 6, {}, study.default_dims))
               if (c["workload"], c["tool"], c["transport"]) == (workload, tool, "tcp")]
    opts = StudyOptions(study.name, "quick", 6, {"iterations": 2000, "timeout": 60}, study.default_dims)
    env = StudyEnv(opts, "15", SimpleNamespace(path=lambda tool: tool), None, lambda line: None,
                   fidelity_study.InterfacesFidelityState({"tcp": interfaces_study.Target("host=x", None)}, "loop.sql",
                                                          ref, {"PGPASSFILE": "pf"}, []))
    metrics = study.measure(env, case)
    assert set(metrics) <= set(study.metrics), set(metrics) - set(study.metrics)
    assert metrics["duration_ms"] > 0 and study.metrics[study.primary_metric].unit == "ms"
    if (workload, tool) == ("loop", "reference"):
        assert metrics["work_ms"] == pytest.approx(2000 / 8000 * 1000) and metrics["connect_ms"] == 3.5


# -- the published figures -----------------------------------------------------------------------
def test_published_rankings_are_the_slides():
    assert list(INTERFACES_CANDIDATE_RANKING) == ["libpq:acc-a", "libpq:acc-n", "libpq:acc-y", "JDBC:acc-y",
                                                  "ODBC:acc-n", "JDBC:acc-n"]
    assert [v[1] for v in INTERFACES_CANDIDATE_RANKING.values()] == sorted(
        v[1] for v in INTERFACES_CANDIDATE_RANKING.values())
    assert INTERFACES_LOCATION_RANKING["rmt:tcp"] == (9.0, 1.0, 0.538)
    assert len(INTERFACES_STRATEGY_AVG_DURATION) == 12
    # The slides agree with each other: libpq normal, sql50k once over rmt:tcp, on two slides
    assert INTERFACES_TESTCASE_DURATION[("sql50k:001:rmt:tcp:1:p-all:file", "libpq:acc-n")] == \
        INTERFACES_LOCCOMM_DURATION[("libpq:acc-n:sql50k:001:1:p-all:file", "rmt:tcp")] == 0.60207
    # and the strategy summary is the mean of a testcase's candidates
    tc = "sql001:50k:lcl:tcp:1:p-all:file"
    mean = statistics.fmean(v for (t, _), v in INTERFACES_TESTCASE_DURATION.items() if t == tc)
    assert round(mean, 3) == INTERFACES_STRATEGY_AVG_DURATION[tc]


# -- the clients' JSON ---------------------------------------------------------------------------
GOOD = {"client": "libpq", "version": "libpq 15.18", "mode": "copy", "iterations": 2, "rows": 4, "bytes": 100,
        "checksum": "0123456789abcdef", "connect_s": 0.001, "exec_s": 0.002, "fetch_s": 0.003, "total_s": 0.006,
        "iteration_us": {"min": 2900, "max": 2950, "hist": [[2816, 1], [2944, 1]]}}


ONE_ITERATION = {"min": 5000, "max": 5000, "hist": [[4864, 1]]}


def line(**changes) -> str:
    return json.dumps({**GOOD, **changes}) + "\n"


def test_valid_json_is_returned():
    assert parse_client_json(line(), "libpq", "copy", 2) == GOOD


@pytest.mark.parametrize("stdout, message", [
    ("", "expected one JSON line on stdout, got 0"),
    (line() + line(), "got 2"),
    ("not json\n", "stdout is not JSON"),
    ("[1, 2]\n", "expected a JSON object"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "bytes"}), "JSON keys"),
    (json.dumps(dict(reversed(list(GOOD.items())))), "in that order"),
    (json.dumps({**GOOD, "extra": 1}), "JSON keys"),
    (line(client="odbc"), "client is 'odbc', expected 'libpq'"),
    (line(version="libpq"), "version names no driver version"),
    (line(mode="normal"), "mode is 'normal', expected 'copy'"),
    (line(iterations=3), "iterations is 3, expected 2"),
    (line(rows=-1), "rows is not a whole number"),
    (line(rows=True), "rows is not a whole number"),
    (line(bytes=1.5), "bytes is not a whole number"),
    (line(checksum="0123456789ABCDEF"), "checksum is not 16 lower-case hex digits"),
    (line(checksum="0123"), "checksum is not 16"),
    (line(fetch_s=-0.1), "fetch_s is not a number of seconds"),
    (line(exec_s="0.1"), "exec_s is not a number of seconds"),
    (line(total_s=0.005), "exceed total_s"),
])
def test_invalid_json_fails_the_measurement(stdout, message):
    with pytest.raises(ClientOutputError, match=message) as e:
        parse_client_json(stdout, "libpq", "copy", 2)
    assert isinstance(e.value, CaseError)


def test_rounding_slack_of_six_decimals():
    assert parse_client_json(line(total_s=0.005997), "libpq", "copy", 2)["total_s"] == 0.005997


# -- the measured spawn ----------------------------------------------------------------------------
needs_measure = pytest.mark.skipif(not clients.MEASURE.is_file(), reason="scripts/build-clients not run")


@needs_measure
def test_peak_rss_is_the_childs_own_not_the_parents():
    ballast = bytearray(200 << 20)     # this process is large: a forked child must not inherit that
    ballast[::4096] = b"x" * len(ballast[::4096])
    small = spawn_measured(["true"], 10)
    big = spawn_measured([sys.executable, "-c", "b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096])"],
                         30)
    del ballast
    assert small.returncode == 0 and small.peak_rss_kib < 10 * 1024, small
    assert big.returncode == 0 and big.peak_rss_kib > 300 * 1024, big


@needs_measure
def test_cpu_time_and_wall_time_and_output():
    m = spawn_measured([sys.executable, "-c", "import time, sys\nt = time.process_time()\n"
                        "while time.process_time() - t < 0.3: pass\nprint('out'); print('err', file=sys.stderr)"], 30)
    assert m.returncode == 0 and m.stdout == "out\n" and m.stderr == "err\n"
    assert 0.25 < m.user_s + m.sys_s < m.wall_s + 0.05 and m.wall_s < 10


@needs_measure
def test_exit_codes_signals_and_timeouts():
    assert spawn_measured(["sh", "-c", "exit 3"], 10).returncode == 3
    assert spawn_measured(["sh", "-c", "kill -9 $$"], 10).returncode == -9
    missing = spawn_measured(["/nonexistent/program"], 10)
    assert missing.returncode == 127 and "cannot run" in missing.stderr
    slow = spawn_measured(["sleep", "30"], 0.5)
    assert slow.timed_out and slow.wall_s < 5


@needs_measure
def test_run_native_client_maps_failures_to_case_errors(tmp_path, monkeypatch):
    fake = tmp_path / "pgpb_libpq"
    fake.write_text("#!/bin/sh\n"
                    "case \"$2\" in\n"
                    "  usage) echo 'pgpb_libpq: -k: bad' >&2; exit 2 ;;\n"
                    "  server) echo 'pgpb_libpq: query failed: ERROR: boom' >&2; exit 3 ;;\n"
                    "  garbage) echo 'hello'; exit 0 ;;\n"
                    f"  *) echo '{json.dumps({**GOOD, 'mode': 'normal', 'iterations': 1, 'iteration_us': ONE_ITERATION})}' ;;\n"
                    "esac\n")
    fake.chmod(0o755)
    monkeypatch.setattr(clients, "TOOLS", tmp_path)
    ok = clients.run_native_client("libpq", "ok", "select 1")
    assert ok.output["rows"] == 4 and ok.peak_rss_kib > 0 and ok.wall_s > 0
    for conninfo, message in (("usage", "usage error: pgpb_libpq: -k: bad"),
                              ("server", "server or connection error: pgpb_libpq: query failed: ERROR: boom"),
                              ("garbage", "stdout is not JSON")):
        with pytest.raises(CaseError, match=message):
            clients.run_native_client("libpq", conninfo, "select 1")


# -- the fidelity study ------------------------------------------------------------------------------
def test_fidelity_matrix_and_target():
    study = STUDIES["interfaces-fidelity"]
    cases = study.cases(StudyOptions(study.name, "quick", 6, {}, study.default_dims))
    ids = {c.case_id for c in cases}
    assert len(cases) == 2 * (6 * 2 - 1)             # JDBC has no unix socket
    assert "copy:reference:unix:15" in ids and "loop:jdbc:tcp:15" in ids and "loop:jdbc:unix:15" not in ids
    assert "copy:libpq-nochecksum:unix:15" in ids

    def summary(median, low, high, n=10, coverage=0.98):
        return Summary(n, median, low, high, coverage, median, low, high, 0.0, 0)

    assert target_verdict(summary(1.01, 0.98, 1.04)) == "met"
    assert target_verdict(summary(1.03, 0.99, 1.08)) == "undecided: median within, CI spans 1.05"
    assert target_verdict(summary(1.10, 1.02, 1.2)) == "undecided: median above, CI spans 1.05"
    assert target_verdict(summary(1.2, 1.1, 1.3)) == "missed"
    assert "too few rounds (3)" in target_verdict(summary(1.0, 0.9, 1.1, n=3, coverage=0.75))


def test_fidelity_keeps_a_user_local_servers_transport_only(monkeypatch):
    """interfaces-fidelity's local role as interfaces': the DSN's transport, the other refused when named."""
    monkeypatch.delenv("PGHOST", raising=False)
    study = STUDIES["interfaces-fidelity"]
    opts = StudyOptions(study.name, "quick", 6, {"servers": {"local": "host=db1 dbname=app"}}, study.default_dims)
    assert study.refine(opts, set()).dims["transport"] == ("tcp",)
    with pytest.raises(UserError, match=r"^--transport unix: .*\(e\.g\. --transport tcp\)"):
        study.refine(opts, {"transport"})
    managed = StudyOptions(study.name, "quick", 6, {}, study.default_dims)
    assert study.refine(managed, set()) == managed
    assert study.vocabulary.roles["local"].needs == ("createdb",)
