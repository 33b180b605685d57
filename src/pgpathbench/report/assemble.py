"""A run's report, assembled from the result model: the run's header, each study's own tables
and plots, then what every study shares: failed measurements (tabled here, once) and outlying
rounds of the primary metric. Renderers (render.py, html.py, export.py) take it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..results.convergence import MIN_ROUNDS, half_width_pct, verdicts
from ..results.fingerprint import cpu_text, memory_text
from ..results.model import RunResult
from ..stats import format_number, outliers
from . import Plot, Table, evidence, knobs


@dataclass
class StudySection:
    """What one study says about a run: its title, tables and plots."""
    name: str
    title: str
    tables: list[Table]
    plots: list[Plot]


def run_table(run: RunResult) -> Table:
    env = run.environment.last
    version = ", ".join(sorted({str(v.get("version", "—")).split(" on ")[0] for v in env.servers.values()})) or "—"
    m = env.machine
    ok, failed = run.counts()
    rows = [["run", run.run_id], ["study", run.study_name], ["preset", run.preset],
            ["status", run.status], ["started", str(run.started_at)[:19]],
            ["measurements", f"{ok} ok" + (f", {failed} failed" if failed else "")],
            ["server", version],
            *[[f"user server {name.removeprefix('user_')}", f"{v.get('dsn')} (at {v.get('address')})"]
              for name, v in sorted(env.servers.items()) if v.get("user_server")],
            ["clients and tools", "; ".join(f"{name}: {v}" for name, v in sorted(env.tools.items())) or "—"],
            ["machine", f"{cpu_text(m)}, {m.get('cores', '?')} cores, {memory_text(m)}, "
                        f"kernel {m.get('kernel', '?')}"],
            ["sessions", str(len(run.environment.sessions))],
            ["pgpathbench", run.environment.tool_versions()]]
    return Table("Run", ["", ""], rows, align_left=2)


def failures_table(run: RunResult) -> Table | None:
    rows = [[c.study, c.case_id, m.round, m.session, when(m.started_at), m.error or "—"]
            for c in run.cases for m in c.failures]
    if not rows:
        return None
    return Table(f"Failed measurements ({len(rows)})", ["study", "case", "round", "session", "started", "error"],
                 rows, align_left=6)


def outliers_table(run: RunResult, studies) -> Table | None:
    """Cases whose primary metric has rounds flagged by median absolute deviation."""
    rows = []
    result = run.study
    study = studies.get(result.name)
    metric = study.primary_metric if study else None
    for c in result.cases if metric else []:
        by_round = c.values(metric)
        flagged = [list(by_round)[i] for i in outliers(list(by_round.values()))]
        if flagged:
            rows.append([result.name, c.case_id, metric, len(flagged), len(by_round),
                         format_number(c.median(metric)),
                         ", ".join(f"round {r}: {format_number(by_round[r])}" for r in flagged)])
    if not rows:
        return None
    return Table("Outlying rounds (primary metric)", ["study", "case", "metric", "outliers", "n", "median", "rounds"],
                 rows, ["Flagged when 0.6745 |x - median| / MAD > 3.5 (Iglewicz-Hoaglin); medians and their "
                        "intervals include them: a median resists a few outliers."], align_left=3)


def settings_table(run: RunResult) -> Table | None:
    """--set's server settings: per major, each one's context and how it was applied (the values of
    each case are in its id and dimensions set.NAME)."""
    rows = [[major, f"set.{name}", f.get("context", "?"), ",".join(f.get("values", [])), f.get("applied", "")]
            for major, per_study in sorted(run.environment.last.setup.items())
            for name, f in sorted(((per_study.get(run.study_name) or {}).get("server_settings") or {}).items())]
    if not rows:
        return None
    return Table("Server settings (--set)", ["pg", "dimension", "context", "values", "applied"], rows,
                 ["Checked by the server before the first measurement; each case's value is in its id."], align_left=2)


def study_section(run: RunResult, studies) -> StudySection:
    """The study's own tables and plots, its swept knobs (knobs.py), then what its measurements'
    evidence shows (evidence.py)."""
    study = studies[run.study_name]
    return StudySection(run.study_name, study.title,
                        study.report(run.study) + knobs.tables(run.study, study) + evidence.tables(run.study)
                        + run_option_tables(run, study),
                        study.plots(run.study) + knobs.plots(run.study, study) + evidence.plots(run.study))


def run_option_tables(run: RunResult, study) -> list[Table]:
    """What the run's options did: its knobs of one value, --set's settings, --until-ci's rounds per case."""
    return [t for t in (run_knobs_table(run, study), settings_table(run), convergence_table(run, study))
            if t is not None]


def run_knobs_table(run: RunResult, study) -> Table | None:
    """The study's knob parameters (a setting deciding a path's cost, one value for the whole run) as
    the run stored them."""
    (options,) = run.options.get("studies", [{}])
    params = options.get("params") or {}
    rows = [[f"--{name.replace('_', '-')}", str(params[name]), p.help] for name, p in study.parameters.items() if p.knob]
    if not rows:
        return None
    return Table("Knobs of the whole run", ["option", "value", "what it decides"], rows,
                 ["The same for every case; compare accepts runs that differ in them and names them."], align_left=3)


def convergence_table(run: RunResult, study) -> Table | None:
    """--until-ci: per case, the interval that decided (its metric, or its ratio to its baseline),
    its width, the rounds it took, and whether it converged."""
    (options,) = run.options.get("studies", [{}])
    pct = (options.get("params") or {}).get("until_ci")
    if pct is None:
        return None
    found = verdicts(run.study, study, pct)
    rows = [[v.case_id, v.rounds, v.decided_by, v.interval.n if v.interval else 0,
             v.interval.median if v.interval else None,
             "—" if (w := half_width_pct(v.interval)) is None else f"{w:.1f}%",
             ("yes" if v.converged else "no") + (f" (held open for {len(v.holds_for)})" if v.holds_for else "")]
            for v in found]
    notes = [f"A case stops once the 95% CI of the median that decides it lies within {pct:g}% of that median, "
             f"after at least {MIN_ROUNDS} values; 'no' means --repeat ran out first."]
    if study.baseline is not None:
        notes.append(f"A case with a baseline ({study.baseline.label}) in the run is decided on the ratio "
                     f"{study.baseline.ratio_text(study.primary_metric)}, paired by round (n: pairs); its baseline "
                     "stays open while a case paired with it is open, and converges on its own metric.")
    return Table(f"Adaptive repetition (--until-ci {pct:g}%): {sum(v.converged for v in found)} of {len(found)} "
                 "cases converged", ["case", "rounds", "decided by", "n", "median", "95% CI half-width",
                                     "converged"], rows, notes, align_left=3)


def tables(run: RunResult, studies) -> list[Table]:
    """Every table of a run's report, in order: header, studies (with their evidence), shared tables."""
    study = studies[run.study_name]
    out = [run_table(run), *study.report(run.study), *knobs.tables(run.study, study), *evidence.tables(run.study),
           *run_option_tables(run, study)]
    return out + [t for t in (outliers_table(run, studies), failures_table(run)) if t is not None]


def when(v: object) -> str:
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)[:19].replace("T", " ") if v else "—"
