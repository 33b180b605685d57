"""docs/reproduction.md against the runs it quotes: each run of its status table has its export
committed in docs/runs/ (RUN.json.gz, `pgpathbench report docs/runs/RUN.json.gz` shows all of
it), and every figure with an interval that a section quotes ("4.50 [4.24, 4.79]") is a median
and interval the report of that section's runs prints, cell for cell. Every explanation that rests
on a measurement cites the export field it comes from (`RUN CASE FIELD = FIGURE`, CITATION below),
and the field, read from the committed export, gives the figure quoted."""

from __future__ import annotations

import gzip
import json
import re
import statistics
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


# A cited export field: `RUN CASE FIELD = FIGURE`, FIELD a dotted path into a measurement of the
# case in the export's JSON (evidence.servers.source.waits.shares.Client), or paths joined by ' + ', optionally over
# ' / ' one more sum of paths; FIGURE the median over the case's rounds, to its quoted digits.
CITATION = re.compile(rf"`({RUN_ID.pattern[2:-2]}) (\S+) ([^`=]+?) = ({NUMBER})`")


def citations() -> list[tuple[str, str, str, str]]:
    return [m.groups() for m in CITATION.finditer(DOC.read_text())]


def field_value(measurement: dict, expression: str) -> float:
    """The expression's value in one measurement: a sum of dotted paths, over another sum."""
    def path(dotted: str) -> float:
        value, keys = measurement, dotted.strip().split(".")
        for i, key in enumerate(keys):
            # a wait event no sample of the round saw is absent from its shares: 0
            value = value.get(key, 0) if keys[i - 1:i] == ["shares"] else value[key]
        return float(value)
    sums = [sum(path(p) for p in part.split(" + ")) for part in expression.split(" / ")]
    assert len(sums) <= 2, f"'{expression}': one ' / ' at most"
    return sums[0] / sums[1] if len(sums) == 2 else sums[0]


def test_the_explanations_cite_export_fields():
    assert len(citations()) >= 5, "the explanations cite the export fields they rest on"


@pytest.mark.parametrize("run_id,case_id,expression,figure", citations(),
                         ids=[f"{c[0]} {c[1]} {c[2]}" for c in citations()])
def test_every_cited_field_gives_the_quoted_figure(run_id, case_id, expression, figure):
    assert export_of(run_id).is_file(), f"{run_id} is cited but not committed in docs/runs/"
    with gzip.open(export_of(run_id)) as f:
        ms = [m for m in json.load(f)["measurements"] if m["case_id"] == case_id and m["ok"]]
    assert ms, f"{run_id} has no measurement of case {case_id}"
    got = statistics.median(field_value(m, expression) for m in ms)
    decimals = len(figure.partition(".")[2])
    quoted = float(figure.replace(",", ""))
    assert abs(got - quoted) <= 0.5 * 10 ** -decimals + 1e-9, \
        f"{run_id} {case_id} {expression}: median {got:.6g}, the doc says {figure}"


# The JVM's collections in a run with --jvm-options='... -Xlog:gc:file=...': each round's GC log,
# committed beside the export (docs/runs/RUN.gc/roundN.log), and the doc's figure `GC RUN = SHARE`:
# the median over rounds of the log's pause times over the measurement's duration_ms.
GC_CITATION = re.compile(rf"`GC ({RUN_ID.pattern[2:-2]}) = ({NUMBER})`")
GC_PAUSE = re.compile(r"^\[[\d.]+s\]\[info\]\[gc\] GC\(\d+\) Pause .* ([\d.]+)ms$", re.M)


@pytest.mark.parametrize("run_id,figure", GC_CITATION.findall(DOC.read_text()))
def test_the_quoted_collection_share_is_the_gc_logs(run_id, figure):
    with gzip.open(export_of(run_id)) as f:
        rounds = {m["round"]: m["metrics"]["duration_ms"] for m in json.load(f)["measurements"] if m["ok"]}
    logs = DOCS / "runs" / f"{run_id}.gc"
    assert sorted(p.name for p in logs.glob("round*.log")) == sorted(f"round{r}.log" for r in rounds)
    shares = [sum(map(float, GC_PAUSE.findall((logs / f"round{r}.log").read_text()))) / ms for r, ms in rounds.items()]
    decimals = len(figure.partition(".")[2])
    assert abs(statistics.median(shares) - float(figure)) <= 0.5 * 10 ** -decimals + 1e-9, \
        f"GC {run_id}: median share {statistics.median(shares):.4f}, the doc says {figure}"
