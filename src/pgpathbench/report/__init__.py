"""Report tables and plots: what a study says about a run, independent of how it is rendered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[object]]               # cells: str, int, float or None ("—")
    notes: list[str] = field(default_factory=list)
    align_left: int = 1                     # how many leading columns are labels
    detail: tuple[int, ...] = ()            # columns the terminal shows only with --wide (markdown, html: always)

    def narrow(self) -> "Table":
        """The table without its detail columns (what a 120-column terminal shows)."""
        if not self.detail:
            return self
        keep = [i for i in range(len(self.columns)) if i not in self.detail]
        return Table(self.title, [self.columns[i] for i in keep], [[row[i] for i in keep] for row in self.rows],
                     self.notes, sum(1 for i in keep if i < self.align_left))


class Point(NamedTuple):
    """One value of a plot: x is a category label (bar plots, or categorical scatter) or a number
    (line and scatter plots); y_low..y_high is its error bar (e.g. the 95% CI of the median)."""
    x: str | float
    y: float
    y_low: float | None = None
    y_high: float | None = None


PLOT_KINDS = ("bar", "line", "scatter", "stacked")


@dataclass
class Plot:
    """A chart, independent of how it is drawn (report/html.py draws it as inline SVG).

    kind 'bar': grouped bars; x values are categories, in the order they first appear, one bar
    per series in each category. 'line': numeric x, each series' points joined in x order.
    'scatter': points only; numeric x, or categories when the x values are strings. 'stacked':
    one bar per category, each series a segment on top of the previous ones (no error bars).
    Labels carry their units ("Measured round trip, ms"). log_y/log_x ask for a logarithmic
    axis (ignored when a value is not positive). ref_y draws a horizontal reference line (e.g.
    a ratio's 1). notes are printed under the chart (what the error bars are, how many rounds).
    """
    title: str
    x_label: str
    y_label: str
    kind: str = "bar"
    series: dict[str, list[Point]] = field(default_factory=dict)
    log_y: bool = False
    log_x: bool = False
    notes: list[str] = field(default_factory=list)
    ref_y: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in PLOT_KINDS:
            raise ValueError(f"plot kind '{self.kind}': choose from {', '.join(PLOT_KINDS)}")
        self.series = {name: [p if isinstance(p, Point) else Point(*p) for p in points]
                       for name, points in self.series.items()}
