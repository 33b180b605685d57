"""Two stored runs side by side: which environment facts differ, and per shared case the
ratio B/A of the study's primary metric with a 95% interval.

Runs are independent: round r of one has nothing to do with round r of the other, so the
ratio is not paired by round but estimated from all value pairs (stats.ratio_of_runs:
Hodges-Lehmann on log values, Moses interval). Comparing runs made in different
environments compares the environments, so compare refuses unless told (--force): server
versions (major.minor) and non-default settings, the client's version, study parameters,
link definitions, and the machine (CPU model, cores, memory). Knobs (dimensions or parameters
a study declares `knob=True`: a setting deciding a path's cost) are no environment: runs that
differ only in knobs are compared, the knob named in a note. Cases pair by id; each case left
without one is paired with the one case of the other run left without one that differs from it
in knob dimensions only; cases still alone are named (Pairing.only_a, .only_b).

`slower` is the CI gate of `compare --fail-if-slower PCT`: the cases whose primary metric got
worse by more than PCT percent at 95% confidence; `not_judged` the paired cases it cannot judge.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import UserError
from ..matrix import knob_dimensions
from ..metrics import Metric
from ..results.fingerprint import CHECKED, Environment
from ..results.model import CaseResult, RunResult
from ..stats import CONFIDENCE, Shift, ratio_of_runs
from . import Plot, Point, Table

DEFAULT = "(default)"


def _environment(run: RunResult | Mapping) -> tuple[Environment, Mapping]:
    if isinstance(run, RunResult):
        return run.environment, run.options
    return Environment.from_json(run.get("environment") or {}), run.get("options") or {}


def environment_facts(run: RunResult | Mapping) -> dict[str, dict[str, set[str]]]:
    """The facts fingerprint.CHECKED gives, by group ('machine', 'client', 'server ROLE',
    'link PATH'), then the run's options: 'STUDY parameters', 'servers'. Values are sets: a
    resumed run has one session per start, and they may differ."""
    environment, options = _environment(run)
    facts: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for s in environment.sessions:
        for _, facts_of in CHECKED:
            for group, name, value in facts_of(s):
                facts[group][name].add(value)
    for so in options.get("studies") or []:
        for k, v in (so.get("params") or {}).items():
            if k != "servers":   # below, with the runs that gave none
                facts[f"{so.get('study')} parameters"][f"--{k.replace('_', '-')}"].add(str(v))
        # Which roles were the user's servers, and where: a run against yours is not one against ours.
        given = (so.get("params") or {}).get("servers") or {}
        facts["servers"]["user servers (--server)"].add(
            ", ".join(f"{role}={dsn}" for role, dsn in sorted(given.items())) or "none: all managed")
    return facts


def knob_names(study) -> set[str]:
    """The names of a study's knobs: its dimensions and parameters declared knob=True."""
    if study is None:
        return set()
    return ({n for n, d in study.dimensions.items() if getattr(d, "knob", False)}
            | {n for n, p in study.parameters.items() if getattr(p, "knob", False)})


def _differences(run_a: RunResult | Mapping, run_b: RunResult | Mapping,
                 studies: Mapping[str, object] | None) -> tuple[list[str], list[str]]:
    """(environment differences, knob differences): 'group fact: A vs B' for every checked fact
    that differs; a study parameter that is a knob is a knob difference."""
    fa, fb = environment_facts(run_a), environment_facts(run_b)
    knobs = {f"{name} parameters": {f"--{k.replace('_', '-')}" for k in knob_names(study)}
             for name, study in (studies or {}).items()}
    env, knob = [], []
    for group in [g for g in fa if g in fb]:
        a, b = fa[group], fb[group]
        names = list(a) + [n for n in b if n not in a]
        for name in names:
            if (name not in a or name not in b) and not name.startswith("setting "):
                continue
            va, vb = a.get(name) or {DEFAULT}, b.get(name) or {DEFAULT}
            if va != vb:
                text = (f"{group}: {name.removeprefix('setting ')} {' | '.join(sorted(va))} vs "
                        f"{' | '.join(sorted(vb))}")
                (knob if name in knobs.get(group, ()) else env).append(text)
    return env, knob


