"""docs/reproduction.md against the runs it quotes: each run of its status table has its export
committed in docs/runs/ (RUN.json.gz, `pgpathbench report docs/runs/RUN.json.gz` shows all of
it), and every figure with an interval that a section quotes ("4.50 [4.24, 4.79]") is a median
and interval the report of that section's runs prints, cell for cell."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pgpathbench.report import assemble, render
from pgpathbench.results import exported
from pgpathbench.studies import STUDIES

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = DOCS / "reproduction.md"
RUN_ID = re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{4}\b")
NUMBER = r"-?[\d,]*\d(?:\.\d+)?"
FIGURE = re.compile(rf"({NUMBER})x? \[({NUMBER}), ({NUMBER})\]")
INTERVAL_CELL = re.compile(rf"^\[({NUMBER}), ({NUMBER})\]")


def sections() -> dict[str, str]:
    """'## title' -> its text (up to the next '## ')."""
    parts = re.split(r"^## ", DOC.read_text(), flags=re.M)
    return {p.splitlines()[0].strip(): p for p in parts[1:]}


def status_runs() -> list[str]:
    """The run ids of the status table at the top (before the first section)."""
    return RUN_ID.findall(re.split(r"^## ", DOC.read_text(), flags=re.M)[0])


def export_of(run_id: str) -> Path:
    return DOCS / "runs" / f"{run_id}.json.gz"


def report_figures(run_id: str) -> set[tuple[str, str, str]]:
    """(median, low, high) of every cell pair 'median | [low, high] ...' in the run's report."""
    text = render.to_markdown(assemble.tables(exported.read(str(export_of(run_id))), STUDIES))
    found = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        for before, cell in zip(cells, cells[1:]):
            m = INTERVAL_CELL.match(cell)
            if m and re.fullmatch(NUMBER + "x?", before):
                found.add((before.rstrip("x"), m.group(1), m.group(2)))
    return found


def test_each_run_of_the_status_table_is_committed():
    runs = status_runs()
    assert runs, "the status table names the runs it reports"
    missing = [r for r in runs if not export_of(r).is_file()]
    assert not missing, f"no docs/runs/RUN.json.gz for {missing}: 'pgpathbench export RUN | gzip -9'"


@pytest.mark.parametrize("title", [t for t, text in sections().items() if RUN_ID.search(text)])
def test_every_quoted_interval_is_in_the_report_of_its_run(title):
    text = sections()[title]
    runs = [r for r in dict.fromkeys(RUN_ID.findall(text)) if export_of(r).is_file()]
    assert runs, f"'{title}' quotes runs none of which is committed in docs/runs/"
    printed = set().union(*(report_figures(r) for r in runs))
    quoted = {m.groups() for m in FIGURE.finditer(text)}
    assert quoted, f"'{title}' quotes no figure with its interval"
    assert not quoted - printed, f"'{title}': not in the report of {runs}: {sorted(quoted - printed)}"
