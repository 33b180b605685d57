"""file-fdw-tpch without servers: query texts, the case matrix, parse-rate arithmetic, answer
comparison and its tolerance, slicing of files for COPY, the disk check and generation
(test_file_fdw_tpch_report: plan shapes and the report's arithmetic)."""

from __future__ import annotations

import os
from datetime import date
from decimal import Decimal

import duckdb
import psycopg
import pytest

from pgpathbench.datasets.tpch import queries, schema
from pgpathbench.datasets.tpch.answers import AnswerMismatch, answer_digest, compare_rows, values_match
from pgpathbench.datasets.tpch.files import TpchFiles, parse_rate
from pgpathbench.datasets.tpch.load import split_points
from pgpathbench.errors import UserError
from pgpathbench.references import FILE_FDW_TPCH_SECONDS, file_fdw_tpch_slowdown
from pgpathbench.studies import STUDIES
from pgpathbench.studies.base import StudyEnv
from pgpathbench.matrix import StudyOptions
from pgpathbench.studies.file_fdw_tpch.spec import (CLUSTER_SETTINGS, cluster_settings, disk_needed, expand_queries,
                                                    layout_settings, parse_query, parse_scale, scan_cores,
                                                    search_path)
from pgpathbench.studies.file_fdw_tpch.checks import warm_up_and_check
from pgpathbench.studies.file_fdw_tpch.study import FileFdwTpchState, Shape, check_disk, warmup_line

STUDY = STUDIES["file-fdw-tpch"]


# --- query texts ---------------------------------------------------------------------------------
def test_twenty_two_queries_and_the_seeds_eight():
    assert queries.ALL_QUERIES == tuple(f"q{i}" for i in range(1, 23))
    assert set(queries.QUERIES) == set(queries.ALL_QUERIES)
    assert queries.SEED_QUERIES == ("q1", "q3", "q5", "q6", "q10", "q12", "q14", "q19")
    assert set(queries.SPEC_TEXT) == {"q2", "q17", "q20", "q21"}   # what PostgreSQL runs decorrelated
    for q in queries.ALL_QUERIES:
        text = queries.query_text(q, 1)
        assert text.lower().startswith(("select", "with")) and ";" not in text and "{" not in text


@pytest.mark.parametrize("query, parameters", [
    ("q1", ["date '1998-12-01' - interval '90' day"]),
    ("q3", ["'BUILDING'", "date '1995-03-15'"]),
    ("q5", ["'ASIA'", "date '1994-01-01'", "interval '1' year"]),
    ("q6", ["date '1994-01-01'", "0.06 - 0.01", "0.06 + 0.01", "l_quantity < 24"]),
    ("q10", ["date '1993-10-01'", "interval '3' month"]),
    ("q12", ["('MAIL', 'SHIP')", "date '1994-01-01'"]),
    ("q14", ["date '1995-09-01'", "interval '1' month"]),
    ("q19", ["'Brand#12'", "'Brand#23'", "'Brand#34'", "l_quantity >= 1 ", "l_quantity >= 10 ", "l_quantity >= 20 "]),
    ("q2", ["p_size = 15", "'%BRASS'", "'EUROPE'"]),
    ("q7", ["'FRANCE'", "'GERMANY'"]),
    ("q8", ["'BRAZIL'", "'AMERICA'", "'ECONOMY ANODIZED STEEL'"]),
    ("q9", ["'%green%'"]),
    ("q13", ["'%special%requests%'"]),
    ("q16", ["'Brand#45'", "'MEDIUM POLISHED%'", "(49, 14, 23, 45, 19, 3, 36, 9)"]),
    ("q17", ["'Brand#23'", "'MED BOX'"]),
    ("q18", ["> 300"]),
    ("q20", ["'forest%'", "'CANADA'"]),
    ("q21", ["'SAUDI ARABIA'"]),
    ("q22", ["('13', '31', '23', '29', '30', '18', '17')"]),
])
def test_validation_parameters(query, parameters):
    text = queries.query_text(query, 1)
    for p in parameters:
        assert p in text, f"{query}: {p}"


def test_q11_fraction_is_0_0001_over_sf():
    assert queries.fraction(1) == "0.0001"
    assert queries.fraction(10) == "0.00001"
    assert queries.fraction(0.05) == "0.002"
    assert "* 0.00001" in queries.query_text("q11", 10)


@pytest.fixture(scope="module")
def empty_duckdb():
    con = duckdb.connect()
    for table, cols in schema.TABLES.items():
        con.execute(f"CREATE TABLE {table} (" + ", ".join(f"{n} {schema.duckdb_type(t)}" for n, t in cols) + ")")
    yield con
    con.close()


