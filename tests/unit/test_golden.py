"""Golden runs: runs stored by an earlier version (tests/golden/STUDY.export.json, exported by it)
and that version's own renderings (STUDY.report.md, STUDY.export.csv). Today's code reads the
same stored run into the result model and must say the same numbers: every row of every table
of the earlier report is found, cell for cell, in the table of the same title today (tables may
gain columns and rows, never lose or change a figure), and the export carries the same
measurements (durations renamed to milliseconds, as model version 2 stores them). The tool's own
version (its git commit changes with every commit) is masked on both sides, so that a refactor still
proves it changed no figure."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from pgpathbench.report import assemble, export, render
from pgpathbench.results.model import RunResult
from pgpathbench.results.upgrade import upgrade_metrics
from pgpathbench.studies import STUDIES

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
RUNS = sorted(p.name.removesuffix(".export.json") for p in GOLDEN.glob("*.export.json"))
# Tables of the run as a whole, not of a study: today's shared code tables them (header, failures;
# the header holds the tool's version, masked here by leaving it out).
SHARED = ("Run", "Failed measurements")
MASK = "<masked>"


def masked(doc: dict) -> dict:
    """An export with the tool's version masked: the exporting tool's at the top, and the measuring
    tool's in every session's machine section (a version-1 session is one flat dict)."""
    doc = json.loads(json.dumps(doc))
    if "pgpathbench" in doc:
        doc["pgpathbench"] = MASK
    for session in doc["run"].get("environment", {}).get("sessions", []):
        machine = session.get("machine", session)
        for key in export.TOOL_FIELDS:
            if key in machine:
                machine[key] = MASK
    return doc


def load(study: str) -> tuple[dict, RunResult]:
    doc = json.loads((GOLDEN / f"{study}.export.json").read_text())
    return doc, RunResult.from_export(doc)


def markdown_tables(text: str) -> dict[str, list[list[str]]]:
    """'### title' + a pipe table -> title: rows of cells (the header row first)."""
    tables: dict[str, list[list[str]]] = {}
    title = None
    for line in text.splitlines():
        if line.startswith("### "):
            title = line[4:].strip()
            tables[title] = []
        elif title and line.startswith("|") and not set(line) <= set("|-: "):
            cells = [c.strip().replace("\\|", "|") for c in line.strip().strip("|").split(" | ")]
            tables[title].append(cells)
    return tables


def figure(cell: str) -> str | float:
    """A number as its value, so that a count printed as one today ("0", "104") is the same figure
    as the "0.0000" and "104.0" of an earlier rendering, and "1.138" still differs from "1.14"."""
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return cell


def test_there_are_golden_runs():
    assert {"fdw-overhead", "remote-sampling", "file-fdw-tpch", "interfaces"} <= set(RUNS)


@pytest.mark.parametrize("study", RUNS)
def test_every_figure_of_the_earlier_report_is_reported_today(study):
    _, run = load(study)
    old = markdown_tables((GOLDEN / f"{study}.report.md").read_text())
    new = markdown_tables(render.to_markdown(assemble.tables(run, STUDIES)))
    for title, rows in old.items():
        if title.startswith(SHARED):
            continue
        assert title in new, f"{study}: table '{title}' is gone; today's: {list(new)}"
        for row in rows[1:]:
            want = Counter(figure(c) for c in row if c not in ("", "—"))
            assert any(not (want - Counter(map(figure, r))) for r in new[title][1:]), \
                f"{study}: '{title}': no row today has every cell of {row}"


@pytest.mark.parametrize("study", RUNS)
def test_failed_measurements_are_tabled_once_with_every_failure(study):
    doc, run = load(study)
    failed = [m for m in doc["measurements"] if not m["ok"]]
    titles = [t.title for t in assemble.tables(run, STUDIES) if t.title.startswith("Failed measurements")]
    assert len(titles) == (1 if failed else 0)
    assert run.counts()[1] == len(failed)


@pytest.mark.parametrize("study", RUNS)
def test_export_carries_the_same_measurements(study):
    doc, run = load(study)
    exported = json.loads(export.to_json(run))
    assert set(exported["pgpathbench"]) == {"version", "commit", "dirty"}   # recorded, then masked
    new, doc = masked(exported), masked(doc)
    assert new["format_version"] == 3 and new["run"] == doc["run"] and new["link_probes"] == doc["link_probes"]
    assert len(new["measurements"]) == len(doc["measurements"])
    for old, now in zip(doc["measurements"], new["measurements"]):
        assert now == {**old, "metrics": dict(upgrade_metrics(old["study"], old["metrics"], 1)), "path": None,
                       "attempts": 1, "previous_errors": [], "series": [], "evidence": {}}


@pytest.mark.parametrize("study", RUNS)
def test_csv_export_has_the_same_rows(study):
    _, run = load(study)
    # A version-1 header may name a column twice: the measurement's duration_s, then a metric
    # duration_s (fdw-overhead's pgbench -T); the second is the metric, duration_ms today.
    header, *old = list(csv.reader(io.StringIO((GOLDEN / f"{study}.export.csv").read_text())))
    new = list(csv.DictReader(io.StringIO(export.to_csv(run))))
    assert all(set(export.TOOL_FIELDS) <= set(r) for r in new)   # recorded per row, masked below
    at = {name: header.index(name) for name in ("case_id", "round", "ok")}
    assert [tuple(r[i] for i in at.values()) for r in old] == [(r["case_id"], r["round"], r["ok"]) for r in new]
    for a, b in zip(old, new):
        for i, (key, value) in enumerate(zip(header, a)):
            metric_twin = key in header[:i]
            if key in export.TOOL_FIELDS:
                continue
            if key in b and not metric_twin:
                assert b[key] == value, (key, a[at["case_id"]])
            elif key.endswith("_s") and value:
                assert float(b[key[:-2] + "_ms"]) == pytest.approx(float(value) * 1000)
