"""Report tables and plots -> one self-contained HTML page.

Everything is inline: the CSS, and the charts, drawn here as SVG from Plot specs. No script,
no font, no image and no stylesheet is fetched, so the file opens anywhere, offline, and
says the same thing in ten years. Charts: grouped bars or points with error bars, "nice"
axis ticks (1, 2, 2.5, 5 x 10^k; decades on log axes), a legend, colours from the Okabe-Ito
palette (distinguishable with the common colour-vision deficiencies) and, for points, a
marker shape per series as well. Every bar and point has a tooltip (<title>) with its value.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from typing import Iterable, Sequence

from ..stats import format_number
from . import Plot, Point, Table
from .render import cell

# Okabe-Ito (minus its pale yellow), then two darker extras; cycled beyond.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#7F5F26", "#555555")
MARKERS = ("circle", "square", "triangle", "diamond")

FONT_PX = 13            # tick labels, legend
LABEL_PX = 14           # axis labels
CHAR_PX = 7.3           # average width of a character at FONT_PX (sans-serif), for layout
WIDTH = 1140            # viewBox width of a chart: about the width of a figure on a 1280 px screen
HEIGHT = 430            # height of the plotting area plus axes, before legend and labels


# -- axes -----------------------------------------------------------------------------------------
def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k that is >= raw."""
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    exp = math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * 10 ** exp >= raw * (1 - 1e-9):
            return m * 10 ** exp
    return 10 ** (exp + 1)


