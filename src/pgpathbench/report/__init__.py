"""Report tables: what a study says about a run, independent of how it is rendered."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[object]]               # cells: str, int, float or None ("—")
    notes: list[str] = field(default_factory=list)
    align_left: int = 1                     # how many leading columns are labels
