import json
import re

import pytest

from pgpathbench.errors import UserError
from pgpathbench.matrix import Case, Dimension, StudyOptions, cross, positive_int, round_order
from pgpathbench.studies import STUDIES

WORKLOAD = Dimension("workload", "", ("ro", "rw"))
CLIENTS = Dimension("clients", "", parse=positive_int("clients"))


DIMS = {"workload": WORKLOAD, "target": Dimension("target", "", ("a", "b", "c"))}


def test_cross_product_in_declaration_order_with_exclusions():
    # chosen in another order than declared: ids follow the declaration (resume depends on it)
    cases = cross("s", DIMS, {"target": ("a", "b", "c"), "workload": ("ro", "rw")},
                  exclude=lambda d: d["workload"] == "rw" and d["target"] == "c")
    assert [c.case_id for c in cases] == ["ro:a", "ro:b", "ro:c", "rw:a", "rw:b"]
    assert cases[3]["target"] == "a" and cases[3].as_dict() == {"workload": "rw", "target": "a"}


def test_case_id_is_stable_and_hashable():
    a = Case("s", (("workload", "ro"), ("clients", "5")))
    b = Case("s", (("workload", "ro"), ("clients", "5")))
    assert a == b and hash(a) == hash(b) and a.case_id == "ro:5"


def test_round_order_is_a_fixed_permutation_per_seed_and_round():
    cases = cross("s", {"x": Dimension("x", "", tuple("abcdefgh"))}, {"x": tuple("abcdefgh")})
    r1 = round_order(cases, 42, 1)
    assert sorted(c.case_id for c in r1) == list("abcdefgh")
    assert r1 == round_order(cases, 42, 1)
    assert r1 != round_order(cases, 42, 2) or r1 != round_order(cases, 43, 1)


@pytest.mark.parametrize("dim, raw, expect", [
    (WORKLOAD, "ro", ("ro",)), (WORKLOAD, "rw, ro,rw", ("rw", "ro")),
    (CLIENTS, "1,05,5", ("1", "5")),
])
def test_dimension_validate(dim, raw, expect):
    assert dim.validate(raw, "--x") == expect