def linear_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round tick values covering [lo, hi], about `target` of them."""
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    step = _nice_step((hi - lo) / max(target - 1, 1))
    start, end = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(start, end + 1)]


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[float]]:
    """Major ticks (labelled) and minor ones (grid only) for a log axis covering [lo, hi] > 0."""
    e0, e1 = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    if e1 == e0:
        e1 += 1
    decades = e1 - e0
    majors, minors = [], []
    for e in range(e0, e1 + 1):
        base = 10.0 ** e
        majors.append(base)
        if e == e1:
            break
        for m in range(2, 10):
            (majors if decades <= 2 and m in (2, 5) else minors).append(m * base)
    return majors, minors


def tick_text(v: float, step: float | None = None) -> str:
    """A tick label: thousands separators, as many decimals as the step (or value) needs."""
    if v == 0:
        return "0"
    ref = abs(step) if step else abs(v)
    decimals = max(0, -math.floor(math.log10(ref) + 1e-9))
    if step and round(ref / 10 ** math.floor(math.log10(ref) + 1e-9), 6) == 2.5:
        decimals += 1
    return f"{v:,.{decimals}f}"


@dataclass
class _Axis:
    lo: float
    hi: float
    log: bool
    p0: float          # pixel of lo
    p1: float          # pixel of hi
    majors: list[float] = field(default_factory=list)
    minors: list[float] = field(default_factory=list)
    step: float | None = None

    def __call__(self, v: float) -> float:
        if self.log:
            v = max(v, self.lo)
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (v - self.lo) / (self.hi - self.lo)
        return self.p0 + f * (self.p1 - self.p0)

    def labels(self) -> list[tuple[float, str]]:
        return [(v, tick_text(v, None if self.log else self.step)) for v in self.majors]


def _axis(values: Sequence[float], log: bool, from_zero: bool, p0: float = 0, p1: float = 1,
          target: int = 6) -> _Axis:
    vs = [v for v in values if v is not None and math.isfinite(v)]
    if not vs:
        vs = [0.0, 1.0]
    if log and min(vs) > 0:
        majors, minors = log_ticks(min(vs), max(vs))
        lo, hi = majors[0], majors[-1]
        return _Axis(lo, hi, True, p0, p1, majors, [m for m in minors if lo < m < hi])
    lo, hi = min(vs), max(vs)
    if from_zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    ticks = linear_ticks(lo, hi, target)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else None
    return _Axis(ticks[0], ticks[-1], False, p0, p1, ticks, [], step)


# -- SVG ------------------------------------------------------------------------------------------
def _f(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _text_width(text: str, px: float = FONT_PX) -> float:
    return len(text) * CHAR_PX * px / FONT_PX


def _marker(shape: str, x: float, y: float, color: str, r: float = 5.0) -> str:
    style = f'fill="{color}" stroke="#fff" stroke-width="1.2"'
    if shape == "square":
        return f'<rect x="{_f(x - r * .85)}" y="{_f(y - r * .85)}" width="{_f(r * 1.7)}" height="{_f(r * 1.7)}" {style}/>'
    if shape == "triangle":
        return (f'<polygon points="{_f(x)},{_f(y - r * 1.1)} {_f(x - r)},{_f(y + r * .8)} {_f(x + r)},{_f(y + r * .8)}" '
                f'{style}/>')
    if shape == "diamond":
        return (f'<polygon points="{_f(x)},{_f(y - r * 1.2)} {_f(x + r)},{_f(y)} {_f(x)},{_f(y + r * 1.2)} '
                f'{_f(x - r)},{_f(y)}" {style}/>')
    return f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{_f(r)}" {style}/>'


def _errorbar(x: float, y_low: float, y_high: float, cap: float, color: str) -> str:
    return (f'<g class="errorbar" stroke="{color}" stroke-width="1.6">'
            f'<line x1="{_f(x)}" y1="{_f(y_low)}" x2="{_f(x)}" y2="{_f(y_high)}"/>'
            f'<line x1="{_f(x - cap)}" y1="{_f(y_low)}" x2="{_f(x + cap)}" y2="{_f(y_low)}"/>'
            f'<line x1="{_f(x - cap)}" y1="{_f(y_high)}" x2="{_f(x + cap)}" y2="{_f(y_high)}"/></g>')


def _point_tip(series: str, p: Point) -> str:
    ci = "" if p.y_low is None or p.y_high is None else \
        f" (95% CI {format_number(p.y_low)} to {format_number(p.y_high)})"
    x = p.x if isinstance(p.x, str) else format_number(float(p.x))
    return f"{series} at {x}: {format_number(p.y)}{ci}"


def _legend(names: Sequence[str], kind: str, width: float, x0: float, y0: float) -> tuple[str, float]:
    """Legend items in rows that fit `width`; returns the SVG and the height used."""
    if not names:
        return "", 0.0
    parts, x, y, row_h = [], x0, y0, 22
    for i, name in enumerate(names):
        w = 24 + _text_width(name) + 22
        if x > x0 and x + w > x0 + width:
            x, y = x0, y + row_h
        color = PALETTE[i % len(PALETTE)]
        cy = y + 8
        if kind == "bar":
            sw = f'<rect x="{_f(x)}" y="{_f(cy - 7)}" width="16" height="14" rx="2" fill="{color}"/>'
        else:
            line = f'<line x1="{_f(x)}" y1="{_f(cy)}" x2="{_f(x + 18)}" y2="{_f(cy)}" stroke="{color}" stroke-width="2"/>' \
                if kind == "line" else ""
            sw = line + _marker(MARKERS[i % len(MARKERS)], x + 9, cy, color)
        parts.append(f'<g class="legend-item">{sw}<text x="{_f(x + 24)}" y="{_f(cy + 4.5)}">{escape(name)}</text></g>')
        x += w
    return f'<g class="legend">{"".join(parts)}</g>', y + row_h - y0


def svg_plot(plot: Plot, width: int = WIDTH) -> str:
    """The chart as an inline <svg> element (no xmlns needed inside HTML)."""
    names = [n for n, pts in plot.series.items() if pts]
    points = [(i, n, p) for i, n in enumerate(plot.series) for p in plot.series[n] if n in names]
    categorical = plot.kind == "bar" or any(isinstance(p.x, str) for _, _, p in points)

    # Vertical layout: legend on top, then the plotting area, then x ticks and the x label.
    legend_svg, legend_h = _legend(names, plot.kind, width - 90, 70, 8)
    ys = [v for _, _, p in points for v in (p.y, p.y_low, p.y_high) if v is not None]
    if plot.ref_y is not None:
        ys.append(plot.ref_y)
    log_y = plot.log_y and ys and min(ys) > 0
    yaxis = _axis(ys, bool(log_y), from_zero=plot.kind == "bar" or (min(ys, default=0) >= 0 and not log_y
                                                                         and plot.kind != "scatter"))
    y_labels = yaxis.labels()
    left = 30 + max((_text_width(t) for _, t in y_labels), default=20) + 14
    right = 24
    plot_w = width - left - right

    categories: list[str] = []
    if categorical:
        for _, _, p in points:
            if str(p.x) not in categories:
                categories.append(str(p.x))
        band = plot_w / max(len(categories), 1)
        longest = max((_text_width(c) for c in categories), default=0)
        rotate = longest > band - 8
        x_ticks_h = (longest * 0.6 + 24) if rotate else 24
    else:
        xs = [float(p.x) for _, _, p in points]
        log_x = plot.log_x and xs and min(xs) > 0
        xaxis = _axis(xs, bool(log_x), from_zero=min(xs, default=0) >= 0 and not log_x, target=8)
        rotate = False
        x_ticks_h = 24
    top = 8 + legend_h + 12
    plot_h = HEIGHT - 90
    bottom_y = top + plot_h
    height = bottom_y + x_ticks_h + 34
    yaxis.p0, yaxis.p1 = bottom_y, top

    out = [f'<svg class="chart" viewBox="0 0 {width} {_f(height)}" width="{width}" height="{_f(height)}" '
           f'role="img" aria-label="{escape(plot.title)}" font-size="{FONT_PX}">',
           f'<title>{escape(plot.title)}</title>']
    # grid and y axis
    for v in yaxis.minors:
        out.append(f'<line class="grid minor" x1="{_f(left)}" x2="{_f(left + plot_w)}" y1="{_f(yaxis(v))}" '
                   f'y2="{_f(yaxis(v))}"/>')
    for v, t in y_labels:
        y = yaxis(v)
        out.append(f'<line class="grid" x1="{_f(left)}" x2="{_f(left + plot_w)}" y1="{_f(y)}" y2="{_f(y)}"/>')
        out.append(f'<text class="tick" x="{_f(left - 8)}" y="{_f(y + 4.5)}" text-anchor="end">{escape(t)}</text>')
    out.append(f'<line class="axis" x1="{_f(left)}" x2="{_f(left)}" y1="{_f(top)}" y2="{_f(bottom_y)}"/>')
    out.append(f'<line class="axis" x1="{_f(left)}" x2="{_f(left + plot_w)}" y1="{_f(bottom_y)}" y2="{_f(bottom_y)}"/>')
    y_title = plot.y_label + (" (log scale)" if log_y else "")
    out.append(f'<text class="axis-label" transform="translate(18,{_f(top + plot_h / 2)}) rotate(-90)" '
               f'text-anchor="middle" font-size="{LABEL_PX}">{escape(y_title)}</text>')
    x_title = plot.x_label + (" (log scale)" if not categorical and xaxis.log else "")
    out.append(f'<text class="axis-label" x="{_f(left + plot_w / 2)}" y="{_f(height - 10)}" text-anchor="middle" '
               f'font-size="{LABEL_PX}">{escape(x_title)}</text>')

    if plot.ref_y is not None:
        y = yaxis(plot.ref_y)
        out.append(f'<line class="ref" x1="{_f(left)}" x2="{_f(left + plot_w)}" y1="{_f(y)}" y2="{_f(y)}"/>')

    if categorical:
        for c_i, c in enumerate(categories):
            cx = left + band * (c_i + 0.5)
            if c_i:
                out.append(f'<line class="band" x1="{_f(left + band * c_i)}" x2="{_f(left + band * c_i)}" '
                           f'y1="{_f(top)}" y2="{_f(bottom_y)}"/>')
            out.append(f'<line class="axis" x1="{_f(cx)}" x2="{_f(cx)}" y1="{_f(bottom_y)}" y2="{_f(bottom_y + 5)}"/>')
            if rotate:
                out.append(f'<text class="tick" transform="translate({_f(cx)},{_f(bottom_y + 16)}) rotate(-35)" '
                           f'text-anchor="end">{escape(c)}</text>')
            else:
                out.append(f'<text class="tick" x="{_f(cx)}" y="{_f(bottom_y + 19)}" text-anchor="middle">'
                           f'{escape(c)}</text>')
        slots = len(names)
        inner = band * (0.82 if plot.kind == "bar" else 0.6)
        slot_w = min(inner / max(slots, 1), 110 if plot.kind == "bar" else 60)   # no slabs for few bars
        inner = slot_w * max(slots, 1)
        for s_i, name in enumerate(names):
            color = PALETTE[list(plot.series).index(name) % len(PALETTE)]
            for p in plot.series[name]:
                c_i = categories.index(str(p.x))
                x = left + band * c_i + (band - inner) / 2 + slot_w * (s_i + 0.5)
                tip = f"<title>{escape(_point_tip(name, p))}</title>"
                if plot.kind == "bar":
                    y0 = yaxis(0.0) if not yaxis.log else yaxis.p0
                    y = yaxis(p.y)
                    bw = slot_w * 0.88
                    out.append(f'<rect class="bar" x="{_f(x - bw / 2)}" y="{_f(min(y, y0))}" width="{_f(bw)}" '
                               f'height="{_f(max(abs(y0 - y), 0.5))}" fill="{color}">{tip}</rect>')
                if p.y_low is not None and p.y_high is not None:
                    err_color = "#1a1a1a" if plot.kind == "bar" else color
                    out.append(_errorbar(x, yaxis(p.y_low), yaxis(p.y_high), min(slot_w * 0.25, 7), err_color))
                if plot.kind != "bar":      # the marker over its error bar
                    out.append(f'<g class="point">{tip}{_marker(MARKERS[s_i % len(MARKERS)], x, yaxis(p.y), color)}</g>')
                if plot.kind == "bar":
                    label = format_number(p.y)
                    if _text_width(label, 11) <= slot_w + 2:
                        top_y = min(yaxis(p.y), yaxis(p.y_high) if p.y_high is not None else bottom_y)
                        out.append(f'<text class="value" x="{_f(x)}" y="{_f(top_y - 5)}" text-anchor="middle" '
                                   f'font-size="11">{escape(label)}</text>')
    else:
        xaxis.p0, xaxis.p1 = left + 12, left + plot_w - 12
        for v, t in xaxis.labels():
            x = xaxis(v)
            out.append(f'<line class="grid" x1="{_f(x)}" x2="{_f(x)}" y1="{_f(top)}" y2="{_f(bottom_y)}"/>')
            out.append(f'<line class="axis" x1="{_f(x)}" x2="{_f(x)}" y1="{_f(bottom_y)}" y2="{_f(bottom_y + 5)}"/>')
            out.append(f'<text class="tick" x="{_f(x)}" y="{_f(bottom_y + 19)}" text-anchor="middle">{escape(t)}</text>')
        for s_i, name in enumerate(names):
            color = PALETTE[list(plot.series).index(name) % len(PALETTE)]
            pts = sorted(plot.series[name], key=lambda p: float(p.x))
            if plot.kind == "line" and len(pts) > 1:
                path = " ".join(f"{_f(xaxis(float(p.x)))},{_f(yaxis(p.y))}" for p in pts)
                out.append(f'<polyline class="series-line" points="{path}" fill="none" stroke="{color}" '
                           f'stroke-width="2.2"/>')
            for p in pts:
                x = xaxis(float(p.x))
                if p.y_low is not None and p.y_high is not None:
                    out.append(_errorbar(x, yaxis(p.y_low), yaxis(p.y_high), 5, color))
                tip = f"<title>{escape(_point_tip(name, p))}</title>"
                out.append(f'<g class="point">{tip}{_marker(MARKERS[s_i % len(MARKERS)], x, yaxis(p.y), color)}</g>')
    out.append(legend_svg)
    out.append("</svg>")
    return "".join(out)


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


def _gib(b: object) -> str:
    return f"{b / 2 ** 30:.1f} GiB" if isinstance(b, (int, float)) else "—"


MACHINE_KEYS = ("host", "cpu_model", "cores", "memory_bytes", "kernel", "os", "python", "pgpathbench", "user",
                "load_avg_at_start")
_SESSION_VOLATILE = ("load_avg_at_start",)


def _session_key(s: dict) -> str:
    """What identifies a session's environment, for showing identical sessions once."""
    def strip(d):
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k not in _SESSION_VOLATILE and k not in ("port", "upstream")}
        return d
    return json.dumps(strip(s), sort_keys=True, default=str)