@pytest.mark.parametrize("query", queries.ALL_QUERIES)
def test_every_text_parses_and_binds_in_an_independent_engine(empty_duckdb, query):
    """Both texts of every query are valid SQL over the TPC-H schema (names, types): DuckDB plans them."""
    for text in {queries.query_text(query, 1), queries.spec_text(query, 1)}:
        empty_duckdb.execute(f"EXPLAIN {text}")
        assert empty_duckdb.execute(text).fetchall() is not None


def test_tables_of():
    assert queries.tables_of("q1") == queries.tables_of("q6") == {"lineitem"}
    assert queries.tables_of("q12") == {"orders", "lineitem"}
    assert queries.tables_of("q8") == {"part", "supplier", "lineitem", "orders", "customer", "nation", "region"}
    assert set(queries.SCAN_QUERIES) == {"q1", "q6"}


def test_schema_columns_and_dummy():
    assert len(schema.TABLES["lineitem"]) == 16 and len(schema.TABLES["orders"]) == 9
    assert schema.column_list("region", with_dummy=True).endswith(f"{schema.DUMMY_COLUMN} text")
    assert schema.duckdb_type("char(25)") == "VARCHAR" and schema.duckdb_type("numeric(15,2)") == "DECIMAL(15,2)"


# --- options and the case matrix -------------------------------------------------------------------
@pytest.mark.parametrize("raw, expect", [("6", "q6"), ("q6", "q6"), ("Q06", "q6"), ("22", "q22"), ("all", "all")])
def test_parse_query(raw, expect):
    assert parse_query(raw) == expect


@pytest.mark.parametrize("raw", ["0", "23", "q", "q23", "1x", ""])
def test_parse_query_rejects(raw):
    with pytest.raises(ValueError, match="1 to 22"):
        parse_query(raw)


def test_user_queries_join_the_chosen_queries(tmp_path):
    study = STUDIES["file-fdw-tpch"]
    sql = tmp_path / "mine.sql"
    sql.write_text("select n_name, count(*) from nation group by n_name; -- mine\n")
    user = study.parameters["query_file"].parse([f"mine={sql}"])
    assert user == {"mine": "select n_name, count(*) from nation group by n_name"}
    base = {"scale": 0.01, "partitions": 2, "timeout": 60, "query_file": user}
    dims = {**study.default_dims, "layout": ("single",)}
    cases = study.cases(StudyOptions(study.name, "quick", 2, base, {**dims, "queries": ("q6",)}))
    assert [c.case_id for c in cases] == ["q6:regular:single:15", "q6:foreign:single:15",
                                          "mine:regular:single:15", "mine:foreign:single:15"]
    only = study.cases(StudyOptions(study.name, "quick", 2, base, {**dims, "queries": (parse_query("mine"),)}))
    assert {c["queries"] for c in only} == {"mine"}
    assert Shape.of(StudyOptions(study.name, "quick", 2, base, dims)).text("mine") == user["mine"]
    with pytest.raises(UserError, match="--queries: 'other' is no TPC-H query"):
        study.cases(StudyOptions(study.name, "quick", 2, base, {**dims, "queries": ("other",)}))
    for bad, message in ((["q7=x"], "one of the study's own queries"), ([f"all={sql}"], "study's own"),
                         ([f"mine={tmp_path}"], "is a directory")):
        with pytest.raises(ValueError, match=message):
            study.parameters["query_file"].parse(bad)


def test_parse_scale():
    assert parse_scale("0.05") == 0.05 and parse_scale("10") == 10.0
    for bad in ("0", "-1", "abc", "301"):
        with pytest.raises(ValueError):
            parse_scale(bad)


def options(**dims) -> StudyOptions:
    base = {k: tuple(v) for k, v in STUDY.default_dims.items()}
    base.update(dims)
    return StudyOptions(STUDY.name, "quick", 3, {"scale": 0.05, "partitions": 2, "timeout": 60}, base)


def test_default_matrix_is_the_seeds_eight_on_both_storages_and_every_layout():
    cases = STUDY.cases(options())
    assert len(cases) == 8 * 2 * 3
    ids = {c.case_id for c in cases}
    assert "q6:foreign:postgres_fdw:15" in ids and "q1:regular:single:15" in ids
    assert [name for name, _ in cases[0].dims] == ["queries", "storage", "layout", "pg"]


def test_all_expands_in_query_order():
    assert expand_queries(("all",)) == queries.ALL_QUERIES
    assert expand_queries(("q10", "q2", "q10")) == ("q2", "q10")
    cases = STUDY.cases(options(queries=("all",), layout=("single",)))
    assert len(cases) == 22 * 2 and cases[0].case_id == "q1:regular:single:15"


