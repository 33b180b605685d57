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
from typing import Iterable, Mapping, Sequence

from .report import Plot, Point, Table
from .stats import CONFIDENCE, ratio_of_runs, summarise

# Non-default settings that say where a server listens, not how it behaves (a network
# namespace's address is chosen per run).
VOLATILE_SETTINGS = frozenset({"listen_addresses", "port", "unix_socket_directories", "data_directory",
                               "config_file", "hba_file", "ident_file", "external_pid_file"})


def _link_facts(link: Mapping) -> dict[str, str]:
    """A link's definition in words: kind, added latency and jitter, bandwidth limit."""
    bw = link.get("bandwidth_kbit")
    return {"kind": str(link.get("kind")), "latency": f"{link.get('latency_ms')} ms",
            "jitter": f"{link.get('jitter_ms')} ms", "bandwidth": f"{bw} kbit/s" if bw else "unlimited"}
DEFAULT = "(default)"
# Top-level strings of a session that are not client tools' versions (or do not change results).
NOT_CLIENTS = frozenset({"cpu_model", "host", "user", "os", "kernel", "python", "pgpathbench"})


def major_minor(version: str | None) -> str:
    """'PostgreSQL 15.18 (Debian ...) on x86_64...' or 'pgbench (PostgreSQL) 15.18' -> '15.18'."""
    m = re.search(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else (version or "?")


def environment_facts(run: Mapping) -> dict[str, dict[str, set[str]]]:
    """What of a run's environment matters for its figures, by group: 'machine', 'client',
    'params', 'server ROLE' (version and settings), 'link NAME'. Values are sets: a resumed
    run has one session per start, and they may differ."""
    facts: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for s in (run.get("environment") or {}).get("sessions") or []:
        m = facts["machine"]
        m["CPU"].add(str(s.get("cpu_model")))
        m["cores"].add(str(s.get("cores")))
        mem = s.get("memory_bytes")
        m["memory"].add(f"{mem / 2 ** 30:.1f} GiB" if isinstance(mem, (int, float)) else "?")
        for key, value in s.items():   # client tools' versions (pgbench: major.minor)
            if isinstance(value, str) and key not in NOT_CLIENTS:
                facts["client"][key].add(major_minor(value) if key == "pgbench" else value)
        for role, srv in (s.get("servers") or {}).items():
            g = facts[f"server {role}"]
            g["version"].add(major_minor(srv.get("version")))
            for name, value in (srv.get("settings") or {}).items():
                if name not in VOLATILE_SETTINGS:
                    g[f"setting {name}"].add(str(value))
        for name, link in (s.get("links") or {}).items():
            for attr, value in _link_facts(link).items():
                facts[f"link {name}"][attr].add(value)
    for so in (run.get("options") or {}).get("studies") or []:
        for k, v in (so.get("params") or {}).items():
            facts[f"{so.get('study')} parameters"][f"--{k.replace('_', '-')}"].add(str(v))
    return facts


def environment_differences(run_a: Mapping, run_b: Mapping) -> list[str]:
    """'group fact: A vs B' for every fact that differs. Groups only one run has (a server role
    or link the other run did not use) are not differences: no shared case depends on them.
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


def _values(measurements: Iterable[Mapping], metric: str) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for m in measurements:
        if m.get("ok") and isinstance(m["metrics"].get(metric), (int, float)):
            out[(m["study"], m["case_id"])].append(float(m["metrics"][metric]))
    return out


def _cases(measurements: Iterable[Mapping]) -> dict[tuple[str, str], None]:
    return dict.fromkeys((m["study"], m["case_id"]) for m in measurements)


def compare(run_a: Mapping, ms_a: Sequence[Mapping], run_b: Mapping, ms_b: Sequence[Mapping],
            studies: Mapping[str, object], differences: Sequence[str] = ()) -> tuple[list[Table], list[Plot]]:
    """Per study both runs have: one table row per shared case, and a chart of the ratios."""
    cases_a, cases_b = _cases(ms_a), _cases(ms_b)
    shared = [c for c in cases_a if c in cases_b]
    tables, plots = [], []
    for name in dict.fromkeys(s for s, _ in shared):
        study = studies.get(name)
        metric = getattr(study, "primary_metric", None)
        higher = getattr(study, "higher_is_better", True)
        in_study = [c for c in shared if c[0] == name]
        if not metric:
            tables.append(Table(f"{name}: nothing to compare", ["case"], [[c] for _, c in in_study],
                                [f"The study {name} declares no primary metric."]))
            continue
        va, vb = _values(ms_a, metric), _values(ms_b, metric)
        rows, points = [], []
        for key in in_study:
            a, b = va.get(key, []), vb.get(key, [])
            if not a or not b:
                rows.append([key[1], len(a), len(b), _median(a), _median(b), None, "—", "no values", ""])
                continue
            try:
                r = ratio_of_runs(a, b)
            except ValueError:
                rows.append([key[1], len(a), len(b), _median(a), _median(b), None, "—", "values <= 0", ""])
                continue
            verdict = r.verdict(1.0)
            direction = ""
            if verdict == "yes":
                better = (r.estimate > 1) == bool(higher)
                direction = f"B {'better' if better else 'worse'} ({(r.estimate - 1) * 100:+.1f}%)"
            ci = f"[{r.ci_low:.3f}, {r.ci_high:.3f}]" + ("" if r.coverage >= CONFIDENCE else f" ({r.coverage:.0%})")
            rows.append([key[1], len(a), len(b), _median(a), _median(b), r.estimate, ci, verdict, direction])
            points.append(Point(key[1], r.estimate, r.ci_low, r.ci_high))
        only_a = sum(1 for c in cases_a if c[0] == name and c not in cases_b)
        only_b = sum(1 for c in cases_b if c[0] == name and c not in cases_a)
        notes = [f"A = {run_a['run_id']}, B = {run_b['run_id']}; {metric}: "
                 f"{'higher' if higher else 'lower'} is better.",
                 "Ratio B/A: Hodges-Lehmann estimate (median of every b/a over all pairs of rounds; the runs are "
                 "independent, so rounds are not paired). 95% CI: Moses order-statistic interval of the shift of "
                 "log values (Mann-Whitney critical value), exp'd back. 'Differs from 1' is only claimed at 95%: "
                 "3 + 3 rounds reach at most 90%, 4 + 4 rounds 97%."]
        if only_a or only_b:
            notes.append(f"Not compared: {only_a} case(s) only in A, {only_b} only in B.")
        if differences:
            notes.append("Environments differ (compared with --force): " + "; ".join(differences))
        tables.append(Table(f"{name}: {metric}, B / A per case", ["Case", "n A", "n B", "Median A", "Median B",
                                                                   "Ratio B/A", "95% CI", "Differs from 1",
                                                                   "B vs A"], rows, notes))
        if points:
            plots.append(Plot(f"{name}: {metric} ratio B / A per case", "case", f"Ratio of {metric}, B / A",
                              "scatter", {f"{metric} B / A": points}, log_y=True, ref_y=1.0,
                              notes=["Points: Hodges-Lehmann estimate; error bars: 95% Moses interval. "
                                     "The dashed line is 1 (no difference)."]))
    return tables, plots


def _median(values: Sequence[float]) -> float | None:
    return summarise(values).median if values else None