def environment_html(run: dict, probes: Sequence[dict] = ()) -> str:
    """The fingerprint of each session: machine, clients, servers and their settings, links."""
    sessions = (run.get("environment") or {}).get("sessions") or []
    if not sessions:
        return '<p class="note">No environment recorded.</p>'
    groups: list[tuple[list[int], dict]] = []
    for i, s in enumerate(sessions, 1):
        for nums, first in groups:
            if _session_key(first) == _session_key(s):
                nums.append(i)
                break
        else:
            groups.append(([i], s))
    rtt = _probe_rtt(probes)
    out = []
    for nums, s in groups:
        if len(sessions) > 1:
            which = "Session" + ("s " + ", ".join(map(str, nums)) if len(nums) > 1 else f" {nums[0]}")
            out.append(f"<h3>{escape(which)}</h3>")
        load = s.get("load_avg_at_start")
        out.append('<div class="env-grid"><div>')
        out.append(_kv_table("Machine", [
            ("CPU", s.get("cpu_model")), ("cores", s.get("cores")), ("memory", _gib(s.get("memory_bytes"))),
            ("kernel", s.get("kernel")), ("OS", s.get("os")), ("host", s.get("host")), ("user", s.get("user")),
            ("Python", s.get("python")), ("pgpathbench", s.get("pgpathbench")),
            ("load average at start", ", ".join(f"{x:.2f}" for x in load) if isinstance(load, list) else None)]))
        others = [(k, v) for k, v in s.items() if k not in MACHINE_KEYS and k not in ("servers", "links")
                  and not isinstance(v, (dict, list))]
        out.append("</div><div>")
        if others:
            out.append(_kv_table("Clients and tools", others))
        for k, v in s.items():
            if k not in ("servers", "links") and isinstance(v, dict):
                out.append(_kv_table(f"Study set-up: {k}", [(kk, vv if not isinstance(vv, (dict, list)) else
                                                             json.dumps(vv)) for kk, vv in v.items()]))
        out.append("</div></div>")
        servers = s.get("servers") or {}
        if servers:
            roles = list(servers)
            out.append(table_html(Table("Servers", ["role", "version", "auth"], [
                [r, servers[r].get("version"), ", ".join(f"{k}: {v}" for k, v in (servers[r].get("auth") or {}).items())]
                for r in roles], align_left=3)))
            names = sorted({n for r in roles for n in (servers[r].get("settings") or {})}, key=str.lower)
            rows = [[n, *[(servers[r].get("settings") or {}).get(n, "(default)") for r in roles]] for n in names]
            out.append(table_html(Table("Non-default server settings", ["setting", *roles], rows,
                                        ["Every setting whose source is not the built-in default, as the server "
                                         "reported it (pg_settings.setting: memory in its unit, e.g. 8 kB pages)."
                                         + (" Shaded: the servers differ." if len(roles) > 1 else "")],
                                        align_left=1 + len(roles)), mark_differing=len(roles) > 1))
        links = s.get("links") or {}
        if links:
            rows = [[name, l.get("kind"), l.get("latency_ms"), l.get("jitter_ms"),
                     f"{l['bandwidth_kbit']:,} kbit/s" if l.get("bandwidth_kbit") else "unlimited",
                     f"{rtt[name]:.3f}" if name in rtt else None] for name, l in links.items()]
            out.append(table_html(Table("Network links", ["link", "kind", "added RTT, ms", "jitter, ms", "bandwidth",
                                                          "measured RTT, ms (median)"], rows,
                                        ["Measured RTT: median of the link's probes (before and after every round)."],
                                        align_left=2)))
    return "".join(out)


