"""interfaces (seed 003): the matrix and its exclusions, the seed's tables and labels, and the
fidelity study's matrix (test_interfaces_measurements: what is made of a measurement)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from conftest import contract_checksum
from pgpathbench.tools import clients
from pgpathbench.errors import UserError
from pgpathbench.datasets.seed003 import row_bytes, seed_literal, table_sql
from pgpathbench.results.upgrade import upgrade_run
from pgpathbench.servers.paths import NetworkPath
from pgpathbench.stats import Summary
from pgpathbench.studies import STUDIES
from pgpathbench.studies.base import StudyEnv
from pgpathbench.matrix import StudyOptions
from pgpathbench.studies.interfaces import study as interfaces_study
from pgpathbench.studies.interfaces.spec import conndesc, numiter_text
from pgpathbench.studies.interfaces_fidelity.spec import target_verdict
from pgpathbench.tools.psql_copy import Reference

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
