"""The result model: run -> study -> case -> rounds, built once from the store (or an export).

Every renderer reads this, never the store's rows: the terminal and markdown tables, csv and
json export, the HTML page and compare. A case holds its dimensions and its measurements by
round; `values(metric)` and `summary(metric)` give what the tables quote (the median with its
95% interval, outliers by median absolute deviation). Failed measurements stay on their case
(`failures`) and are tabled once, by the shared report code. The measured round trip of a path
is computed here, in one place (`rtt`, `rtt_by_round`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Iterable, Mapping

from ..stats import Summary, summarise
from .fingerprint import Environment

MODEL_VERSION = 3   # metrics stored by runs of an earlier version are upgraded on read (upgrade.py)


@dataclass(frozen=True)
class Measurement:
    """One repeat of one case: its metrics, or its error."""
    round: int
    session: int
    started_at: datetime | str | None
    ok: bool
    error: str | None
    duration_s: float | None           # wall time of the measurement itself, as the runner timed it
    metrics: Mapping[str, Any]
    path: str | None = None            # the id of the network path the case crossed (servers/paths.py)
    attempts: int = 1                  # 2 or more: measured again after failing (run --resume)
    previous_errors: tuple = ()        # the errors of the earlier attempts ({session, started_at, error})
    series: tuple = ()                 # per-second points {"t", "tps", "latency_ms"} of the measured program
    evidence: Mapping[str, Any] = field(default_factory=dict)   # what the servers did (evidence/collect.py)

    def number(self, metric: str) -> float | None:
        v = self.metrics.get(metric) if self.ok else None
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass
class CaseResult:
    study: str
    case_id: str
    dims: dict[str, str]
    planned_order: int
    measurements: list[Measurement] = field(default_factory=list)
    # The dimensions as the run stored them (an export writes these): `dims` adds those of
    # today's study the run's version did not have yet (results/upgrade.py).
    stored_dims: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.stored_dims is None:
            self.stored_dims = dict(self.dims)

    def __getitem__(self, dim: str) -> str:
        return self.dims[dim]

    def get(self, dim: str, default: str | None = None) -> str | None:
        return self.dims.get(dim, default)

    @property
    def ok(self) -> list[Measurement]:
        return [m for m in self.measurements if m.ok]

    @property
    def failures(self) -> list[Measurement]:
        return [m for m in self.measurements if not m.ok]

    def values(self, metric: str) -> dict[int, float]:
        """round -> value, for every successful measurement that has the metric as a number."""
        return {m.round: v for m in self.measurements if (v := m.number(metric)) is not None}

    def raw(self, metric: str) -> dict[int, Any]:
        """round -> the metric as stored (lists, dicts, text), successful measurements only."""
        return {m.round: m.metrics[metric] for m in self.ok if metric in m.metrics}

    def summary(self, metric: str) -> Summary | None:
        """Median, 95% interval, spread and MAD outliers of a metric over the rounds, or None."""
        if metric not in self._summaries:
            values = list(self.values(metric).values())
            self._summaries[metric] = summarise(values) if values else None
        return self._summaries[metric]

    def median(self, metric: str) -> float | None:
        s = self.summary(metric)
        return s.median if s else None

    @cached_property
    def _summaries(self) -> dict[str, Summary | None]:
        return {}

    @property
    def metrics(self) -> list[str]:
        """Every numeric metric any round of this case has, in first-seen order."""
        return list(dict.fromkeys(k for m in self.ok for k in m.metrics if m.number(k) is not None))


@dataclass(frozen=True)
class Probe:
    """The measured round trip of one path before or after one round."""
    link: str
    round: int
    phase: str
    session: int
    measured_at: datetime | str | None
    rtt_median_ms: float
    rtt_p95_ms: float | None
    rtt_min_ms: float | None
    round_trips: int


@dataclass
class StudyResult:
    """One study's cases in a run, in planned order, with the run they belong to."""
    name: str
    cases: list[CaseResult]
    run: "RunResult"

    def case(self, case_id: str) -> CaseResult | None:
        return self._by_id.get(case_id)

    @cached_property
    def _by_id(self) -> dict[str, CaseResult]:
        return {c.case_id: c for c in self.cases}

    def where(self, **dims: str) -> list[CaseResult]:
        return [c for c in self.cases if all(c.dims.get(k) == v for k, v in dims.items())]

    def measured(self) -> list[CaseResult]:
        """The cases with at least one measurement (ok or failed)."""
        return [c for c in self.cases if c.measurements]

    @property
    def measurements(self) -> list[tuple[CaseResult, Measurement]]:
        return [(c, m) for c in self.cases for m in c.measurements]

    @property
    def probes(self) -> list[Probe]:
        return self.run.probes

    def rtt(self) -> dict[str, float]:
        return self.run.rtt()

    def rtt_by_round(self) -> dict[tuple[str, int], float]:
        return self.run.rtt_by_round()

    @property
    def options(self) -> Mapping[str, Any]:
        """The study's stored options: preset, repeat, params, dims."""
        return next((o for o in self.run.options.get("studies", []) if o.get("study") == self.name), {})


