"""What the commands print or write, from the result model: a run's report in every format,
one HTML page of several runs, a comparison. The CLI only parses and dispatches to these."""

from __future__ import annotations

from typing import Mapping, Sequence

from rich.console import Console

from ..results.model import RunResult
from . import assemble, export, render


def print_report(run: RunResult, fmt: str, out: Console, studies: Mapping, wide: bool = False) -> None:
    """table (a 120-column terminal; --wide for every column), markdown, csv or json."""
    if fmt == "json":
        out.out(export.to_json(run), highlight=False)
    elif fmt == "csv":
        out.out(export.to_csv(run), highlight=False, end="")
    elif fmt == "markdown":
        out.out(render.to_markdown(assemble.tables(run, studies)), highlight=False)
    else:
        render.to_terminal(assemble.tables(run, studies), out, wide=wide)


def html_page(runs: Sequence[RunResult], studies: Mapping) -> str:
    """One self-contained page: every run's studies (tables, plots), shared tables, environment."""
    from . import html
    pages = []
    for run in runs:
        shared = [t for t in (assemble.outliers_table(run, studies),) if t is not None]
        pages.append((run, assemble.study_sections(run, studies), shared))
    return html.runs_page(pages)


def comparison(run_a: RunResult, run_b: RunResult, studies: Mapping, differences: Sequence[str], fmt: str) -> str | None:
    """The comparison as an HTML page (fmt 'html'), markdown, or None after printing nothing:
    the caller renders tables for the terminal with `comparison_tables`."""
    from ..compare import compare
    from . import html
    tables, plots = compare(run_a, run_b, studies, differences)
    if fmt == "html":
        return html.compare_page(run_a, run_b, tables, plots, differences)
    return render.to_markdown(tables)


def print_comparison(run_a: RunResult, run_b: RunResult, studies: Mapping, differences: Sequence[str],
                     out: Console) -> None:
    from ..compare import compare
    tables, _ = compare(run_a, run_b, studies, differences)
    render.to_terminal(tables, out)