def _probe_rtt(probes: Sequence[dict]) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for p in probes:
        by.setdefault(p["link"], []).append(float(p["rtt_median_ms"]))
    return {k: sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2
            for k, v in by.items()}


def options_html(run: dict) -> str:
    """The run's options: per study its preset, rounds, parameters and dimensions; the rest."""
    options = run.get("options") or {}
    out = []
    for so in options.get("studies", []):
        rows = [("preset", so.get("preset")), ("rounds", so.get("repeat"))]
        rows += [(f"--{k.replace('_', '-')}", v if v is not None else "(not set)") for k, v in (so.get("params") or {}).items()]
        rows += [(f"--{k}", ",".join(v)) for k, v in (so.get("dims") or {}).items()]
        out.append(_kv_table(f"{so.get('study', 'study')}", rows))
    rest = [(k, v if not isinstance(v, (dict, list)) else json.dumps(v)) for k, v in options.items() if k != "studies"]
    out.append(_kv_table("Run", [("seed", run.get("seed")), *rest]))
    out.append(f"<details><summary>options as stored (JSON)</summary><pre>{escape(json.dumps(options, indent=2))}"
               "</pre></details>")
    return "".join(out)


def failures_html(measurements: Sequence[dict]) -> str:
    failed = [m for m in measurements if not m.get("ok")]
    if not failed:
        return '<p class="ok">No failed measurements.</p>'
    rows = [[m["study"], m["case_id"], m["round"], m.get("session"), _when(m.get("started_at")), m.get("error") or "—"]
            for m in failed]
    return table_html(Table(f"Failed measurements ({len(failed)})", ["study", "case", "round", "session", "started",
                                                                     "error"], rows, align_left=6), mono=(5,))


