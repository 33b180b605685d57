import pytest

from pgpathbench.errors import UserError
from pgpathbench.matrix import Case, Dimension, cross, positive_int, round_order
from pgpathbench.studies import STUDIES
from pgpathbench.studies.base import StudyOptions

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
    assert "ro:fdw_external_ro:5:0ms:15" in ids and "rw:fdw_external_ro:1:0ms:15" not in ids
    assert "rw:local:1:0ms:15" in ids


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
    assert {c.case_id for c in cases} == {f"{w}:{t}:1:0ms:15" for w in ("ro", "rw")
                                          for t in ("local", "fdw_local", "fdw_external", "fdw_external_ro")} \
        - {"rw:fdw_external_ro:1:0ms:15"}
    assert quick.repeat >= 6 and quick.params["duration"] == 1
