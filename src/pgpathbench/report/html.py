"""Report tables and plots -> one self-contained HTML page.

Everything is inline: the CSS, and the charts (svg.py draws them from Plot specs). No script,
no font, no image and no stylesheet is fetched, so the file opens anywhere, offline, and
says the same thing in ten years. The page reads the result model (results/model.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from html import escape
from typing import Iterable, Sequence

from ..results.fingerprint import Environment, Fingerprint, cpu_text, memory_text, tool_text
from ..results.model import RunResult
from . import Plot, Table
from .assemble import StudySection, when, failures_table
from .render import cell
from .svg import svg_plot

# -- HTML pieces ----------------------------------------------------------------------------------
CSS = """
:root { --ink: #1d2330; --muted: #5b6475; --line: #d9dde5; --soft: #f4f6f9; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
       "Liberation Sans", "DejaVu Sans", sans-serif; color: var(--ink); background: #fff; }
main { max-width: 1240px; margin: 0 auto; padding: 28px 28px 60px; }
header.page { border-bottom: 3px solid var(--accent); padding-bottom: 14px; margin-bottom: 18px; }
h1 { font-size: 26px; margin: 0 0 4px; letter-spacing: -0.01em; }
h1 .id { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 22px; color: var(--accent); }
h2 { font-size: 21px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 0 0 6px; }
h4 { font-size: 14px; margin: 16px 0 6px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
.subtitle { color: var(--muted); margin: 0; }
dl.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 8px 18px; margin: 14px 0 0; }
dl.facts div { background: var(--soft); border-radius: 6px; padding: 6px 10px; }
dl.facts dt { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
dl.facts dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
nav.toc { font-size: 14px; margin: 10px 0 0; color: var(--muted); }
nav.toc a { color: var(--accent); text-decoration: none; margin-right: 14px; }
figure { margin: 18px 0 26px; padding: 14px 16px 10px; border: 1px solid var(--line); border-radius: 8px;
         background: #fff; overflow-x: auto; }
figure svg { display: block; width: 100%; min-width: 760px; height: auto; font-family: inherit; }
figcaption { margin-top: 4px; }
.note { color: var(--muted); font-size: 13px; margin: 4px 0; }
svg .grid { stroke: #e6e9ef; stroke-width: 1; }
svg .grid.minor { stroke: #f1f3f6; }
svg .band { stroke: #eef0f4; stroke-width: 1; }
svg .axis { stroke: #6b7280; stroke-width: 1.2; }
svg .ref { stroke: #b42318; stroke-width: 1.5; stroke-dasharray: 6 4; }
svg .tick, svg .legend text, svg .value { fill: #374151; }
svg .axis-label { fill: var(--ink); font-weight: 600; }
svg .bar:hover, svg .point:hover { opacity: .8; }
.table-wrap { overflow-x: auto; margin: 22px 0 4px; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 650; font-size: 15px; padding: 0 0 6px; color: var(--ink); white-space: nowrap; }
td.empty { color: var(--muted); font-style: italic; }
th, td { padding: 4px 9px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--soft); text-align: left; font-weight: 600; vertical-align: bottom; line-height: 1.25; }
td.wrap { min-width: 260px; }
tr.differs td { background: #fff4e5 !important; }
.env-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 0 28px; align-items: start; }
td.num { text-align: right; white-space: nowrap; }
th.num { text-align: right; }
td.label { white-space: nowrap; }
td.pub, th.pub { background: #fff7e6; }
tbody tr:nth-child(even) td { background: #fafbfc; }
tbody tr:nth-child(even) td.pub { background: #fff2d6; }
tbody tr:hover td { background: #eef4fb; }
.yes { color: #b42318; font-weight: 650; }
.warn { background: #fff4e5; border: 1px solid #f5c27a; border-radius: 8px; padding: 10px 14px; margin: 14px 0; }
.ok { color: #1a7f37; }
pre, code, td.mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
td.mono { white-space: pre-wrap; overflow-wrap: anywhere; max-width: 760px; }
details { margin: 8px 0; } summary { cursor: pointer; color: var(--accent); }
pre { background: var(--soft); padding: 10px; border-radius: 6px; overflow-x: auto; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
@media print { figure { break-inside: avoid; } main { max-width: none; } }
"""


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def table_html(t: Table, cls: str = "", mono: Sequence[int] = (), mark_differing: bool = False) -> str:
    """A Table as <table>: label columns left, figures right (tabular digits), published
    figures shaded, 'yes' verdicts in colour. mono: columns in a fixed-width font (errors);
    mark_differing: highlight rows whose value cells are not all equal (settings per server)."""
    pub = [c.lower().startswith("published") for c in t.columns]
    head = "".join(f'<th class="{"num" if i >= t.align_left else ""}{" pub" if pub[i] else ""}" scope="col">'
                   f"{escape(c)}</th>" for i, c in enumerate(t.columns))
    rows = []
    for row in t.rows:
        cells = []
        for i, v in enumerate(row):
            classes = ["label" if i < t.align_left else "num"]
            if i < len(pub) and pub[i]:
                classes.append("pub")
            if v == "yes":
                classes.append("yes")
            if i in mono:
                classes = ["mono"]
            elif isinstance(v, str) and len(v) > 40:
                classes = ["wrap"]
            cells.append(f'<td class="{" ".join(classes)}">{escape(cell(v))}</td>')
        differs = mark_differing and len({str(v) for v in row[1:]}) > 1
        rows.append(f'<tr{" class=differs" if differs else ""}>' + "".join(cells) + "</tr>")
    if not rows:
        rows.append(f'<tr><td class="empty" colspan="{max(len(t.columns), 1)}">no rows</td></tr>')
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in t.notes)
    thead = f"<thead><tr>{head}</tr></thead>" if any(c.strip() for c in t.columns) else ""
    return (f'<div class="table-wrap {cls}"><table><caption>{escape(t.title)}</caption>{thead}'
            f'<tbody>{"".join(rows)}</tbody></table></div>{notes}')


def figure_html(p: Plot) -> str:
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in p.notes)
    return f'<figure><h3>{escape(p.title)}</h3>{svg_plot(p)}<figcaption>{notes}</figcaption></figure>'


def _kv_table(title: str, rows: Iterable[tuple[str, object]]) -> str:
    return table_html(Table(title, ["", ""], [[k, v if v is not None else None] for k, v in rows], align_left=2))


_SESSION_VOLATILE = ("load_avg_at_start",)


def _session_key(s: Fingerprint) -> str:
    """What identifies a session's environment, for showing identical sessions once."""
    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k not in _SESSION_VOLATILE and k not in ("port", "upstream")}
        return d
    return json.dumps(strip(s.to_json()), sort_keys=True, default=str)


def _session_groups(environment: Environment) -> list[tuple[list[int], Fingerprint]]:
    groups: list[tuple[list[int], Fingerprint]] = []
    for i, s in enumerate(environment.sessions, 1):
        for nums, first in groups:
            if _session_key(first) == _session_key(s):
                nums.append(i)
                break
        else:
            groups.append(([i], s))
    return groups


def environment_html(environment: Environment, rtt: dict[str, float] | None = None) -> str:
    """The fingerprint of each session: machine, tools, study set-up, servers and settings, paths."""
    if not environment.sessions:
        return '<p class="note">No environment recorded.</p>'
    out = []
    for nums, s in _session_groups(environment):
        if len(environment.sessions) > 1:
            which = "Session" + ("s " + ", ".join(map(str, nums)) if len(nums) > 1 else f" {nums[0]}")
            out.append(f"<h3>{escape(which)}</h3>")
        out.append('<div class="env-grid"><div>' + _machine_html(s.machine) + "</div><div>")
        if s.tools:
            out.append(_kv_table("Clients and tools", s.tools.items()))
        for major, per_study in s.setup.items():
            for study, facts in per_study.items():
                title = f"Study set-up: {study}" + (f" (PostgreSQL {major})" if major else "")
                out.append(_kv_table(title, [(k, v if not isinstance(v, (dict, list)) else json.dumps(v))
                                             for k, v in (facts or {}).items()]))
        out.append("</div></div>")
        out.append(_servers_html(s.servers) + _paths_html(s.paths, rtt or {}))
    return "".join(out)


def _machine_html(m: dict) -> str:
    load = m.get("load_avg_at_start")
    return _kv_table("Machine", [
        ("CPU", cpu_text(m)), ("cores", m.get("cores")), ("memory", memory_text(m)),
        ("kernel", m.get("kernel")), ("OS", m.get("os")), ("host", m.get("host")), ("user", m.get("user")),
        ("Python", m.get("python")), ("pgpathbench", tool_text(m)),
        ("load average at start", ", ".join(f"{x:.2f}" for x in load) if isinstance(load, list) else None),
        *([("your libpq and driver variables left out", ", ".join(m["environment_ignored"]) or "none")]
          if "environment_ignored" in m else [])])


def _servers_html(servers: dict) -> str:
    if not servers:
        return ""
    roles = list(servers)
    out = [table_html(Table("Servers", ["role", "version", "auth"], [
        [r, servers[r].get("version"), ", ".join(f"{k}: {v}" for k, v in (servers[r].get("auth") or {}).items())]
        for r in roles], align_left=3))]
    names = sorted({n for r in roles for n in (servers[r].get("settings") or {})}, key=str.lower)
    rows = [[n, *[(servers[r].get("settings") or {}).get(n, "(default)") for r in roles]] for n in names]
    out.append(table_html(Table("Non-default server settings", ["setting", *roles], rows,
                                ["Every setting whose source is not the built-in default, as the server "
                                 "reported it (pg_settings.setting: memory in its unit, e.g. 8 kB pages)."
                                 + (" Shaded: the servers differ." if len(roles) > 1 else "")],
                                align_left=1 + len(roles)), mark_differing=len(roles) > 1))
    return "".join(out)


def _paths_html(paths: dict, rtt: dict[str, float]) -> str:
    if not paths:
        return ""
    rows = [[name, p.get("kind"), p.get("latency_ms"), p.get("jitter_ms"),
             f"{p['bandwidth_kbit']:,} kbit/s" if p.get("bandwidth_kbit") else "unlimited",
             f"{rtt[name]:.3f}" if name in rtt else None] for name, p in paths.items()]
    return table_html(Table("Network links", ["link", "kind", "added RTT, ms", "jitter, ms", "bandwidth",
                                              "measured RTT, ms (median)"], rows,
                            ["Measured RTT: median of the link's probes (before and after every round)."],
                            align_left=2))


def options_html(run: RunResult) -> str:
    """The run's options: per study its preset, rounds, parameters and dimensions; the rest."""
    options = run.options
    out = []
    for so in options.get("studies", []):
        rows = [("preset", so.get("preset")), ("rounds", so.get("repeat"))]
        rows += [(f"--{k.replace('_', '-')}", v if v is not None else "(not set)") for k, v in (so.get("params") or {}).items()]
        rows += [(f"--{k}", ",".join(v)) for k, v in (so.get("dims") or {}).items()]
        out.append(_kv_table(f"{so.get('study', 'study')}", rows))
    rest = [(k, v if not isinstance(v, (dict, list)) else json.dumps(v)) for k, v in options.items() if k != "studies"]
    out.append(_kv_table("Run", [("seed", run.seed), *rest]))
    out.append(f"<details><summary>options as stored (JSON)</summary><pre>{escape(json.dumps(options, indent=2))}"
               "</pre></details>")
    return "".join(out)


def failures_html(run: RunResult) -> str:
    table = failures_table(run)
    if table is None:
        return '<p class="ok">No failed measurements.</p>'
    return table_html(table, mono=(5,))


def page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>{body}"
            "<footer>Generated by pgpathbench. Self-contained: no scripts, no external resources.</footer>"
            "</main></body></html>\n")


def _facts(items: Iterable[tuple[str, object]]) -> str:
    return '<dl class="facts">' + "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(str(v))}</dd></div>"
                                          for k, v in items if v not in (None, "")) + "</dl>"


def runs_page(runs: Sequence[tuple[RunResult, Sequence[StudySection], Sequence[Table]]]) -> str:
    """One run, or several on one page (e.g. the demo's studies), each with its own environment."""
    if len(runs) == 1:
        return page(f"pgpathbench report {runs[0][0].run_id}", run_body(*runs[0]))
    return page("pgpathbench report " + ", ".join(r[0].run_id for r in runs),
                "".join(run_body(*r, prefix=f"{r[0].run_id}-") for r in runs))


def _header(run: RunResult, sections: Sequence[StudySection], prefix: str) -> str:
    ok, failed = run.counts()
    took = None
    if isinstance(run.started_at, datetime) and isinstance(run.finished_at, datetime):
        took = f"{(run.finished_at - run.started_at).total_seconds():.0f} s"
    env = run.environment.last
    version = ", ".join(sorted({str(v.get("version", "—")).split(" on ")[0].split(" (")[0]
                                for v in env.servers.values()})) or "—"
    m = env.machine
    machine = f"{cpu_text(m)}, {m.get('cores', '?')} cores, {memory_text(m)}"
    return (f'<header class="page"><h1>pgpathbench report <span class="id">{escape(run.run_id)}</span></h1>'
            f'<p class="subtitle">{escape(" · ".join(s.title for s in sections) or run.study_name)}</p>'
            + _facts([("status", run.status), ("preset", run.preset), ("started", when(run.started_at)),
                      ("wall time", took), ("measurements", f"{ok} ok" + (f", {failed} failed" if failed else "")),
                      ("server", version), ("machine", machine), ("sessions", len(run.environment.sessions))])
            + '<nav class="toc">' + "".join(f'<a href="#{prefix}study-{escape(s.name)}">{escape(s.name)}</a>'
                                            for s in sections)
            + f'<a href="#{prefix}failed">failed measurements</a><a href="#{prefix}environment">environment</a>'
              f'<a href="#{prefix}options">options</a></nav></header>')


def run_body(run: RunResult, sections: Sequence[StudySection], shared: Sequence[Table] = (),
             prefix: str = "") -> str:
    """One run's header, studies, shared tables (outliers), failures, environment and options."""
    body = [_header(run, sections, prefix)]
    for s in sections:
        body.append(f'<section id="{prefix}study-{escape(s.name)}"><h2>{escape(s.name)}: {escape(s.title)}</h2>')
        body.extend(figure_html(p) for p in s.plots)
        body.extend(table_html(t) for t in s.tables)
        body.append("</section>")
    body.extend(table_html(t) for t in shared)
    body.append(f'<section id="{prefix}failed"><h2>Failed measurements</h2>{failures_html(run)}</section>')
    body.append(f'<section id="{prefix}environment"><h2>Environment</h2>'
                f'{environment_html(run.environment, run.rtt())}</section>')
    body.append(f'<section id="{prefix}options"><h2>Options</h2>{options_html(run)}</section>')
    return "".join(body)


def compare_page(run_a: RunResult, run_b: RunResult, tables: Sequence[Table], plots: Sequence[Plot],
                 differences: Sequence[str]) -> str:
    """Two runs side by side: the comparison, its warnings, and both environments."""
    body = [f'<header class="page"><h1>pgpathbench compare <span class="id">{escape(run_a.run_id)}</span> → '
            f'<span class="id">{escape(run_b.run_id)}</span></h1>'
            '<p class="subtitle">A = the first run, B = the second; ratio = B / A.</p></header>']
    if differences:
        body.append('<div class="warn"><strong>The runs\' environments differ</strong> (compared anyway, --force):'
                    "<ul>" + "".join(f"<li>{escape(d)}</li>" for d in differences) + "</ul></div>")
    body.extend(figure_html(p) for p in plots)
    body.extend(table_html(t) for t in tables)
    for label, run in (("A", run_a), ("B", run_b)):
        body.append(f'<h2>Environment of {label}: {escape(run.run_id)}</h2>{environment_html(run.environment)}'
                    f'<h4>Options</h4>{options_html(run)}')
    return page(f"pgpathbench compare {run_a.run_id} {run_b.run_id}", "".join(body))