def _when(v: object) -> str:
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)[:19].replace("T", " ") if v else "—"


def page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>{body}"
            "<footer>Generated by pgpathbench. Self-contained: no scripts, no external resources.</footer>"
            "</main></body></html>\n")


@dataclass
class StudySection:
    """What one study says about a run: its title, tables and plots."""
    name: str
    title: str
    tables: list[Table]
    plots: list[Plot]


def _facts(items: Iterable[tuple[str, object]]) -> str:
    return '<dl class="facts">' + "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(str(v))}</dd></div>"
                                          for k, v in items if v not in (None, "")) + "</dl>"


def run_page(run: dict, measurements: Sequence[dict], probes: Sequence[dict], sections: Sequence[StudySection]) -> str:
    """The whole report of one run."""
    return page(f"pgpathbench report {run['run_id']}", run_body(run, measurements, probes, sections))


def runs_page(runs: Sequence[tuple[dict, Sequence[dict], Sequence[dict], Sequence[StudySection]]]) -> str:
    """Several runs on one page (e.g. the demo's studies), each with its own environment."""
    ids = [r[0]["run_id"] for r in runs]
    return page("pgpathbench report " + ", ".join(ids),
                "".join(run_body(*r, prefix=f"{r[0]['run_id']}-") for r in runs))


