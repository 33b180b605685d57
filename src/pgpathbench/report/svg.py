"""Plot specs -> inline SVG, for the self-contained HTML page (html.py).

No script, no font, no image is fetched: the chart is drawn here. Charts: grouped bars or points with error bars, "nice"
axis ticks (1, 2, 2.5, 5 x 10^k; decades on log axes), a legend, colours from the Okabe-Ito
palette (distinguishable with the common colour-vision deficiencies) and, for points, a
marker shape per series as well. Every bar and point has a tooltip (<title>) with its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence
from html import escape

from ..stats import format_number
from . import Plot, Point

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
        if kind in ("bar", "stacked"):
            sw = f'<rect x="{_f(x)}" y="{_f(cy - 7)}" width="16" height="14" rx="2" fill="{color}"/>'
        else:
            line = f'<line x1="{_f(x)}" y1="{_f(cy)}" x2="{_f(x + 18)}" y2="{_f(cy)}" stroke="{color}" stroke-width="2"/>' \
                if kind == "line" else ""
            sw = line + _marker(MARKERS[i % len(MARKERS)], x + 9, cy, color)
        parts.append(f'<g class="legend-item">{sw}<text x="{_f(x + 24)}" y="{_f(cy + 4.5)}">{escape(name)}</text></g>')
        x += w
    return f'<g class="legend">{"".join(parts)}</g>', y + row_h - y0


def _line(cls: str, x1: float, x2: float, y1: float, y2: float) -> str:
    return f'<line class="{cls}" x1="{_f(x1)}" x2="{_f(x2)}" y1="{_f(y1)}" y2="{_f(y2)}"/>'


def _color(plot: Plot, name: str) -> str:
    # By position among the drawn (non-empty) series, as the legend and the markers count them.
    return PALETTE[[n for n, pts in plot.series.items() if pts].index(name) % len(PALETTE)]


# -- layout ---------------------------------------------------------------------------------------
@dataclass
class _Bands:
    """A categorical x axis: one band per category, in the order the categories first appear."""
    labels: list[str]
    width: float
    rotate: bool         # the longest label does not fit its band: all are slanted
    ticks_h: float       # height of the labels under the plotting area


@dataclass
class _Layout:
    """Where a chart's parts go: the plotting area (pixels), the whole height, and the axes' scales."""
    left: float
    top: float
    plot_w: float
    plot_h: float
    height: float
    y: _Axis
    log_y: bool          # asked for and possible; said in the y title
    x: _Axis | _Bands

    @property
    def right(self) -> float:
        return self.left + self.plot_w

    @property
    def bottom(self) -> float:
        return self.top + self.plot_h


def _y_axis(plot: Plot, points: Sequence[Point]) -> tuple[_Axis, bool]:
    """The y axis covers values, intervals and the reference line; log only when all of them are positive."""
    ys = [v for p in points for v in (p.y, p.y_low, p.y_high) if v is not None]
    if plot.kind == "stacked":
        ys = list(_stack_totals(points).values())
    if plot.ref_y is not None:
        ys.append(plot.ref_y)
    log_y = bool(plot.log_y and ys and min(ys) > 0)
    # Bars and lines of positive values start at 0 (a bar's length is its value); scatter fits its points.
    from_zero = plot.kind in ("bar", "stacked") or (min(ys, default=0) >= 0 and not log_y and plot.kind != "scatter")
    return _axis(ys, log_y, from_zero=from_zero), log_y


def _bands(points: Sequence[Point], plot_w: float) -> _Bands:
    labels = list(dict.fromkeys(str(p.x) for p in points))
    band = plot_w / max(len(labels), 1)
    longest = max((_text_width(c) for c in labels), default=0)
    rotate = longest > band - 8
    return _Bands(labels, band, rotate, (longest * 0.6 + 24) if rotate else 24)


def _x_axis(plot: Plot, points: Sequence[Point], p0: float, p1: float) -> _Axis:
    xs = [float(p.x) for p in points]
    log_x = bool(plot.log_x and xs and min(xs) > 0)
    return _axis(xs, log_x, from_zero=min(xs, default=0) >= 0 and not log_x, p0=p0, p1=p1, target=8)


def _layout(plot: Plot, points: Sequence[Point], legend_h: float, width: int) -> _Layout:
    """Top to bottom: legend, plotting area, x ticks, x title; the widest y tick label sets the left margin."""
    yaxis, log_y = _y_axis(plot, points)
    left = 30 + max((_text_width(t) for _, t in yaxis.labels()), default=20) + 14
    plot_w = width - left - 24
    top = 8 + legend_h + 12
    plot_h = HEIGHT - 90
    yaxis.p0, yaxis.p1 = top + plot_h, top
    x: _Axis | _Bands
    if plot.kind in ("bar", "stacked") or any(isinstance(p.x, str) for p in points):
        x = _bands(points, plot_w)
        ticks_h = x.ticks_h
    else:
        # inset, so that points at the ends of the x range do not sit on the y axis
        x, ticks_h = _x_axis(plot, points, left + 12, left + plot_w - 12), 24
    return _Layout(left, top, plot_w, plot_h, top + plot_h + ticks_h + 34, yaxis, log_y, x)


# -- chart parts ----------------------------------------------------------------------------------
def _frame(plot: Plot, lay: _Layout) -> list[str]:
    """Horizontal grid with the y tick labels, both axis lines and both axis titles."""
    out = [_line("grid minor", lay.left, lay.right, lay.y(v), lay.y(v)) for v in lay.y.minors]
    for v, t in lay.y.labels():
        y = lay.y(v)
        out.append(_line("grid", lay.left, lay.right, y, y))
        out.append(f'<text class="tick" x="{_f(lay.left - 8)}" y="{_f(y + 4.5)}" text-anchor="end">{escape(t)}</text>')
    out.append(_line("axis", lay.left, lay.left, lay.top, lay.bottom))
    out.append(_line("axis", lay.left, lay.right, lay.bottom, lay.bottom))
    y_title = plot.y_label + (" (log scale)" if lay.log_y else "")
    out.append(f'<text class="axis-label" transform="translate(18,{_f(lay.top + lay.plot_h / 2)}) rotate(-90)" '
               f'text-anchor="middle" font-size="{LABEL_PX}">{escape(y_title)}</text>')
    x_title = plot.x_label + (" (log scale)" if isinstance(lay.x, _Axis) and lay.x.log else "")
    out.append(f'<text class="axis-label" x="{_f(lay.left + lay.plot_w / 2)}" y="{_f(lay.height - 10)}" '
               f'text-anchor="middle" font-size="{LABEL_PX}">{escape(x_title)}</text>')
    return out


def _x_tick(lay: _Layout, x: float, text: str, rotate: bool = False) -> list[str]:
    """A tick mark under the x axis and its label, slanted when labels are too long for their room."""
    if rotate:
        label = (f'<text class="tick" transform="translate({_f(x)},{_f(lay.bottom + 16)}) rotate(-35)" '
                 f'text-anchor="end">{escape(text)}</text>')
    else:
        label = f'<text class="tick" x="{_f(x)}" y="{_f(lay.bottom + 19)}" text-anchor="middle">{escape(text)}</text>'
    return [_line("axis", x, x, lay.bottom, lay.bottom + 5), label]


def _band_ticks(lay: _Layout, bands: _Bands) -> list[str]:
    """A separator between bands, each category's label under the middle of its band."""
    out = []
    for i, label in enumerate(bands.labels):
        if i:
            x = lay.left + bands.width * i
            out.append(_line("band", x, x, lay.top, lay.bottom))
        out += _x_tick(lay, lay.left + bands.width * (i + 0.5), label, bands.rotate)
    return out