@pytest.mark.parametrize("dim, raw, message", [
    (WORKLOAD, "xx", "--x: unknown value 'xx'; choose from ro,rw"),
    (WORKLOAD, "ro,", "--x: empty value"),
    (CLIENTS, "0", "--x: '0' is not a positive whole number of clients"),
    (CLIENTS, "-1", "--x: '-1' is not a positive whole number"),
])
def test_dimension_rejects(dim, raw, message):
    with pytest.raises(UserError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        dim.validate(raw, "--x")


def test_fdw_overhead_matrix_excludes_writes_to_readonly_foreign_tables():
    study = STUDIES["fdw-overhead"]
    opts = StudyOptions(study.name, "quick", 3, {}, study.default_dims)
    cases = study.cases(opts)
    assert cases == study.cases(StudyOptions.from_json(opts.to_json() | {"dims": dict(reversed(
        list(opts.to_json()["dims"].items())))}))
    assert len(cases) == 2 * 4 * 2 - 2
    ids = {c.case_id for c in cases}
    assert "ro:fdw_external_ro:5:0ms:15:simple" in ids and "rw:fdw_external_ro:1:0ms:15:simple" not in ids
    assert "rw:local:1:0ms:15:simple" in ids


def test_a_run_stored_before_a_dimension_existed_keeps_its_case_ids():
    # Options stored without 'protocol' (resume of an older run): the ids it stored, unchanged.
    study = STUDIES["fdw-overhead"]
    old = {k: v for k, v in study.default_dims.items() if k != "protocol"}
    ids = {c.case_id for c in study.cases(StudyOptions(study.name, "quick", 3, {}, old))}
    assert "ro:fdw_external_ro:5:0ms:15" in ids and len(ids) == 14


def test_knob_family_dimensions_follow_the_declared_ones_and_skip_the_local_table():
    from pgpathbench.servers.fdw import FAMILY
    study = STUDIES["fdw-overhead"]
    dims = {**study.default_dims, "workload": ("ro",), "clients": ("1",), "target": ("local", "fdw_external"),
            **FAMILY.parse(["fetch_size=1,100", "async_capable=on"])}
    assert dims["fdw.async_capable"] == ("true",)
    opts = StudyOptions(study.name, "quick", 3, {}, dims)
    cases = study.cases(opts)
    assert [c.case_id for c in cases] == ["ro:local:1:0ms:15:simple:-:-",
                                          "ro:fdw_external:1:0ms:15:simple:true:1",
                                          "ro:fdw_external:1:0ms:15:simple:true:100"]
    assert cases[2]["fdw.fetch_size"] == "100" and cases[2].knobs(FAMILY) == {"fetch_size": "100",
                                                                               "async_capable": "true"}
    assert cases[0].knobs(FAMILY) == {}
    assert study.cases(StudyOptions.from_json(json.loads(json.dumps(opts.to_json())))) == cases   # --resume


@pytest.mark.parametrize("given, message", [
    (["fetch_size"], "--fdw-option: 'fetch_size' is not NAME=V1,V2"),
    (["fetchsize=1"], "--fdw-option: unknown option 'fetchsize'; choose from fetch_size,"),
    (["fetch_size=0"], "--fdw-option fetch_size: '0' is not a positive whole number"),
    (["use_remote_estimate=maybe"], "--fdw-option use_remote_estimate: 'maybe' is not a boolean"),
    (["fetch_size=1", "fetch_size=2"], "'fetch_size' given twice"),
    (["extensions=a,b c"], "not a list of extension names"),
])
def test_knob_family_refuses_bad_input(given, message):
    from pgpathbench.servers.fdw import FAMILY
    with pytest.raises(UserError, match=re.escape(message)):
        FAMILY.parse(given)


@pytest.mark.parametrize("latencies, remote, direct_remote", [
    (("0ms", "2ms"), 2, True),     # each external target once per link
    (("2ms",), 1, False),          # only through the link; local paths still measured, directly
])
def test_fdw_overhead_links_only_multiply_remote_targets(latencies, remote, direct_remote):
    study = STUDIES["fdw-overhead"]
    dims = {"workload": ("ro",), "target": ("local", "fdw_local", "fdw_external"), "clients": ("1",),
            "latency": latencies, "pg": ("15",)}
    ids = [c.case_id for c in study.cases(StudyOptions(study.name, "quick", 3, {}, dims))]
    assert ids.count("ro:local:1:0ms:15") == 1 and "ro:local:1:2ms:15" not in ids
    assert "ro:fdw_local:1:0ms:15" in ids and "ro:fdw_local:1:2ms:15" not in ids
    assert sum(i.startswith("ro:fdw_external:") for i in ids) == remote
    assert ("ro:fdw_external:1:0ms:15" in ids) == direct_remote and "ro:fdw_external:1:2ms:15" in ids


@pytest.mark.parametrize("raw, value", [("0", "0ms"), ("5ms", "5ms"), ("1s", "1000ms")])
def test_latency_values_are_normalised(raw, value):
    from pgpathbench.studies.base import LATENCY
    assert LATENCY.validate(raw, "--latency") == (value,)


@pytest.mark.parametrize("raw", ["0.5ms", "-1ms", "5 parsecs"])
def test_latency_rejects(raw):
    from pgpathbench.studies.base import LATENCY
    with pytest.raises(UserError, match="^--latency: "):
        LATENCY.validate(raw, "--latency")


def test_fdw_overhead_quick_preset_is_the_seeds_shape_in_six_rounds():
    """The demo: 1 client, RO and RW, the four targets, at least 6 rounds (real 95% intervals) of 1 s."""
    study = STUDIES["fdw-overhead"]
    quick = study.presets["quick"]
    dims = {name: tuple(quick.dims.get(name, study.default_dims[name])) for name in study.dimensions}
    cases = study.cases(StudyOptions(study.name, "quick", quick.repeat, quick.params, dims))
    assert {c.case_id for c in cases} == {f"{w}:{t}:1:0ms:15:simple" for w in ("ro", "rw")
                                          for t in ("local", "fdw_local", "fdw_external", "fdw_external_ro")} \
        - {"rw:fdw_external_ro:1:0ms:15:simple"}
    assert quick.repeat >= 6 and quick.params["duration"] == 1


def test_a_quiet_value_leaves_its_dimension_out_of_the_id():
    # a hop added later (`via`): its default keeps the ids of runs stored before it, so they pair
    dims = {**DIMS, "via": Dimension("via", "", ("direct", "pgbouncer"), quiet="direct")}
    new = cross("s", dims, {"workload": ("ro",), "target": ("a",), "via": ("direct", "pgbouncer")})
    old = cross("s", DIMS, {"workload": ("ro",), "target": ("a",)})
    assert [c.case_id for c in new] == ["ro:a", "ro:a:pgbouncer"] == [old[0].case_id, "ro:a:pgbouncer"]
    assert new[0]["via"] == "direct" and new[0] != old[0]