def run_body(run: dict, measurements: Sequence[dict], probes: Sequence[dict], sections: Sequence[StudySection],
             prefix: str = "") -> str:
    """One run's header, studies, failures, environment and options; anchors start with prefix."""
    ok = sum(1 for m in measurements if m.get("ok"))
    failed = len(measurements) - ok
    started, finished = run.get("started_at"), run.get("finished_at")
    took = None
    if isinstance(started, datetime) and isinstance(finished, datetime):
        took = f"{(finished - started).total_seconds():.0f} s"
    sessions = (run.get("environment") or {}).get("sessions") or [{}]
    env = sessions[-1]
    version = ", ".join(sorted({v.get("version", "—").split(" on ")[0].split(" (")[0]
                                for v in (env.get("servers") or {}).values()})) or "—"
    machine = f"{env.get('cpu_model', '?')}, {env.get('cores', '?')} cores, {_gib(env.get('memory_bytes'))}"
    body = [f'<header class="page"><h1>pgpathbench report <span class="id">{escape(run["run_id"])}</span></h1>',
            f'<p class="subtitle">{escape(" · ".join(s.title for s in sections) or ", ".join(run.get("studies", [])))}</p>',
            _facts([("status", run.get("status")), ("preset", run.get("preset")), ("started", _when(started)),
                    ("wall time", took), ("measurements", f"{ok} ok" + (f", {failed} failed" if failed else "")),
                    ("server", version), ("machine", machine), ("sessions", len(sessions))]),
            '<nav class="toc">' + "".join(f'<a href="#{prefix}study-{escape(s.name)}">{escape(s.name)}</a>'
                                          for s in sections)
            + f'<a href="#{prefix}failed">failed measurements</a><a href="#{prefix}environment">environment</a>'
              f'<a href="#{prefix}options">options</a></nav></header>']
    for s in sections:
        body.append(f'<section id="{prefix}study-{escape(s.name)}"><h2>{escape(s.name)}: {escape(s.title)}</h2>')
        body.extend(figure_html(p) for p in s.plots)
        body.extend(table_html(t) for t in s.tables)
        body.append("</section>")
    body.append(f'<section id="{prefix}failed"><h2>Failed measurements</h2>{failures_html(measurements)}</section>')
    body.append(f'<section id="{prefix}environment"><h2>Environment</h2>{environment_html(run, probes)}</section>')
    body.append(f'<section id="{prefix}options"><h2>Options</h2>{options_html(run)}</section>')
    return "".join(body)


def compare_page(run_a: dict, run_b: dict, tables: Sequence[Table], plots: Sequence[Plot],
                 differences: Sequence[str]) -> str:
    """Two runs side by side: the comparison, its warnings, and both environments."""
    body = [f'<header class="page"><h1>pgpathbench compare <span class="id">{escape(run_a["run_id"])}</span> → '
            f'<span class="id">{escape(run_b["run_id"])}</span></h1>'
            '<p class="subtitle">A = the first run, B = the second; ratio = B / A.</p></header>']
    if differences:
        body.append('<div class="warn"><strong>The runs\' environments differ</strong> (compared anyway, --force):'
                    "<ul>" + "".join(f"<li>{escape(d)}</li>" for d in differences) + "</ul></div>")
    body.extend(figure_html(p) for p in plots)
    body.extend(table_html(t) for t in tables)
    for label, run in (("A", run_a), ("B", run_b)):
        body.append(f'<h2>Environment of {label}: {escape(run["run_id"])}</h2>{environment_html(run)}'
                    f'<h4>Options</h4>{options_html(run)}')
    return page(f"pgpathbench compare {run_a['run_id']} {run_b['run_id']}", "".join(body))
