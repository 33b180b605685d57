"""The tool's exact version (environment.tool_version): package version, git commit and whether
the work tree was modified, read from real git checkouts made here; "unknown" outside one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from pgpathbench import __version__
from pgpathbench.environment import PACKAGE_DIR, tool_version
from pgpathbench.report import export
from pgpathbench.results.model import RunResult

REPO = Path(__file__).resolve().parents[2]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def checkout(root: Path) -> Path:
    """A repository laid out as ours (src/pgpathbench), one commit in; its package directory."""
    package = root / "src" / "pgpathbench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "0.1.0"\n')
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return package


def test_a_clean_checkout_names_its_commit(tmp_path):
    package = checkout(tmp_path)
    assert tool_version(package) == {"version": __version__, "commit": git(tmp_path, "rev-parse", "HEAD"),
                                     "dirty": False}


def test_a_modified_or_added_file_makes_it_dirty(tmp_path):
    package = checkout(tmp_path)
    (package / "__init__.py").write_text('__version__ = "0.2.0"\n')
    assert tool_version(package)["dirty"] is True
    git(tmp_path, "checkout", "-q", "--", ".")
    assert tool_version(package)["dirty"] is False
    (package / "new.py").write_text("")
    assert tool_version(package)["dirty"] is True


def test_outside_a_checkout_commit_and_dirty_are_unknown(tmp_path):
    installed = tmp_path / "lib" / "site-packages" / "pgpathbench"   # an installed copy, even inside a repository
    installed.mkdir(parents=True)
    git(tmp_path, "init", "-q")
    unknown = {"version": __version__, "commit": "unknown", "dirty": "unknown"}
    assert tool_version(installed) == unknown
    bare = tmp_path / "elsewhere" / "src" / "pgpathbench"        # laid out as ours, but no .git
    bare.mkdir(parents=True)
    assert tool_version(bare) == unknown


def test_a_checkout_git_cannot_read_is_unknown_without_failing(tmp_path):
    package = tmp_path / "src" / "pgpathbench"
    package.mkdir(parents=True)
    (tmp_path / ".git").write_text("gitdir: /nonexistent/worktree\n")   # a worktree whose repository is gone
    assert tool_version(package) == {"version": __version__, "commit": "unknown", "dirty": "unknown"}


def test_this_checkout_and_every_export_record_it():
    version = tool_version()
    if (REPO / ".git").exists() and PACKAGE_DIR == REPO / "src" / "pgpathbench":
        assert version["commit"] == git(REPO, "rev-parse", "HEAD")
        assert version["dirty"] == (git(REPO, "status", "--porcelain") != "")
    run = RunResult.from_rows({"run_id": "R", "studies": ["fdw-overhead"], "options": {"studies": []},
                               "environment": {"sessions": [{"version": 2, "machine": {
                                   "pgpathbench": "0.1.0", "pgpathbench_commit": "c" * 40,
                                   "pgpathbench_dirty": False}}]}},
                              [], [{"study": "fdw-overhead", "case_id": "ro:local:1", "round": 1, "session": 1,
                                    "ok": True, "metrics": {"tps": 1.0}, "dims": {}}], [])
    assert json.loads(export.to_json(run))["pgpathbench"] == version        # the exporting tool
    header, row = export.to_csv(run).splitlines()                          # the measuring session's
    fields = dict(zip(header.split(","), row.split(",")))
    assert [fields[f] for f in export.TOOL_FIELDS] == ["0.1.0", "c" * 40, "False"]