def environment_differences(run_a: RunResult | Mapping, run_b: RunResult | Mapping,
                            studies: Mapping[str, object] | None = None) -> list[str]:
    """'group fact: A vs B' for every checked fact that differs. Groups only one run has (a server
    role or path the other run did not use) are not differences: no shared case depends on them.
    A setting one server has and the other has not is compared against '(default)'. With the
    study registry, parameters that are knobs are not environment (knob_differences names them)."""
    return _differences(run_a, run_b, studies)[0]


def knob_differences(run_a: RunResult | Mapping, run_b: RunResult | Mapping,
                     studies: Mapping[str, object]) -> list[str]:
    """The study parameters declared knobs that differ: 'STUDY parameters: --NAME A vs B'."""
    return _differences(run_a, run_b, studies)[1]


@dataclass(frozen=True)
class Pairing:
    """The cases compared: pairs (case of A, case of B), the ids of each run's measured cases left
    without a partner, and per knob dimension the values paired cases differ in (A's, B's)."""
    pairs: tuple[tuple[CaseResult, CaseResult], ...] = ()
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()
    knobs: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)


def pair_label(case_a: CaseResult, case_b: CaseResult) -> str:
    """The case's id, or 'A-id vs B-id' for cases paired across knob dimensions."""
    return case_a.case_id if case_a.case_id == case_b.case_id else f"{case_a.case_id} vs {case_b.case_id}"


def pair_cases(run_a: RunResult, run_b: RunResult, studies: Mapping[str, object]) -> Pairing:
    """The measured cases of the same study with the same id; then each case of A without one with
    the one case of B without one equal to it on every dimension but the study's knob dimensions.
    UserError when such a case has two or more such partners (the pairing is ambiguous)."""
    if run_a.study_name != run_b.study_name:
        return Pairing()
    cases_a, cases_b = run_a.study.measured(), run_b.study.measured()
    by_id = {c.case_id: c for c in cases_b}
    pairs = [(a, by_id[a.case_id]) for a in cases_a if a.case_id in by_id]
    ids_a = {c.case_id for c in cases_a}
    rest_a = [c for c in cases_a if c.case_id not in by_id]
    rest_b = [c for c in cases_b if c.case_id not in ids_a]
    study = studies.get(run_a.study_name)
    knobs = knob_dimensions(study.dimensions, (n for c in cases_a + cases_b for n in c.dims)) if study else []
    if rest_a and rest_b and knobs:
        pairs += _pair_by_knobs(run_a, run_b, rest_a, rest_b, knobs)
    order = {id(c): i for i, c in enumerate(cases_a)}
    pairs.sort(key=lambda p: order[id(p[0])])
    paired = {id(c) for pair in pairs for c in pair}
    differ = {k: (tuple(dict.fromkeys(a.get(k, "?") for a, b in pairs if a.get(k) != b.get(k))),
                  tuple(dict.fromkeys(b.get(k, "?") for a, b in pairs if a.get(k) != b.get(k))))
              for k in knobs if any(a.get(k) != b.get(k) for a, b in pairs)}
    return Pairing(tuple(pairs), tuple(c.case_id for c in cases_a if id(c) not in paired),
                   tuple(c.case_id for c in cases_b if id(c) not in paired), differ)


def _pair_by_knobs(run_a: RunResult, run_b: RunResult, cases_a: list[CaseResult], cases_b: list[CaseResult],
                   knobs: Sequence[str]) -> list[tuple[CaseResult, CaseResult]]:
    def rest(case: CaseResult) -> tuple:
        return tuple(sorted((k, v) for k, v in case.dims.items() if k not in knobs))
    groups_a: dict[tuple, list[CaseResult]] = defaultdict(list)
    groups_b: dict[tuple, list[CaseResult]] = defaultdict(list)
    for c in cases_a:
        groups_a[rest(c)].append(c)
    for c in cases_b:
        groups_b[rest(c)].append(c)
    pairs = []
    for key, group_a in groups_a.items():
        group_b = groups_b.get(key, [])
        if not group_b:
            continue
        if len(group_a) > 1 or len(group_b) > 1:
            one, run, many, other = ((group_a[0], run_a.run_id, group_b, run_b.run_id) if len(group_b) > 1
                                     else (group_b[0], run_b.run_id, group_a, run_a.run_id))
            raise UserError(
                f"compare: case {one.case_id} of {run} pairs with {len(many)} cases of {other} "
                f"({', '.join(c.case_id for c in many)}) differing only in knob(s) {', '.join(knobs)}; "
                "compare runs with one value of each knob that differs, or with the same case ids")
        pairs.append((group_a[0], group_b[0]))
    return pairs


