"""report, export and compare of a run's export file (FILE.json, FILE.json.gz): the run measured
elsewhere (docs/runs/) read as it is, without a results store; a file that is not an export is
one line, exit 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main
from pgpathbench.report import assemble, render
from pgpathbench.results.model import RunResult
from pgpathbench.studies import STUDIES

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
EXPORT = GOLDEN / "fdw-overhead.export.json"


@pytest.fixture
def gzipped(tmp_path) -> Path:
    path = tmp_path / "run.json.gz"
    path.write_bytes(gzip.compress(EXPORT.read_bytes()))
    return path


def test_a_gzipped_export_reports_as_the_model_built_from_it(gzipped, workspace_root):
    ws = workspace_root.parent / (workspace_root.name + "-never-made")
    res = pgpathbench("report", str(gzipped), "--format", "markdown", workspace=ws)
    assert res.returncode == 0, res.stderr
    run = RunResult.from_export(json.loads(EXPORT.read_text()))
    assert res.stdout.strip() == render.to_markdown(assemble.tables(run, STUDIES)).strip()
    assert "| RO.FDW_local | RO | FDW_local | 1 | 15 | direct, 0.05 ms | 1,238 | 760.7 | 968.9 | 908.0 |" in res.stdout
    assert not ws.exists(), "an export is read without a workspace or results store"


def test_export_of_an_export_keeps_every_measurement(gzipped, workspace_root):
    ws = workspace_root.parent / "never-made-2"
    res = pgpathbench_main("export", str(gzipped), workspace=ws)
    assert res.returncode == 0, res.stderr
    assert not ws.exists(), "an export is read without a workspace (whose process record would be pytest's)"
    again, before = json.loads(res.stdout), json.loads(EXPORT.read_text())
    assert again["run"] == before["run"] and len(again["measurements"]) == len(before["measurements"]) == 42
    assert [m["metrics"]["tps"] for m in again["measurements"]] == [m["metrics"]["tps"] for m in before["measurements"]]


def test_compare_two_exports_pairs_every_case(gzipped, workspace_root):
    ws = workspace_root.parent / "never-made-3"
    res = pgpathbench_main("compare", str(EXPORT), str(gzipped), "--format", "markdown", workspace=ws)
    assert res.returncode == 0, res.stderr
    assert not ws.exists(), "exports are compared without a workspace"
    rows = [line for line in res.stdout.splitlines() if line.startswith("| ro:") or line.startswith("| rw:")]
    assert len(rows) == 14 and all("| 1.000 |" in r for r in rows), res.stdout


def _files(tmp: Path) -> dict[str, Path]:
    (tmp / "text.json").write_text("not json")
    (tmp / "list.json").write_text("[1, 2]")
    (tmp / "newer.json").write_text(json.dumps({"format_version": 99, "run": {}}))
    (tmp / "partial.json").write_text(json.dumps({"format_version": 3, "run": {"run_id": "x"}}))
    (tmp / "plain.json.gz").write_text("not gzip")
    return {p.name: p for p in tmp.iterdir()}


BAD = [
    (["report", "{missing.json}"], "RUN: no file {missing.json}; give a file written by 'pgpathbench export"),
    (["report", "{text.json}"], "RUN: {text.json} is not a pgpathbench export (JSONDecodeError)"),
    (["export", "{list.json}"], "RUN: {list.json} is not a pgpathbench export (no format_version and run)"),
    (["report", "{newer.json}"], "RUN: {newer.json} has export format_version 99, this pgpathbench reads up to 3"),
    (["report", "{partial.json}"], "RUN: {partial.json} is not a complete pgpathbench export (ValueError"),
    (["compare", "{plain.json.gz}", "{list.json}"], "RUN_A: {plain.json.gz} is not a pgpathbench export (BadGzipFile)"),
    (["compare", str(EXPORT), "{text.json}"], "RUN_B: {text.json} is not a pgpathbench export"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_file_that_is_not_an_export_is_one_line(argv, message, tmp_path, workspace_root):
    files = {**_files(tmp_path), "missing.json": tmp_path / "missing.json"}

    def fill(text: str) -> str:
        for name, path in files.items():
            text = text.replace("{" + name + "}", str(path))
        return text
    ws = workspace_root.parent / (workspace_root.name + "-untouched")
    assert_user_error(pgpathbench_main(*map(fill, argv), workspace=ws), fill(message), untouched=ws)
