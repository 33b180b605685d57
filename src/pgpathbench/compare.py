"""Two stored runs side by side: which environment facts differ, and per shared case the
ratio B/A of the study's primary metric with a 95% interval.

Runs are independent: round r of one has nothing to do with round r of the other, so the
ratio is not paired by round but estimated from all value pairs (stats.ratio_of_runs:
Hodges-Lehmann on log values, Moses interval). Comparing runs made in different
environments compares the environments, so compare refuses unless told (--force): server
versions (major.minor) and non-default settings, the client's version, study parameters,
link definitions, and the machine (CPU model, cores, memory).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Mapping, Sequence

from .metrics import Metric
from .report import Plot, Point, Table
from .results.fingerprint import VOLATILE_SETTINGS, Environment
from .results.model import CaseResult, RunResult
from .stats import CONFIDENCE, ratio_of_runs

DEFAULT = "(default)"


def major_minor(version: str | None) -> str:
    """'PostgreSQL 15.18 (Debian ...) on x86_64...' or 'pgbench (PostgreSQL) 15.18' -> '15.18'."""
    m = re.search(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else (version or "?")


def _path_facts(path: Mapping) -> dict[str, str]:
    """A path's definition in words: kind, added latency and jitter, bandwidth limit."""
    bw = path.get("bandwidth_kbit")
    return {"kind": str(path.get("kind")), "latency": f"{path.get('latency_ms')} ms",
            "jitter": f"{path.get('jitter_ms')} ms", "bandwidth": f"{bw} kbit/s" if bw else "unlimited"}


def _environment(run: RunResult | Mapping) -> tuple[Environment, Mapping]:
    if isinstance(run, RunResult):
        return run.environment, run.options
    return Environment.from_json(run.get("environment") or {}), run.get("options") or {}


def environment_facts(run: RunResult | Mapping) -> dict[str, dict[str, set[str]]]:
    """The facts fingerprint.CHECKED lists, by group: 'machine', 'client', 'server ROLE',
    'link PATH', 'STUDY parameters'. Values are sets: a resumed run has one session per start,
    and they may differ."""
    environment, options = _environment(run)
    facts: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for s in environment.sessions:
        m = facts["machine"]
        m["CPU"].add(str(s.machine.get("cpu_model")))
        m["cores"].add(str(s.machine.get("cores")))
        mem = s.machine.get("memory_bytes")
        m["memory"].add(f"{mem / 2 ** 30:.1f} GiB" if isinstance(mem, (int, float)) else "?")
        for key, value in s.tools.items():
            facts["client"][key].add(major_minor(value) if key == "pgbench" else str(value))
        for role, srv in s.servers.items():
            g = facts[f"server {role}"]
            g["version"].add(major_minor(srv.get("version")))
            for name, value in (srv.get("settings") or {}).items():
                if name not in VOLATILE_SETTINGS:
                    g[f"setting {name}"].add(str(value))
        for name, path in s.paths.items():
            for attr, value in _path_facts(path).items():
                facts[f"link {name}"][attr].add(value)
    for so in options.get("studies") or []:
        for k, v in (so.get("params") or {}).items():
            facts[f"{so.get('study')} parameters"][f"--{k.replace('_', '-')}"].add(str(v))
    return facts


def environment_differences(run_a: RunResult | Mapping, run_b: RunResult | Mapping) -> list[str]:
    """'group fact: A vs B' for every checked fact that differs. Groups only one run has (a server
    role or path the other run did not use) are not differences: no shared case depends on them.
    A setting one server has and the other has not is compared against '(default)'."""
    fa, fb = environment_facts(run_a), environment_facts(run_b)
    out = []
    for group in [g for g in fa if g in fb]:
        a, b = fa[group], fb[group]
        names = list(a) + [n for n in b if n not in a]
        for name in names:
            if name not in a or name not in b:
                if not name.startswith("setting "):
                    continue
            va = a.get(name) or {DEFAULT}
            vb = b.get(name) or {DEFAULT}
            if va != vb:
                out.append(f"{group}: {name.removeprefix('setting ')} {' | '.join(sorted(va))} vs "
                           f"{' | '.join(sorted(vb))}")
    return out


