"""Report tables -> terminal (rich), markdown."""

from __future__ import annotations

from typing import Iterable

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from ..stats import format_number
from . import Table


def cell(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return format_number(value)
    return str(value)


def count(value: float | None) -> str | None:
    """A count printed as one ("100,006", "0"), though a median over an even number of rounds is
    a float ("0.0000" in cell()): counters, rows. A fractional median (two rounds' 107 and 108) keeps
    its fraction."""
    if value is None:
        return None
    return f"{value:,.0f}" if float(value).is_integer() else format_number(value)


TERMINAL_WIDTH = 120   # what the terminal tables are laid out for
WIDE_WIDTH = 250       # report --wide: every column


def to_terminal(tables: Iterable[Table], console: Console, wide: bool = False) -> None:
    """Tables for a terminal: without their detail columns unless `wide`."""
    for t in tables:
        t = t if wide else t.narrow()
        rt = RichTable(title=t.title, title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
        for i, c in enumerate(t.columns):
            rt.add_column(c, justify="left" if i < t.align_left else "right", no_wrap=i == 0)
        for row in t.rows:
            # Text: a cell is data, never rich markup or an emoji code (':100:' in 'sql001:100:lcl').
            rt.add_row(*(Text(cell(v)) for v in row))
        console.print(rt)
        for note in t.notes:
            console.print(Text(f"  {note}"), highlight=False)
        console.print()


def to_markdown(tables: Iterable[Table]) -> str:
    out = []
    for t in tables:
        out.append(f"### {t.title}\n")
        out.append("| " + " | ".join(t.columns) + " |")
        out.append("|" + "|".join("---" if i < t.align_left else "---:" for i in range(len(t.columns))) + "|")
        for row in t.rows:
            out.append("| " + " | ".join(cell(v).replace("|", "\\|") for v in row) + " |")
        out.extend(["", *(f"{n}  " for n in t.notes), ""])
    return "\n".join(out)