def _primary(studies: Mapping[str, object], name: str) -> Metric | None:
    study = studies.get(name)
    return study.metrics[study.primary_metric] if study else None


def compare(run_a: RunResult, run_b: RunResult, studies: Mapping[str, object],
            differences: Sequence[str] = ()) -> tuple[list[Table], list[Plot]]:
    """Runs of the same study: one table row per paired case, and a chart of the ratios."""
    tables, plots = [], []
    pairing = pair_cases(run_a, run_b, studies)
    if not pairing.pairs:
        return tables, plots
    name = run_a.study_name
    metric = _primary(studies, name)
    if metric is None:
        tables.append(Table(f"{name}: nothing to compare", ["case"], [[pair_label(a, b)] for a, b in pairing.pairs],
                            [f"The study {name} declares no primary metric."]))
        return tables, plots
    rows, points = [], []
    for case_a, case_b in pairing.pairs:
        row, point = _compare_case(case_a, case_b, metric)
        rows.append(row)
        if point:
            points.append(point)
    notes = _notes(run_a, run_b, metric, pairing, differences, knob_differences(run_a, run_b, studies))
    tables.append(Table(f"{name}: {metric.name}, B / A per case",
                        ["Case", "n A", "n B", "Median A", "Median B", "Ratio B/A", "95% CI", "Differs from 1",
                         "B vs A"], rows, notes))
    if points:
        plots.append(Plot(f"{name}: {metric.name} ratio B / A per case", "case",
                          f"Ratio of {metric.name}, B / A", "scatter", {f"{metric.name} B / A": points},
                          log_y=True, ref_y=1.0,
                          notes=["Points: Hodges-Lehmann estimate; error bars: 95% Moses interval. "
                                 "The dashed line is 1 (no difference)."]))
    return tables, plots


def _ratio(case_a: CaseResult, case_b: CaseResult, metric: Metric) -> Shift | str:
    """B/A of the metric with its interval, or why there is none ('no values', 'values <= 0')."""
    a, b = list(case_a.values(metric.name).values()), list(case_b.values(metric.name).values())
    if not a or not b:
        return "no values"
    try:
        return ratio_of_runs(a, b)
    except ValueError:
        return "values <= 0"


def _compare_case(case_a: CaseResult, case_b: CaseResult, metric: Metric) -> tuple[list, Point | None]:
    label = pair_label(case_a, case_b)
    head = [label, len(case_a.values(metric.name)), len(case_b.values(metric.name)),
            case_a.median(metric.name), case_b.median(metric.name)]
    r = _ratio(case_a, case_b, metric)
    if isinstance(r, str):
        return head + [None, "—", r, ""], None
    verdict = r.verdict(1.0)
    direction = ""
    if verdict == "yes":
        better = (r.estimate > 1) == metric.higher_is_better
        direction = f"B {'better' if better else 'worse'} ({(r.estimate - 1) * 100:+.1f}%)"
    ci = f"[{r.ci_low:.3f}, {r.ci_high:.3f}]" + ("" if r.coverage >= CONFIDENCE else f" ({r.coverage:.0%})")
    return head + [r.estimate, ci, verdict, direction], Point(label, r.estimate, r.ci_low, r.ci_high)