def compare(run_a: RunResult, run_b: RunResult, studies: Mapping[str, object],
            differences: Sequence[str] = ()) -> tuple[list[Table], list[Plot]]:
    """Runs of the same study: one table row per shared case, and a chart of the ratios."""
    tables, plots = [], []
    result_a, result_b = run_a.study, run_b.study
    if result_a.name != result_b.name:
        return tables, plots
    shared = [c for c in result_a.measured() if (other := result_b.case(c.case_id)) and other.measurements]
    if not shared:
        return tables, plots
    study = studies.get(result_a.name)
    metric = study.metrics[study.primary_metric] if study else None
    if metric is None:
        tables.append(Table(f"{result_a.name}: nothing to compare", ["case"], [[c.case_id] for c in shared],
                            [f"The study {result_a.name} declares no primary metric."]))
        return tables, plots
    rows, points = [], []
    for case_a in shared:
        row, point = _compare_case(case_a, result_b.case(case_a.case_id), metric)
        rows.append(row)
        if point:
            points.append(point)
    ids_a = {c.case_id for c in result_a.measured()}
    ids_b = {c.case_id for c in result_b.measured()}
    tables.append(Table(f"{result_a.name}: {metric.name}, B / A per case",
                        ["Case", "n A", "n B", "Median A", "Median B", "Ratio B/A", "95% CI", "Differs from 1",
                         "B vs A"], rows, _notes(run_a, run_b, metric, len(ids_a - ids_b), len(ids_b - ids_a),
                                                 differences)))
    if points:
        plots.append(Plot(f"{result_a.name}: {metric.name} ratio B / A per case", "case",
                          f"Ratio of {metric.name}, B / A", "scatter", {f"{metric.name} B / A": points},
                          log_y=True, ref_y=1.0,
                          notes=["Points: Hodges-Lehmann estimate; error bars: 95% Moses interval. "
                                 "The dashed line is 1 (no difference)."]))
    return tables, plots


def _compare_case(case_a: CaseResult, case_b: CaseResult, metric: Metric) -> tuple[list, Point | None]:
    a, b = list(case_a.values(metric.name).values()), list(case_b.values(metric.name).values())
    head = [case_a.case_id, len(a), len(b), case_a.median(metric.name), case_b.median(metric.name)]
    if not a or not b:
        return head + [None, "—", "no values", ""], None
    try:
        r = ratio_of_runs(a, b)
    except ValueError:
        return head + [None, "—", "values <= 0", ""], None
    verdict = r.verdict(1.0)
    direction = ""
    if verdict == "yes":
        better = (r.estimate > 1) == metric.higher_is_better
        direction = f"B {'better' if better else 'worse'} ({(r.estimate - 1) * 100:+.1f}%)"
    ci = f"[{r.ci_low:.3f}, {r.ci_high:.3f}]" + ("" if r.coverage >= CONFIDENCE else f" ({r.coverage:.0%})")
    return head + [r.estimate, ci, verdict, direction], Point(case_a.case_id, r.estimate, r.ci_low, r.ci_high)


def _notes(run_a: RunResult, run_b: RunResult, metric: Metric, only_a: int, only_b: int,
           differences: Sequence[str]) -> list[str]:
    notes = [f"A = {run_a.run_id}, B = {run_b.run_id}; {metric.name}: "
             f"{'higher' if metric.higher_is_better else 'lower'} is better.",
             "Ratio B/A: Hodges-Lehmann estimate (median of every b/a over all pairs of rounds; the runs are "
             "independent, so rounds are not paired). 95% CI: Moses order-statistic interval of the shift of "
             "log values (Mann-Whitney critical value), exp'd back. 'Differs from 1' is only claimed at 95%: "
             "3 + 3 rounds reach at most 90%, 4 + 4 rounds 97%."]
    if only_a or only_b:
        notes.append(f"Not compared: {only_a} case(s) only in A, {only_b} only in B.")
    if differences:
        notes.append("Environments differ (compared with --force): " + "; ".join(differences))
    return notes
