"""Hostile but fair input to every subcommand: exit 2, one line naming the option, nothing written.

Run in-process (pgpathbench.cli.main) for speed. Each invocation gets a fresh workspace path
(PGPATHBENCH_HOME) that must not exist afterwards; the managed results cluster and the runner
are replaced by tripwires, so an invocation that validation lets through fails the test instead
of starting servers or writing a run row. The invocations: invalid_invocation_cases.py.
"""

from __future__ import annotations

import os
import re
import secrets

import pytest
from invalid_invocation_cases import CASES, DSN, FDW, REPO, SECRET

from pgpathbench import cli, clientenv


def _id(argv: list[str]) -> str:
    text = " ".join(a if len(a) < 40 else a[:20] + "..." for a in argv) or "(none)"
    return re.sub(r"\s+", " ", text.encode("ascii", "backslashreplace").decode())


@pytest.fixture
def ws(monkeypatch):
    """A workspace path that does not exist (under the repository: reachable by the server user)."""
    path = REPO / ".workspace" / f"invalid-{secrets.token_hex(4)}" / "ws"
    monkeypatch.setenv("PGPATHBENCH_HOME", str(path))
    yield path
    assert not path.parent.exists(), "a refused invocation must not create the workspace"


@pytest.fixture
def tripwires(monkeypatch):
    """Nothing past validation: no managed results cluster, no run."""
    from pgpathbench import runner, store

    def tripped(*args, **kw):
        raise AssertionError("validation let an invalid invocation through to the results cluster or a run")
    monkeypatch.setattr(store.ResultsStore, "_open_managed", classmethod(tripped))
    monkeypatch.setattr(runner.Runner, "start", tripped)
    monkeypatch.setattr(runner.Runner, "resume", tripped)


def test_at_least_200_invocations():
    assert len(CASES) >= 200
    assert len({tuple(a) for a, _ in CASES}) == len(CASES), "each invocation once"


def _param(argv: list[str], names: str):
    """A case; one the parse check's server refuses starts that server: integration (make test only)."""
    server = names.endswith("the server cannot parse it")
    return pytest.param(argv, names, id=_id(argv), marks=pytest.mark.integration if server else ())


@pytest.mark.parametrize("argv, names", [_param(a, n) for a, n in CASES])
def test_refused_with_one_line_naming_the_option(argv, names, ws, capsys, tripwires):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgpathbench: error: "), err
    assert names in lines[0], err
    assert ";" in lines[0] or "choose from" in lines[0], f"no fix given: {err}"
    assert "Traceback" not in err and "invalid literal" not in err and out == ""
    assert SECRET not in err, "a value that may hold a password was repeated"
    assert not ws.exists(), "a refused invocation must not create the workspace"


def test_unreachable_results_dsn_keeps_the_reason_not_the_password(ws, capsys, tripwires):
    assert cli.main(["runs", "--results-dsn", DSN]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "--results-dsn: cannot connect (" in err and "Connection refused" in err
    assert SECRET not in err and out == "" and not ws.exists()


@pytest.mark.parametrize("name", sorted(clientenv.REFUSED))
def test_a_libpq_variable_that_would_change_a_user_servers_sessions_is_refused(name, ws, capsys, tripwires,
                                                                               monkeypatch):
    """With --server, before any connection: one line naming the variable and telling to unset it."""
    monkeypatch.setenv(name, "x")
    code = cli.main([*FDW, "--server", "source=host=127.0.0.1 port=1 user=x dbname=x connect_timeout=1"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"pgpathbench: error: --server source: {name} is set in the environment and ") and \
        err.rstrip().endswith(f"unset {name}"), err
    assert os.environ[name] == "x", "the CLI gives the environment back as it found it"


@pytest.mark.parametrize("text, names", [
    ("Host b\n  Bogus yes\n", "line 2: Bad configuration option: bogus"),
    ("Host b\n  Port 0\n", "line 2: Bad port '0'"),
])
def test_an_ssh_config_ssh_refuses_is_one_line_before_any_connection(text, names, ws, capsys, tripwires, tmp_path):
    """ssh -G reads it (nothing is connected): its own line, naming the file's line."""
    config = tmp_path / "ssh_config"
    config.write_text(text)
    assert cli.main(["doctor", "--host", "b=b", "--ssh-config", str(config)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("pgpathbench: error: --ssh-config: ssh cannot read its "
                                                   "configuration (") and names in err, err
    assert out == "" and not ws.exists()


def test_a_host_without_the_ssh_client_is_refused(ws, capsys, tripwires, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))   # no ssh there
    assert cli.main(["doctor", "--host", "a=ssh://u@h"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "--host: hosts are reached with OpenSSH's client, and ssh is not on PATH" in err
    assert out == "" and not ws.exists()
