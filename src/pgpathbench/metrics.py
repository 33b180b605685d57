"""Metrics, each declared once: name, unit, which way is better, and what it means.

As pgbench.c's StatsData comment defines every counter it keeps, each study's catalogue
(`Study.metrics`) defines every figure its measurements carry; reports, export and compare read
units and directions from it, never from a name's suffix. Durations are in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

BETTER = ("higher", "lower", "none")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str          # "ms", "tx/s", "rows", "bytes", "MB/s", "1" (a ratio or a count)...
    better: str        # "higher", "lower", or "none" (a fact, not a figure of merit)
    meaning: str

    def __post_init__(self) -> None:
        if self.better not in BETTER:
            raise ValueError(f"metric {self.name}: better must be one of {', '.join(BETTER)}")
        if self.name.endswith("_s") and not self.name.endswith("_per_s"):
            raise ValueError(f"metric {self.name}: durations are in milliseconds (name it *_ms)")

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


def catalogue(*metrics: Metric) -> dict[str, Metric]:
    """name -> Metric, refusing a name declared twice."""
    out: dict[str, Metric] = {}
    for m in metrics:
        if m.name in out:
            raise ValueError(f"metric {m.name} declared twice")
        out[m.name] = m
    return out


def describe(metrics: Iterable[Metric]) -> list[list[str]]:
    """Rows for a table of a catalogue: name, unit, better, meaning."""
    return [[m.name, m.unit, m.better, m.meaning] for m in metrics]