def worse_beyond(r: Shift, metric: Metric, pct: float) -> bool:
    """Whether B/A's interval, at 95% or more, lies wholly beyond a PCT percent loss: below
    1 - pct/100 for a higher-is-better metric, above 1 + pct/100 for a lower-is-better one. An
    interval touching the bound, a narrower confidence or a metric without a direction never is."""
    if r.coverage < CONFIDENCE:
        return False
    if metric.better == "higher":
        return r.ci_high < 1 - pct / 100
    if metric.better == "lower":
        return r.ci_low > 1 + pct / 100
    return False


def _judged(run_a: RunResult, run_b: RunResult, studies: Mapping[str, object]):
    """(metric, label, ratio or why there is none) per paired case; nothing without a primary metric."""
    metric = _primary(studies, run_a.study_name)
    if metric is not None:
        for case_a, case_b in pair_cases(run_a, run_b, studies).pairs:
            yield metric, pair_label(case_a, case_b), _ratio(case_a, case_b, metric)


def slower(run_a: RunResult, run_b: RunResult, studies: Mapping[str, object], pct: float) -> list[str]:
    """compare --fail-if-slower PCT: one line per paired case whose primary metric got worse from
    A to B by more than pct percent at 95% confidence ('CASE: tps B/A 0.41 [0.38, 0.45], worse
    than -10% at 95%'); none for cases without values."""
    lines = []
    for metric, label, r in _judged(run_a, run_b, studies):
        if not isinstance(r, str) and worse_beyond(r, metric, pct):
            sign = "-" if metric.higher_is_better else "+"
            lines.append(f"{label}: {metric.name} B/A {r.estimate:.3g} [{r.ci_low:.3g}, {r.ci_high:.3g}], "
                         f"worse than {sign}{pct:g}% at 95%")
    return lines


def not_judged(run_a: RunResult, run_b: RunResult, studies: Mapping[str, object]) -> list[str]:
    """The paired cases the gate cannot judge, one line each with the reason ('CASE: no values',
    'CASE: 2 + 2 rounds give a 67% interval, too few for 95% (4 + 4 give 97%)'): they never fail it."""
    lines = []
    for metric, label, r in _judged(run_a, run_b, studies):
        if isinstance(r, str):
            lines.append(f"{label}: {r}")
        elif r.coverage < CONFIDENCE:
            lines.append(f"{label}: {r.m} + {r.n} rounds give a {r.coverage:.0%} interval, too few for 95% "
                         "(4 + 4 give 97%)")
        elif metric.better == "none":
            lines.append(f"{label}: {metric.name} has no better direction")
    return lines


def _notes(run_a: RunResult, run_b: RunResult, metric: Metric, pairing: Pairing,
           differences: Sequence[str], knobs: Sequence[str]) -> list[str]:
    notes = [f"A = {run_a.run_id}, B = {run_b.run_id}; {metric.name}: "
             f"{'higher' if metric.higher_is_better else 'lower'} is better.",
             f"pgpathbench: A {run_a.environment.tool_versions()}; B {run_b.environment.tool_versions()}.",
             "Ratio B/A: Hodges-Lehmann estimate (median of every b/a over all pairs of rounds; the runs are "
             "independent, so rounds are not paired). 95% CI: Moses order-statistic interval of the shift of "
             "log values (Mann-Whitney critical value), exp'd back. 'Differs from 1' is only claimed at 95%: "
             "3 + 3 rounds reach at most 90%, 4 + 4 rounds 97%."]
    if pairing.knobs:
        notes.append("Cases paired across knob dimension(s), every other dimension equal: " + "; ".join(
            f"{k} {', '.join(va)} (A) vs {', '.join(vb)} (B)" for k, (va, vb) in pairing.knobs.items()))
    if knobs:
        notes.append("Knobs differ (compared: a knob is no environment difference): " + "; ".join(knobs))
    for run, only in (("A", pairing.only_a), ("B", pairing.only_b)):
        if only:
            notes.append(f"Not compared, only in {run} ({len(only)}: no case of the other run with the same id or "
                         f"differing only in knobs): {', '.join(only)}.")
    if differences:
        notes.append("Environments differ (compared with --force): " + "; ".join(differences))
    return notes