def _numeric_ticks(lay: _Layout, xaxis: _Axis) -> list[str]:
    out = []
    for v, t in xaxis.labels():
        x = xaxis(v)
        out.append(_line("grid", x, x, lay.top, lay.bottom))
        out += _x_tick(lay, x, t)
    return out


def _point(series: str, p: Point, x: float, yaxis: _Axis, cap: float, color: str, shape: str) -> list[str]:
    """A marker with its tooltip, drawn over its error bar (if it has one)."""
    out = []
    if p.y_low is not None and p.y_high is not None:
        out.append(_errorbar(x, yaxis(p.y_low), yaxis(p.y_high), cap, color))
    tip = f"<title>{escape(_point_tip(series, p))}</title>"
    out.append(f'<g class="point">{tip}{_marker(shape, x, yaxis(p.y), color)}</g>')
    return out


def _bar(series: str, p: Point, x: float, slot_w: float, color: str, lay: _Layout) -> list[str]:
    """A bar from 0 (the bottom, on a log axis), its error bar, and its value above when that fits the bar's width."""
    y0 = lay.y(0.0) if not lay.y.log else lay.y.p0
    y = lay.y(p.y)
    bw = slot_w * 0.88
    tip = f"<title>{escape(_point_tip(series, p))}</title>"
    out = [f'<rect class="bar" x="{_f(x - bw / 2)}" y="{_f(min(y, y0))}" width="{_f(bw)}" '
           f'height="{_f(max(abs(y0 - y), 0.5))}" fill="{color}">{tip}</rect>']
    if p.y_low is not None and p.y_high is not None:
        # dark, not the bar's colour: it must show over the bar
        out.append(_errorbar(x, lay.y(p.y_low), lay.y(p.y_high), min(slot_w * 0.25, 7), "#1a1a1a"))
    label = format_number(p.y)
    if _text_width(label, 11) <= slot_w + 2:
        top_y = min(lay.y(p.y), lay.y(p.y_high) if p.y_high is not None else lay.bottom)
        out.append(f'<text class="value" x="{_f(x)}" y="{_f(top_y - 5)}" text-anchor="middle" '
                   f'font-size="11">{escape(label)}</text>')
    return out


