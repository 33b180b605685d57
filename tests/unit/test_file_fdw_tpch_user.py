"""file-fdw-tpch's tpch role on a user server, without servers: which cases it runs (the single
layout's regular storage), what it leaves out or refuses, what it creates and counts on this
machine's disk, and a report of its regular cases alone."""

from __future__ import annotations

import dataclasses

import pytest

from pgpathbench.datasets.tpch.files import TpchFiles
from pgpathbench.errors import UserError
from pgpathbench.studies.file_fdw_tpch.objects import main_ddl
from pgpathbench.studies.file_fdw_tpch.spec import disk_needed
from pgpathbench.studies.file_fdw_tpch.study import Shape
from test_file_fdw_tpch_report import measurement, study_result
from test_file_fdw_tpch_study import STUDY, options

USER = {"servers": {"tpch": "host=db1 user=bench dbname=app"}}


def user_options(**dims):
    o = options(**dims)
    return dataclasses.replace(o, params={**o.params, **USER})


def test_a_managed_tpch_keeps_every_storage_and_layout():
    o = options(layout=("single", "partitioned"))
    assert STUDY.refine(o, {"layout", "storage"}) == o
    assert Shape.of(o).storages == ("regular", "foreign")


@pytest.mark.parametrize("given", [set(), {"queries"}])
def test_defaults_a_user_server_cannot_run_are_left_out(given):
    refined = STUDY.refine(user_options(), given)
    assert refined.dims["storage"] == ("regular",) and refined.dims["layout"] == ("single",)
    assert {c.case_id for c in STUDY.cases(refined)} == {
        f"{q}:regular:single:15" for q in ("q1", "q3", "q5", "q6", "q10", "q12", "q14", "q19")}
    shape = Shape.of(refined)
    assert shape.storages == ("regular",) and shape.sides == [("single", "regular")] and not shape.needs_parts


@pytest.mark.parametrize("dim, values, message", [
    ("storage", ("regular", "foreign"), "--storage foreign: your server in the tpch role (--server tpch) cannot run "
                                        "it: file_fdw reads files on the server's own disk"),
    ("storage", ("foreign",), "give --storage regular, or leave --server tpch out"),
    ("layout", ("single", "partitioned"), "--layout partitioned: your server in the tpch role (--server tpch) "
                                          "cannot run it: its partitions and parallel workers are sized by this "
                                          "machine's cores"),
    ("layout", ("scaleout",), "--layout scaleout: your server in the tpch role (--server tpch) cannot run it: its "
                              "workers are managed servers on this machine's loopback"),
])
def test_what_a_user_server_cannot_run_is_refused_when_named(dim, values, message):
    with pytest.raises(UserError) as e:
        STUDY.refine(user_options(**{dim: values}), {dim})
    assert message in str(e.value) and str(e.value).startswith(f"--{dim} ")


def test_what_a_user_server_runs_may_be_named():
    refined = STUDY.refine(user_options(storage=("regular",), layout=("single",)), {"storage", "layout"})
    assert refined.dims["storage"] == ("regular",) and refined.dims["layout"] == ("single",)


def test_no_file_fdw_without_the_foreign_storage(tmp_path):
    files = TpchFiles(tmp_path, 0.01)
    regular = main_ddl(files, Shape.of(STUDY.refine(user_options(), set())), [])
    assert not any("file_fdw" in s or "FOREIGN" in s or "foreign" in s for s in regular), regular
    assert "CREATE SCHEMA single_regular" in regular and len(regular) == 1 + 8   # the schema, the eight tables
    managed = main_ddl(files, Shape.of(options(layout=("single",))), [])
    assert "CREATE EXTENSION IF NOT EXISTS file_fdw" in managed


def test_only_the_files_count_against_this_machines_disk():
    assert disk_needed(10, ("single",), True, True, managed=False) == 0.5e9
    assert disk_needed(10, ("single",), False, True, managed=False) == pytest.approx(10 * 1.1e9 + 0.5e9)
    assert disk_needed(10, ("single",), False, True) > disk_needed(10, ("single",), False, True, managed=False) + 14e9


def test_the_report_of_regular_cases_alone():
    """Nothing to compare: no slowdown table or chart; the seed's published seconds beside ours."""
    ms = [measurement(q, "regular", "single", rnd, s) for rnd in (1, 2, 3) for q, s in (("q1", 1.0), ("q6", 0.1))]
    run = study_result(ms, {"scale": 1.0, "partitions": 2, "layouts": ["single"], "storages": ["regular"],
                            "files": {"lineitem": 760_000_000},
                            "answers": {"q1": {"rows": 4, "agreeing": ["regular/single"], "duckdb": "agrees"}},
                            "settings": {"cluster": {}, "session": {"work_mem": "64MB", "jit": "off"}}})
    tables = {t.title: t for t in STUDY.report(run)}
    assert "Slowdown through file_fdw: foreign / regular" not in tables
    seed = tables["TPC-H seconds per query (median of the rounds): regular vs foreign, per layout"]
    assert seed.columns[:2] == ["Query", "single regular"] and "single foreign" not in seed.columns
    assert seed.rows[1][:2] == ["Q6", pytest.approx(0.1)] and 218.8 in seed.rows[1]   # the seed's Q6 foreign
    assert tables["Answer checks (the warm-up run of every case)"].rows[0][3] == "1 of 1"
    data = tables["Data, load and settings"].rows
    assert ["15", "settings (SET; the rest your server's)", "work_mem=64MB", "work_mem=64MB, jit=off"] in data
    assert [p.title for p in STUDY.plots(run)] == ["Seconds per TPC-H query"]