def test_cli_dimension_validation():
    dim = STUDY.dimensions["queries"]
    assert dim.validate("1,6,q6, 19", "--queries") == ("q1", "q6", "q19")
    with pytest.raises(UserError, match="--queries: unknown query '23'"):
        dim.validate("1,23", "--queries")
    with pytest.raises(UserError, match="--layout: unknown value 'cluster'"):
        STUDY.dimensions["layout"].validate("single,cluster", "--layout")
    # the postgres_fdw layout's name in runs stored before it had it
    assert STUDY.dimensions["layout"].validate("scaleout,citus", "--layout") == ("postgres_fdw", "citus")


def test_presets():
    assert STUDY.presets["paper"].params["scale"] == 10 and "queries" not in STUDY.presets["paper"].dims
    assert STUDY.presets["standard"].params["scale"] == 1 and STUDY.presets["standard"].dims["queries"] == ("all",)
    assert STUDY.presets["quick"].params["scale"] < 1
    assert STUDY.presets["quick"].repeat >= 6      # enough rounds for real 95% intervals


def test_layout_settings_and_search_path():
    assert layout_settings("single", 4)["max_parallel_workers_per_gather"] == "0"
    part = layout_settings("partitioned", 4)
    assert part["max_parallel_workers_per_gather"] == "3" and part["enable_partitionwise_join"] == "on"
    assert layout_settings("partitioned", 1)["max_parallel_workers_per_gather"] == "1"
    fdw = layout_settings("postgres_fdw", 4)
    assert fdw["max_parallel_workers_per_gather"] == "0" and fdw["enable_partitionwise_join"] == "on"
    assert fdw["enable_partitionwise_aggregate"] == "off"   # else no asynchronous Append
    assert layout_settings("scaleout", 4) == fdw             # a stored run's name for it
    assert layout_settings("citus", 4)["max_parallel_workers_per_gather"] == "0"   # its workers run the shards
    assert search_path("single", "foreign") == "single_foreign"
    assert search_path("postgres_fdw", "regular") == "postgres_fdw_regular, single_regular"
    assert search_path("citus", "columnar") == "citus_columnar"   # its own reference tables


def test_temp_file_limit_is_each_process_share_of_the_reserved_spill():
    """The disk check reserves 2 GB of temporary files per unit of scale; a query's processes (its
    backend and one per partition) each get their share, at least 1 GB, so a runaway spill fails
    one query instead of filling the disk (the SF 10 scale-out warm-up did)."""
    paper = cluster_settings(10.0, 2)
    assert paper["temp_file_limit"] == f"{int(20e9 / 3 / 1024)}kB"
    assert 3 * int(paper["temp_file_limit"][:-2]) * 1024 <= disk_needed(10, ("single",), True, True)
    assert cluster_settings(0.01, 2)["temp_file_limit"] == "1048576kB"
    assert {k: v for k, v in paper.items() if k != "temp_file_limit"} == CLUSTER_SETTINGS


def test_disk_needed_for_the_paper_scale():
    full = disk_needed(10, ("single", "partitioned", "scaleout"), False, False)
    # what the SF 10 run held when its warm-up filled the disk: 21.5 GB of files and parts, 42.5 GB
    # of servers, and more than the 20.5 GB then free in temporary files
    assert full > 21.5e9 + 42.5e9 + 20.5e9
    assert disk_needed(10, ("single",), True, True) < disk_needed(10, ("single",), False, False) < full


def test_disk_needed_without_the_single_layout_counts_only_its_shared_tables():
    """Scale-out alone at SF 10 held 2.0 GB of small tables on the coordinator and 5.6 GB of
    lineitem and orders per worker (plus WAL); the check asked 54 GB as if lineitem and orders
    were loaded on the coordinator too."""
    scaleout = disk_needed(10, ("scaleout",), True, True)
    assert scaleout == pytest.approx(disk_needed(10, ("single", "scaleout"), True, True) - 11.8e9, abs=0.5e9)
    assert 2.0e9 + 2 * 5.6e9 + 20e9 < scaleout < 45e9


# --- parse rate --------------------------------------------------------------------------------------
def test_parse_rate_the_seeds_arithmetic():
    rate, per_core = parse_rate(int(7.2e9), 200.0)           # seed 002: 7.2 GB in about 200 s, one core
    assert rate == pytest.approx(36.0) and per_core == pytest.approx(36.0)
    rate, per_core = parse_rate(760_000_000, 2.0, cores=4)
    assert rate == pytest.approx(380.0) and per_core == pytest.approx(95.0)
    with pytest.raises(ValueError):
        parse_rate(1, 0.0)