def _band_marks(plot: Plot, names: Sequence[str], lay: _Layout, bands: _Bands) -> list[str]:
    """Bars or points side by side in each category's band, one slot per series, centred in the band."""
    slots = max(len(names), 1)
    inner = bands.width * (0.82 if plot.kind == "bar" else 0.6)
    slot_w = min(inner / slots, 110 if plot.kind == "bar" else 60)   # no slabs for few bars
    inner = slot_w * slots
    out = []
    for s_i, name in enumerate(names):
        color = _color(plot, name)
        for p in plot.series[name]:
            c_i = bands.labels.index(str(p.x))
            x = lay.left + bands.width * c_i + (bands.width - inner) / 2 + slot_w * (s_i + 0.5)
            if plot.kind == "bar":
                out += _bar(name, p, x, slot_w, color, lay)
            else:
                out += _point(name, p, x, lay.y, min(slot_w * 0.25, 7), color, MARKERS[s_i % len(MARKERS)])
    return out


def _stack_totals(points: Sequence[Point]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for p in points:
        totals[str(p.x)] = totals.get(str(p.x), 0.0) + max(p.y, 0.0)
    return totals


def _stacked_marks(plot: Plot, names: Sequence[str], lay: _Layout, bands: _Bands) -> list[str]:
    """One bar per category: each series' segment on top of the ones before it, in legend order."""
    base: dict[str, float] = {}
    bw = min(bands.width * 0.6, 110)
    out = []
    for name in names:
        color = _color(plot, name)
        for p in plot.series[name]:
            label, y0 = str(p.x), base.get(str(p.x), 0.0)
            base[label] = y1 = y0 + max(p.y, 0.0)
            x = lay.left + bands.width * (bands.labels.index(label) + 0.5)
            tip = f"<title>{escape(_point_tip(name, p))}</title>"
            out.append(f'<rect class="bar" x="{_f(x - bw / 2)}" y="{_f(lay.y(y1))}" width="{_f(bw)}" '
                       f'height="{_f(max(lay.y(y0) - lay.y(y1), 0.0))}" fill="{color}">{tip}</rect>')
    return out


def _series_marks(plot: Plot, names: Sequence[str], lay: _Layout, xaxis: _Axis) -> list[str]:
    """Points at numeric x, and for a line chart each series' points joined in x order."""
    out = []
    for s_i, name in enumerate(names):
        color = _color(plot, name)
        pts = sorted(plot.series[name], key=lambda p: float(p.x))
        if plot.kind == "line" and len(pts) > 1:
            path = " ".join(f"{_f(xaxis(float(p.x)))},{_f(lay.y(p.y))}" for p in pts)
            out.append(f'<polyline class="series-line" points="{path}" fill="none" stroke="{color}" '
                       f'stroke-width="2.2"/>')
        for p in pts:
            out += _point(name, p, xaxis(float(p.x)), lay.y, 5, color, MARKERS[s_i % len(MARKERS)])
    return out


def svg_plot(plot: Plot, width: int = WIDTH) -> str:
    """The chart as an inline <svg> element (no xmlns needed inside HTML)."""
    names = [n for n, pts in plot.series.items() if pts]
    points = [p for n in names for p in plot.series[n]]
    legend_svg, legend_h = _legend(names, plot.kind, width - 90, 70, 8)
    lay = _layout(plot, points, legend_h, width)
    out = [f'<svg class="chart" viewBox="0 0 {width} {_f(lay.height)}" width="{width}" height="{_f(lay.height)}" '
           f'role="img" aria-label="{escape(plot.title)}" font-size="{FONT_PX}">',
           f'<title>{escape(plot.title)}</title>']
    out += _frame(plot, lay)
    if plot.ref_y is not None:
        y = lay.y(plot.ref_y)
        out.append(_line("ref", lay.left, lay.right, y, y))
    if plot.kind == "stacked":
        out += _band_ticks(lay, lay.x) + _stacked_marks(plot, names, lay, lay.x)
    elif isinstance(lay.x, _Bands):
        out += _band_ticks(lay, lay.x) + _band_marks(plot, names, lay, lay.x)
    else:
        out += _numeric_ticks(lay, lay.x) + _series_marks(plot, names, lay, lay.x)
    out += [legend_svg, "</svg>"]
    return "".join(out)
