"""compare --fail-if-slower PCT: a bad PCT is one line naming the option with its fix, exit 2,
nothing written (in-process; the results cluster is a tripwire); and the gate's exit codes on
two exported runs (no store): 1 slower, 3 a case of A left without a partner, 0 otherwise."""

from __future__ import annotations

import copy
import json
import secrets
from pathlib import Path

import pytest

from pgpathbench import cli

REPO = Path(__file__).resolve().parents[2]
BAD = ["0", "-5", "abc", "1e9", "", "0.0", "1000.01", "nan", "inf", "²", " 5", "1_0", "5%"]


@pytest.fixture
def ws(monkeypatch):
    path = REPO / ".workspace" / f"gate-{secrets.token_hex(4)}" / "ws"
    monkeypatch.setenv("PGPATHBENCH_HOME", str(path))
    yield path
    assert not path.parent.exists(), "a refused invocation must not create the workspace"


@pytest.fixture
def tripwire(monkeypatch):
    from pgpathbench import store

    def tripped(*args, **kw):
        raise AssertionError("validation let a bad --fail-if-slower through to the results cluster")
    monkeypatch.setattr(store.ResultsStore, "_open_managed", classmethod(tripped))


@pytest.mark.parametrize("value", BAD, ids=[repr(v) for v in BAD])
@pytest.mark.parametrize("form", ["separate", "equals"])
def test_bad_percentage_is_one_line_exit_2(value, form, ws, tripwire, capsys):
    args = ["--fail-if-slower", value] if form == "separate" else [f"--fail-if-slower={value}"]
    code = cli.main(["compare", "latest~1", "latest", *args])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgpathbench: error: argument --fail-if-slower: "), err
    assert "give a number of percent more than 0 and at most 1000" in lines[0], err


def test_missing_value_is_one_line_exit_2(ws, tripwire, capsys):
    assert cli.main(["compare", "a", "b", "--fail-if-slower"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--fail-if-slower" in err and "give a value" in err


@pytest.mark.parametrize("value", ["0.5", "10", "1000"])
def test_good_percentages_get_past_validation(value, ws, capsys, monkeypatch):
    """A good PCT reaches the store (here a tripwire that says so)."""
    from pgpathbench import store

    class Reached(Exception):
        pass

    def reached(*args, **kw):
        raise Reached
    monkeypatch.setattr(store.ResultsStore, "_open_managed", classmethod(reached))
    with pytest.raises(Reached):
        cli.main(["compare", "a", "b", "--fail-if-slower", value])


def test_help_documents_the_gate(capsys):
    with pytest.raises(SystemExit):
        cli.main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--fail-if-slower PCT" in text and "CI gate" in text and "exit 1" in text
    assert "1 - PCT/100 (higher is better)" in text and "1 + PCT/100 (lower is better)" in text
    assert "--allow-unpaired" in text and "Exit 3 instead of 0 when a case of A has no partner in B" in text


# -- the gate's verdicts, on exports of a real run (tests/golden: 14 cases x 3 rounds, given a 4th) -------
GOLDEN = REPO / "tests" / "golden" / "fdw-overhead.export.json"


def _export(tmp_path: Path, name: str, slower: dict[str, float] | None = None, drop: tuple[str, ...] = ()) -> str:
    """The golden run with a 4th round (a copy of the 1st: 4 + 4 rounds reach 95%), its TPS scaled
    by `slower` per case id, the cases in `drop` left out."""
    run = json.loads(GOLDEN.read_text())
    fourth = [{**copy.deepcopy(m), "round": 4} for m in run["measurements"] if m["round"] == 1]
    run["measurements"] = [m for m in run["measurements"] + fourth if m["case_id"] not in drop]
    for m in run["measurements"]:
        m["metrics"]["tps"] *= (slower or {}).get(m["case_id"], 1.0)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(run))
    return str(path)


@pytest.mark.parametrize("slower, drop, allow, code, lines", [
    ({}, (), False, 0, []),
    ({"ro:fdw_external:1:0ms:15": 0.2}, (), False, 1, ["slower: ro:fdw_external:1:0ms:15: tps B/A 0.2"]),
    ({}, ("rw:local:1:0ms:15",), False, 3, ["unpaired: rw:local:1:0ms:15 of A has no partner in B"]),
    ({}, ("rw:local:1:0ms:15",), True, 0, []),
    ({"ro:fdw_external:1:0ms:15": 0.2}, ("rw:local:1:0ms:15",), False, 1,
     ["slower: ro:fdw_external:1:0ms:15: tps B/A 0.2", "unpaired: rw:local:1:0ms:15 of A"]),
], ids=["same", "slower", "unpaired", "unpaired-allowed", "slower-and-unpaired"])
def test_the_gates_exit_codes(slower, drop, allow, code, lines, tmp_path, ws, tripwire, capsys):
    a, b = _export(tmp_path, "a"), _export(tmp_path, "b", slower, drop)
    argv = ["compare", a, b, "--fail-if-slower", "5", *(["--allow-unpaired"] if allow else [])]
    assert cli.main(argv) == code
    out, err = capsys.readouterr()
    got = err.splitlines()
    assert len(got) == len(lines) and all(g.startswith(f"pgpathbench: {w}") for g, w in zip(got, lines)), err
    assert "Ratio B/A" in out
    if drop:   # named in the report too, allowed or not
        assert "Not compared, only in A (1: " in out and "rw:local:1:0ms:15" in out.split("Not compared, only in A")[1]


def test_a_case_only_in_b_does_not_fail_the_gate(tmp_path, ws, tripwire, capsys):
    a, b = _export(tmp_path, "a", drop=("rw:local:1:0ms:15",)), _export(tmp_path, "b")
    assert cli.main(["compare", a, b, "--fail-if-slower", "5"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "Not compared, only in B (1: " in out


def test_rounds_too_few_to_judge_are_named(tmp_path, ws, tripwire, capsys):
    three = str(GOLDEN)      # 3 + 3 rounds: a 90% interval, which never fails the gate
    assert cli.main(["compare", three, three, "--fail-if-slower", "5"]) == 0
    _, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 14 and all(line.startswith("pgpathbench: not judged: ") and
                                   line.endswith(": 3 + 3 rounds give a 90% interval, too few for 95% (4 + 4 give 97%)")
                                   for line in lines), err