def test_scan_cores():
    assert scan_cores("single", 0, 2) == 1
    assert scan_cores("partitioned", 1, 2) == 2
    assert scan_cores("partitioned", 3, 2) == 2     # a file_fdw partition is read by one process
    assert scan_cores("scaleout", 0, 3) == 3


def test_published_slowdowns():
    assert len(FILE_FDW_TPCH_SECONDS) == 8 * 4
    assert file_fdw_tpch_slowdown("q6", "postgresql") == pytest.approx(218.8 / 18.6)
    assert file_fdw_tpch_slowdown("q1", "postgresql") == pytest.approx(531.5 / 311.3)
    assert file_fdw_tpch_slowdown("q6", "postgresql") > 10 > 2 > file_fdw_tpch_slowdown("q1", "postgresql")
    assert file_fdw_tpch_slowdown("q2", "postgresql") is None


# --- answers -----------------------------------------------------------------------------------------
def test_digest_ignores_order_not_values():
    rows = [("A", Decimal("1.10"), date(1995, 3, 15)), ("B", None, date(1996, 1, 1))]
    assert answer_digest(rows) == answer_digest(list(reversed(rows)))
    assert answer_digest(rows) != answer_digest([("A", Decimal("1.11"), date(1995, 3, 15)), rows[1]])
    assert answer_digest(rows) != answer_digest(rows[:1])


def test_compare_rows_across_engines_within_tolerance():
    pg = [("MAIL      ", Decimal("25.5220058532573370"), Decimal("1995")), ("SHIP      ", Decimal("0.05"), 1996)]
    duck = [("SHIP", 0.05000000001, 1996), ("MAIL", 25.522005853257337, 1995)]
    assert compare_rows(pg, duck) is None                      # padding, order, Decimal vs float
    assert "column 2" in compare_rows(pg, [("SHIP", 0.0501, 1996), ("MAIL", 25.522005853257337, 1995)])
    assert compare_rows(pg, duck[:1]) == "2 rows vs 1"
    assert "2 columns vs 3" in compare_rows([("a", 1)], [("a", 1, 2)])
    assert values_match(1.0, 1.0 + 5e-7) and not values_match(1.0, 1.0 + 5e-6)
    assert not values_match(0.0, 1e-6) and values_match(0.0, 1e-12)
    assert compare_rows([(Decimal("1.10"),)], [(Decimal("1.1"),)], rel_tol=0) is None


class FakeConn:
    closed = False
    info = type("Info", (), {"server_version": 150000})()

    def __init__(self, answers):
        self.answers = answers

    def execute(self, text, params=None):
        return self

    def fetchall(self):
        return self.answers


def test_a_wrong_answer_stops_the_run_loudly():
    good = [("A", Decimal("1.00"))]
    conns = {(la, st): FakeConn(good) for la in ("single", "partitioned") for st in ("regular", "foreign")}
    shape = Shape(10.0, 2, ("single", "partitioned"), ("q6",))
    answers, duck, digests = warm_up_and_check(conns, None, shape)
    assert answers["q6"]["agreeing"] == ["regular/single", "foreign/single", "regular/partitioned",
                                         "foreign/partitioned"]
    assert duck["checked"] is False and "scale 10" in duck["reason"]
    assert digests == {"q6": answer_digest(good)} == {"q6": answers["q6"]["digest"]}
    conns[("partitioned", "foreign")] = FakeConn([("A", Decimal("1.01"))])
    with pytest.raises(AnswerMismatch, match=r"q6 on foreign/partitioned differs from regular/single: "
                                             r"row 1, column 2"):
        warm_up_and_check(conns, None, shape)


class SpillingConn(FakeConn):
    """A side whose query runs past temp_file_limit (the server's error, as psycopg raises it)."""

    def execute(self, text, params=None):
        raise psycopg.errors.ConfigurationLimitExceeded("temporary file size exceeds temp_file_limit (64kB)")


