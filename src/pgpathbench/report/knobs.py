"""Swept knobs, for every study alike: the primary metric against each knob's values, and which
value is best for each combination of the other dimensions, by how much, with its interval.

A knob is a dimension that is a setting deciding a path's cost (matrix.Dimension.knob: a fetch
size, pgbench's protocol, a server or postgres_fdw setting); one swept with several values in a
run gets a chart (median and 95% CI per value, a series per combination of the other dimensions)
and a table. "Best" compares the best value with the worst, paired by round (both measured in
the same round), so the interval is of the ratio itself.
"""

from __future__ import annotations

from ..matrix import knob_dimensions
from ..results.model import CaseResult, StudyResult
from ..stats import ratio_summary
from . import Plot, Point, Table


def knob_names(result: StudyResult, study) -> list[str]:
    """The knobs a run swept: declared knob dimensions, and open-ended ones (dims the study does
    not declare, e.g. `fdw.fetch_size`), each with more than one value among the cases."""
    names = knob_dimensions(study.dimensions, (n for c in result.cases for n in c.dims))
    return [n for n in names if len({c.dims.get(n) for c in result.cases}) > 1]


def _groups(result: StudyResult, knob: str, study) -> dict[str, list[CaseResult]]:
    """The cases by the values of every other dimension ('ro:fdw_external:1:0ms:15'), in planned order."""
    declared = list(study.dimensions)
    groups: dict[str, list[CaseResult]] = {}
    for c in result.cases:
        if c.ok and knob in c.dims:
            # the stored dims lost their order (jsonb): the study's declared one, then the open-ended knobs
            others = sorted((k for k in c.dims if k != knob),
                            key=lambda k: (declared.index(k) if k in declared else len(declared), k))
            # a dimension at its quiet value (a hop's `direct`) is left out, as case ids leave it out
            label = ":".join(c.dims[k] for k in others
                             if k not in study.dimensions or c.dims[k] != study.dimensions[k].quiet)
            groups.setdefault(label, []).append(c)
    return {g: cs for g, cs in groups.items() if len(cs) > 1}


def _best_row(knob: str, group: str, cases: list[CaseResult], metric) -> list | None:
    medians = {c.dims[knob]: c.median(metric.name) for c in cases}
    medians = {k: v for k, v in medians.items() if v is not None}
    if len(medians) < 2:
        return None
    pick = max if metric.higher_is_better else min
    best, worst = pick(medians, key=medians.get), (min if metric.higher_is_better else max)(medians, key=medians.get)
    by_value = {c.dims[knob]: c for c in cases}
    num, den = (by_value[best], by_value[worst]) if metric.higher_is_better else (by_value[worst], by_value[best])
    r = ratio_summary(num.values(metric.name), den.values(metric.name))
    if r is None:
        return None
    word = "better" if metric.better == "none" else ("higher" if metric.higher_is_better else "faster")
    line = f"{knob} {best}: {r.median:.2f}x {word} than {worst} for {group} {r.ci_text}"
    return [knob, group, best, worst, r.median, r.ci_text, r.verdict(1.0), line]


def tables(result: StudyResult, study) -> list[Table]:
    metric = study.metrics[study.primary_metric]
    out = []
    for knob in knob_names(result, study):
        rows = [row for group, cases in _groups(result, knob, study).items()
                if (row := _best_row(knob, group, cases, metric)) is not None]
        if rows:
            out.append(Table(f"Best {knob} per case ({metric.name})",
                             ["Knob", "Other dimensions", "Best", "Worst", "Ratio best/worst", "95% CI",
                              "Differs from 1"], [r[:-1] for r in rows],
                             [r[-1] for r in rows] + [f"Ratio of {metric.name} ({metric.better} is better) paired "
                                                      "by round: best value's over worst value's."],
                             align_left=4, detail=(3,)))
    return out


def plots(result: StudyResult, study) -> list[Plot]:
    metric = study.metrics[study.primary_metric]
    out = []
    for knob in knob_names(result, study):
        series = {}
        for group, cases in _groups(result, knob, study).items():
            points = []
            for c in cases:
                s = c.summary(metric.name)
                if s is not None:
                    points.append(Point(c.dims[knob], s.median, s.ci_low, s.ci_high))
            series[group] = points
        if series:
            out.append(Plot(f"{metric.name} against {knob}", knob, f"{metric.name}, {metric.unit}", "scatter", series,
                            log_y=True, notes=["Median over rounds; error bars: 95% CI of the median. A series per "
                                               "combination of the other dimensions."]))
    return out
