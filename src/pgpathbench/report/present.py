"""What the commands print or write, from the result model: a run's report in every format,
one HTML page of several runs, a comparison. The CLI only parses and dispatches to these."""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from rich.console import Console

from ..results.model import RunResult
from . import Table, assemble, export, render
from .compare import compare


def print_report(run: RunResult, fmt: str, out: Console, studies: Mapping, wide: bool = False) -> None:
    """table (a 120-column terminal; --wide for every column), markdown, csv or json."""
    if fmt == "json":
        out.out(export.to_json(run, studies[run.study_name].findings(run.study)), highlight=False)
    elif fmt == "csv":
        out.out(export.to_csv(run), highlight=False, end="")
    elif fmt == "markdown":
        out.out(render.to_markdown(assemble.tables(run, studies)), highlight=False)
    elif wide:
        wider = Console(file=out.file, highlight=False, soft_wrap=False, width=max(out.width, render.WIDE_WIDTH))
        render.to_terminal(assemble.tables(run, studies), wider, wide=True)
    else:
        render.to_terminal(assemble.tables(run, studies), out)


def html_page(runs: Sequence[RunResult], studies: Mapping) -> str:
    """One self-contained page: every run's studies (tables, plots), shared tables, environment."""
    from . import html
    pages = []
    for run in runs:
        shared = [t for t in (assemble.outliers_table(run, studies),) if t is not None]
        pages.append((run, [assemble.study_section(run, studies)], shared))
    return html.runs_page(pages)


def comparison(run_a: RunResult, run_b: RunResult, studies: Mapping, differences: Sequence[str], fmt: str) -> str | None:
    """The comparison as an HTML page (fmt 'html'), markdown, or None after printing nothing:
    the caller renders tables for the terminal with `comparison_tables`."""
    from . import html
    tables, plots = compare(run_a, run_b, studies, differences)
    if fmt == "html":
        return html.compare_page(run_a, run_b, tables, plots, differences)
    return render.to_markdown(tables)


def print_comparison(run_a: RunResult, run_b: RunResult, studies: Mapping, differences: Sequence[str],
                     out: Console) -> None:
    tables, _ = compare(run_a, run_b, studies, differences)
    render.to_terminal(tables, out)


def print_studies(studies, fmt: str, out: Console) -> None:
    """The studies: dimensions, parameters, presets and metric catalogue (table or json)."""
    if fmt == "json":
        out.print_json(json.dumps([{
            "name": s.name, "title": s.title, "seeds": list(s.seeds),
            "dimensions": {d.name: {"values": list(d.values) or None, "default": list(s.default_dims[d.name]),
                                    "help": d.help, "knob": d.knob} for d in s.dimensions.values()},
            "knob_families": {f.prefix: {"option": f.option, "names": list(f.knobs) or None, "help": f.help}
                              for f in s.knob_families.values()},
            "parameters": {p.name: p.help for p in s.parameters.values()},
            "presets": {p.name: {"help": p.help, "repeat": p.repeat, **p.params} for p in s.presets.values()},
            "metrics": {m.name: {"unit": m.unit, "better": m.better, "meaning": m.meaning}
                        for m in s.metrics.values()},
            "primary_metric": s.primary_metric,
            "roles": {r.name: {"what": r.what, "user_server": r.needs is not None, "needs": list(r.needs or ()),
                               "needs_when": {k: list(v) for k, v in r.needs_when.items()},
                               "why_not": r.why_not or None} for r in s.roles.values()},
        } for s in studies]))
        return
    for s in studies:
        rows = [[f"dimension {d.name}", ",".join(d.values) or "(any)", ",".join(s.default_dims[d.name]), d.help]
                for d in s.dimensions.values()]
        rows += [[f"knobs {f.option} NAME=A,B", ",".join(f.knobs) or "(any)", "(none)", f.help]
                 for f in s.knob_families.values()]
        rows += [[f"parameter {p.name}", "", str(p.default) if p.default is not None else "(preset)", p.help]
                 for p in s.parameters.values()]
        rows += [[f"preset {p.name}", "", f"{p.repeat} rounds", p.help] for p in s.presets.values()]
        rows += [[f"role {r.name}", "--server" if r.needs is not None else "managed only", "managed",
                  f"{r.what}; " + (f"a user server needs: {r.needs_text()}" if r.needs is not None else r.why_not)]
                 for r in s.roles.values()]
        rows += [[f"metric {m.name}" + (" (primary)" if m.name == s.primary_metric else ""), m.unit,
                  f"{m.better} is better" if m.better != "none" else "", m.meaning] for m in s.metrics.values()]
        render.to_terminal([Table(f"{s.name}: {s.title} (seeds {', '.join(s.seeds)})",
                                  ["", "values", "default", "meaning"], rows, align_left=4)], out)


def print_runs(runs: list[dict], fmt: str, out: Console) -> None:
    """The stored runs (table or json)."""
    if fmt == "json":
        out.out(export.runs_to_json(runs), highlight=False)
        return
    rows = [[r["run_id"], ",".join(r["studies"]), r["preset"], r["status"], r["started_at"].strftime("%Y-%m-%d %H:%M:%S"),
             r["measurements"], r["errors"]] for r in runs]
    render.to_terminal([Table("Stored runs", ["run", "studies", "preset", "status", "started", "measurements",
                                              "errors"], rows, [] if rows else ["No runs yet."], align_left=5)], out)


def print_doctor(rows: list[list], out: Console) -> None:
    render.to_terminal([Table("pgpathbench doctor", ["check", "status", "detail"], rows, align_left=3)], out)