def test_a_query_past_temp_file_limit_goes_unchecked_in_the_warm_up():
    good = [("A", Decimal("1.00"))]
    conns = {(la, st): FakeConn(good) for la in ("single", "scaleout") for st in ("regular", "foreign")}
    conns[("scaleout", "foreign")] = SpillingConn(good)
    answers, _, digests = warm_up_and_check(conns, None, Shape(10.0, 2, ("single", "scaleout"), ("q3",)))
    assert answers["q3"]["unchecked"] == ["foreign/scaleout: temporary file size exceeds temp_file_limit (64kB)"]
    assert answers["q3"]["agreeing"] == ["regular/single", "foreign/single", "regular/scaleout"]
    assert digests == {"q3": answer_digest(good)}
    line = warmup_line(4, 442.1, answers, {"checked": False})
    assert line == ("warm-up run and answer checks of 4 cases in 442.1 s: every answer that finished agrees; "
                    "not finished, so not checked: q3 foreign/scaleout: temporary file size exceeds "
                    "temp_file_limit (64kB)")
    conns[("scaleout", "foreign")] = FakeConn(good)
    answers, _, _ = warm_up_and_check(conns, None, Shape(10.0, 2, ("single", "scaleout"), ("q3",)))
    assert warmup_line(4, 1.0, answers, {"checked": True, "version": "1.1"}) == (
        "warm-up run and answer checks of 4 cases in 1.0 s: every answer agrees (and with DuckDB 1.1)")


@pytest.mark.parametrize("storage, query", [("regular", "q6"), ("foreign", "q3"), ("foreign", "q6")])
def test_every_metric_a_measurement_carries_is_declared(storage, query):
    """measure() of a regular, a foreign and a scan-bound foreign case: every key is in the catalogue,
    durations in milliseconds."""
    rows = [("A", Decimal("1.00"))]
    shape = Shape(0.05, 2, ("single",), (query,))
    env = StudyEnv(options(), "15", None, None, print,
                   FileFdwTpchState(None, shape, plans={(query, "single", storage): {"workers": 0}},
                                    answers={query: answer_digest(rows)}, sizes={"lineitem": 36_000_000}),
                   kept={("single", storage): FakeConn(rows)})
    case = next(c for c in STUDY.cases(options(layout=("single",), storage=(storage,), queries=(query,))))
    metrics = STUDY.measure(env, case)
    assert set(metrics) <= set(STUDY.metrics) and STUDY.primary_metric in metrics
    assert ("mb_per_s" in metrics) == (storage == "foreign" and query == "q6")
    assert STUDY.metrics["duration_ms"].unit == "ms" and STUDY.metrics["duration_ms"].better == "lower"
    assert not any(m.endswith("_s") and not m.endswith("_per_s") for m in metrics)


# --- slices for COPY -----------------------------------------------------------------------------------
def test_split_points_cut_at_newlines(tmp_path):
    path = tmp_path / "t.tbl"
    lines = [f"{i}|{'x' * (i % 17)}|\n".encode() for i in range(1000)]
    path.write_bytes(b"".join(lines))
    for pieces in (1, 2, 3, 7, 5000):
        slices = split_points(path, pieces)
        data = path.read_bytes()
        assert b"".join(data[a:b] for a, b in slices) == data
        assert all(data[b - 1:b] == b"\n" for _, b in slices)
        assert len(slices) <= pieces
        assert slices[0][0] == 0 and slices[-1][1] == len(data)


def test_disk_check_says_how_much_is_needed(tmp_path):
    class SmallDisk:
        root = tmp_path

        @staticmethod
        def free_bytes():
            return 20e9

    files = TpchFiles(tmp_path / "data" / "tpch", 10.0)
    with pytest.raises(UserError, match=r"--scale: TPC-H SF 10 with layouts single,partitioned,scaleout needs "
                                        r"about 86 GB free in the workspace .*, 20 GB are"):
        check_disk(SmallDisk, files, Shape(10.0, 2, ("single", "partitioned", "scaleout"), ()))
    need, free = check_disk(SmallDisk, TpchFiles(files.root, 1.0), Shape(1.0, 2, ("single",), ()))
    assert need < free == 20e9


def test_generation_removes_what_a_killed_generation_left(tmp_path):
    """A temporary directory of a generation whose process is gone is removed; a live one is kept."""
    files = TpchFiles(tmp_path / "tpch", 0.01)
    files.root.mkdir(parents=True)
    dead, alive = files.root / ".sf0.01.tmp-999999999", files.root / f".sf0.01.tmp-{os.getppid()}"
    for d in (dead, alive):
        (d / "lineitem.tbl").parent.mkdir()
        (d / "lineitem.tbl").write_text("1|\n")
    (files.dir).mkdir()
    (files.dir / "complete.json").write_text('{"seconds": 1.0}')   # cached: nothing is generated
    assert files.ensure("tpchgen-cli", print) == {"seconds": 1.0, "cached": True}
    assert dead.exists()                                              # the cache answers first
    (files.dir / "complete.json").unlink()
    with pytest.raises(RuntimeError, match="tpchgen-cli -s 0.01 .* failed"):
        files.ensure(str(tmp_path / "no-tpchgen"), print)
    assert not dead.exists() and alive.exists()