@dataclass
class RunResult:
    """A run holds one study (the store's `studies` column is an array of one, for its history)."""
    run_id: str
    study_name: str
    preset: str | None
    options: dict
    environment: Environment
    seed: int | None
    started_at: datetime | str | None
    finished_at: datetime | str | None
    status: str
    summary: dict
    probes: list[Probe]
    row: dict                         # the stored run row as read (export writes it unchanged)
    study: StudyResult = field(init=False)   # the run's one study, set by from_rows

    @property
    def cases(self) -> list[CaseResult]:
        return self.study.cases

    def counts(self) -> tuple[int, int]:
        """(successful, failed) measurements of the whole run."""
        ms = [m for c in self.cases for m in c.measurements]
        return sum(1 for m in ms if m.ok), sum(1 for m in ms if not m.ok)

    def rtt(self) -> dict[str, float]:
        """Per path id: the median of its probes' median round trips (what reports quote)."""
        by: dict[str, list[float]] = defaultdict(list)
        for p in self.probes:
            by[p.link].append(p.rtt_median_ms)
        return {link: statistics.median(v) for link, v in by.items()}

    def rtt_by_round(self) -> dict[tuple[str, int], float]:
        """Per (path id, round): the mean of the probes before and after the round."""
        by: dict[tuple[str, int], list[float]] = defaultdict(list)
        for p in self.probes:
            by[(p.link, p.round)].append(p.rtt_median_ms)
        return {k: sum(v) / len(v) for k, v in by.items()}

    # -- building ----------------------------------------------------------------------------
    @classmethod
    def from_rows(cls, run: Mapping, cases: Iterable[Mapping], measurements: Iterable[Mapping],
                  probes: Iterable[Mapping]) -> "RunResult":
        """From the store's rows (or an export's objects): run row, planned cases, measurements
        (with study, case_id, dims), link probes, in today's shape (upgrade.py); `row` keeps the run
        row as stored."""
        from .upgrade import upgrade_run
        stored = upgrade_run(run, cases, measurements, probes)
        row, run = dict(run), stored.run
        result = cls(
            run_id=run["run_id"], study_name=_one_study(run), preset=run.get("preset"),
            options=dict(run.get("options") or {}), environment=Environment.from_json(run.get("environment") or {}),
            seed=run.get("seed"), started_at=run.get("started_at"), finished_at=run.get("finished_at"),
            status=run.get("status", "?"), summary=dict(run.get("summary") or {}),
            probes=[Probe(p["link"], p["round"], p["phase"], p["session"], p.get("measured_at"),
                          float(p["rtt_median_ms"]), p.get("rtt_p95_ms"), p.get("rtt_min_ms"), p["round_trips"])
                    for p in stored.probes],
            row=row)
        cases_by_id: dict[str, CaseResult] = {}
        for i, c in enumerate(stored.cases):
            cases_by_id[c["case_id"]] = CaseResult(c["study"], c["case_id"], dict(c["dims"]), c.get("planned_order", i),
                                                   stored_dims=dict(c["stored_dims"]))
        for m in stored.measurements:
            if m["study"] != result.study_name:
                raise ValueError(f"run {result.run_id} of {result.study_name} holds a measurement of {m['study']}")
            case = cases_by_id.get(m["case_id"])
            if case is None:   # an export carries no planned cases: the measurements name them
                case = cases_by_id[m["case_id"]] = CaseResult(m["study"], m["case_id"], dict(m["dims"]),
                                                              len(cases_by_id), stored_dims=dict(m["stored_dims"]))
            case.measurements.append(Measurement(
                m["round"], m.get("session", 1), m.get("started_at"), bool(m["ok"]), m.get("error"),
                m.get("duration_s"), m["metrics"],
                m.get("path"), m.get("attempts") or 1, tuple(m.get("previous_errors") or ()),
                tuple(m.get("series") or ()), dict(m.get("evidence") or {})))
        ordered = sorted(cases_by_id.values(), key=lambda c: c.planned_order)
        for c in ordered:
            c.measurements.sort(key=lambda m: m.round)
        result.study = StudyResult(result.study_name, ordered, result)
        return result

    @classmethod
    def from_export(cls, doc: Mapping) -> "RunResult":
        """From `pgpathbench export RUN --format json` (any format_version this code reads)."""
        return cls.from_rows(doc["run"], [], doc.get("measurements", []), doc.get("link_probes", []))


def _one_study(run: Mapping) -> str:
    names = list(run.get("studies") or [])
    if len(names) != 1:
        raise ValueError(f"run {run.get('run_id')}: a run holds one study, this one names {names}")
    return names[0]
