"""compare --fail-if-slower PCT: a bad PCT is one line naming the option with its fix, exit 2,
nothing written (in-process; the results cluster is a tripwire)."""

from __future__ import annotations

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
