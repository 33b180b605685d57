"""file-fdw-tpch's tables and plots, read from the result model.

Durations are stored in milliseconds (duration_ms); the tables and charts say seconds, as the
seed's table does. The set-up facts (files, load, plans, answers) come from the run's
fingerprint, per PostgreSQL major.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from ...datasets.tpch.files import MB, parse_rate, scale_text
from ...datasets.tpch.queries import SCAN_QUERIES
from ...references import (FILE_FDW_TPCH_PARSE_MB_S_PER_CORE, FILE_FDW_TPCH_SECONDS, FILE_FDW_TPCH_SOURCE,
                           file_fdw_tpch_slowdown)
from ...report import Plot, Point, Table
from ...results.model import CaseResult, StudyResult
from ...stats import Summary, ratio_summary, summarise
from . import report_engines
from .citus import file_sizes as citus_file_sizes
from .spec import (BASELINE, CITUS, DEFAULT_STORAGES, LAYOUT_SYSTEM, PRIMARY_METRIC, STORAGES, canonical, layout_rank, query_label,
                   query_rank, scan_cores)

Series = dict[tuple[str, str, str, str], dict[int, float]]   # (query, storage, layout, pg) -> round: seconds
SYSTEM_NAMES = {"postgresql": "PostgreSQL", "citusdb": "CitusDB"}
SEED_SETTINGS = ("shared_buffers", "work_mem")   # the two the seed states
PUBLISHED = ("regular", "foreign")               # the seed's storages


def seconds_series(result: StudyResult) -> Series:
    """Every case's query time by round, in seconds (the metric is in milliseconds)."""
    series: Series = {}
    for case in result.cases:
        values = case.values(PRIMARY_METRIC)
        if values:
            series[_key(case)] = {r: ms / 1000 for r, ms in values.items()}
    return series


def _key(case: CaseResult) -> tuple[str, str, str, str]:
    return case["queries"], case["storage"], case["layout"], case["pg"]


class Slowdown(NamedTuple):
    """A query on file_fdw against the same query on the regular tables (the study's baseline)."""
    foreign: dict[int, float]      # round -> seconds
    regular: dict[int, float]
    ratio: Summary                 # foreign / regular, paired by round


def slowdowns(result: StudyResult) -> dict[tuple[str, str, str], Slowdown]:
    """(query, layout, pg) -> its slowdown, for every query measured on both storages in a round."""
    series = seconds_series(result)
    found = BASELINE.ratios(result.cases, PRIMARY_METRIC)
    out = {}
    for case in result.cases:
        if case.case_id in found and case["storage"] == "foreign":
            base, ratio = found[case.case_id]
            q, _, la, pg = _key(case)
            out[(q, la, pg)] = Slowdown(series[_key(case)], series[_key(base)], ratio)
    return out


def setups(result: StudyResult) -> dict[str, dict]:
    """major -> the set-up facts prepare() returned (plans included), the latest session's."""
    out: dict[str, dict] = {}
    for session in result.run.environment.sessions:
        for major, studies in session.setup.items():
            if result.name in studies:
                out[major] = dict(studies[result.name])
    return out


def queries_in(series: Series) -> list[str]:
    return sorted({k[0] for k in series}, key=query_rank)


def majors_in(series: Series) -> list[str]:
    return sorted({k[3] for k in series}, key=int)


def tables(result: StudyResult) -> list[Table]:
    series = seconds_series(result)
    if not series:
        return []
    env, slow = setups(result), slowdowns(result)
    found = [seed_table(series), slowdown_table(series, slow), cpu_table(result), parse_table(series, slow, env),
             plans_table(series, env), report_engines.spread_table(env), report_engines.columnar_table(env, series),
             report_engines.cluster_table(env), answers_table(env), data_table(env)]
    return [t for t in found if t is not None]


def storages_in(series: Series) -> list[str]:
    """The storages measured: regular alone on a user tpch server (file_fdw reads the server's disk)."""
    return [st for st in STORAGES if any(k[1] == st for k in series)]


def seed_table(series: Series) -> Table:
    layouts = sorted({k[2] for k in series}, key=layout_rank)
    storages = storages_in(series)
    pgs = majors_in(series)
    rows = []
    for pg in pgs:
        for q in queries_in(series):
            row = [query_label(q)] + ([pg] if len(pgs) > 1 else [])
            for la in layouts:
                for st in storages:
                    v = series.get((q, st, la, pg))
                    row.append(summarise(list(v.values())).median if v else None)
            row += [FILE_FDW_TPCH_SECONDS.get((q, system, st)) for system in SYSTEM_NAMES for st in PUBLISHED]
            rows.append(row)
    cols = ["Query"] + (["PG"] if len(pgs) > 1 else [])
    cols += [f"{la} {st}" for la in layouts for st in storages]
    cols += ["Published PostgreSQL regular", "Published PostgreSQL foreign", "Published CitusDB regular",
             "Published CitusDB foreign"]
    return Table("TPC-H seconds per query (median of the rounds): regular vs foreign, per layout", cols, rows,
                 [f"Published: {FILE_FDW_TPCH_SOURCE}. Compare slowdowns, not seconds, across machines and "
                  "scales.",
                  "single: one core per query (the seed's PostgreSQL); partitioned: lineitem and orders in N "
                  "partitions with parallel query; postgres_fdw (scaleout in runs stored before it had the name): "
                  "N instances behind postgres_fdw; citus: Citus, lineitem and orders in N shards on its worker "
                  "nodes (the seed's CitusDB: one worker node, 4 blocks); columnar: Citus's columnar access "
                  "method.", "Published seconds: with report --wide (or in markdown, HTML); "
                  + ("the slowdowns they give are in the next table." if len(storages) > 1 else
                     "without a foreign side here, there is no slowdown of ours to set beside theirs.")],
                 align_left=2 if len(pgs) > 1 else 1, detail=tuple(range(len(cols) - 4, len(cols))))


def slowdown_table(series: Series, slow: dict[tuple[str, str, str], Slowdown]) -> Table | None:
    """None when one storage alone was measured: nothing to compare."""
    if len(storages_in(series)) < 2:
        return None
    rows = []
    found: dict[tuple, float] = {}
    for (q, la, pg), (fdw, reg, r) in sorted(slow.items(), key=lambda kv: (int(kv[0][2]), layout_rank(kv[0][1]),
                                                                             query_rank(kv[0][0]))):
        rs, fs = summarise(list(reg.values())), summarise(list(fdw.values()))
        found[(q, la, pg)] = r.median
        rows.append([query_label(q), la, pg, rs.median, rs.ci_text, fs.median, fs.ci_text, r.median, r.ci_text,
                     r.verdict(1.0), file_fdw_tpch_slowdown(q, LAYOUT_SYSTEM[la]), SYSTEM_NAMES[LAYOUT_SYSTEM[la]]])
    notes = ["Slowdown: seconds on file_fdw / seconds on regular tables, paired by round (measured in the same "
             "round); its median and the distribution-free 95% interval ((NN%): too few rounds for 95%).",
             "Seed slowdown: the seed's published foreign/regular means, PostgreSQL beside single, CitusDB beside "
             "the others.",
             *q6_above_q1(found)]
    return Table("Slowdown through file_fdw: foreign / regular", [
        "Query", "Layout", "PG", "Regular s", "95% CI", "Foreign s", "95% CI", "Slowdown", "95% CI",
        "Differs from 1", "Seed slowdown", "Published system"], rows, notes, align_left=3,
        detail=(4, 6, 11, *one_major_detail(series, 2)))


def user_cpu_s(case: CaseResult) -> dict[int, float]:
    """round -> user CPU seconds of every server process of the case (its evidence): PostgreSQL's
    own work, without the kernel's (reading pages into the page cache, evicting others)."""
    out = {}
    for m in case.ok:
        cpus = [s.get("cpu_ms") for s in (m.evidence or {}).get("servers", {}).values()]
        if cpus and all(cpus):
            out[m.round] = sum(c["user"] for c in cpus) / 1000
    return out


UNDER_A_TICK = "regular under a tick"


def cpu_table(result: StudyResult) -> Table | None:
    """The slowdown in the servers' user CPU, foreign / regular paired by round: the seed's
    CPU-bound comparison where the data does not fit in memory here (regular scans then cost the
    kernel as much as PostgreSQL, and their seconds depend on what the page cache kept)."""
    rows = []
    for case in sorted(result.cases, key=lambda c: (int(c["pg"]), layout_rank(c["layout"]),
                                                    query_rank(c["queries"]))):
        if case["storage"] != "foreign":
            continue
        base = BASELINE.twins(result.cases).get(case.case_id)
        mine, theirs = user_cpu_s(case), user_cpu_s(base) if base else {}
        if not (mine and theirs):
            continue
        r = ratio_summary(mine, theirs)   # None: the regular side under a tick in every round
        rs, fs = summarise(list(theirs.values())), summarise(list(mine.values()))
        rows.append([query_label(case["queries"]), case["layout"], case["pg"], rs.median, fs.median,
                     r.median if r else None, r.ci_text if r else UNDER_A_TICK,
                     file_fdw_tpch_slowdown(case["queries"], LAYOUT_SYSTEM[case["layout"]])])
    if not rows:
        return None
    return Table("Slowdown in the servers' user CPU: foreign / regular", [
        "Query", "Layout", "PG", "Regular CPU s", "Foreign CPU s", "Slowdown", "95% CI", "Seed slowdown"], rows,
        ["User CPU of every server process of the case (the evidence's cpu_ms, from /proc), paired by round: "
         "PostgreSQL's own work, scanning tuples or parsing text, without the kernel's. Where the data does not "
         "fit in memory, the seconds of a regular scan depend on what the page cache kept from the cases before "
         "it; the seed kept all of its data in memory, so its seconds were CPU.",
         "The kernel counts CPU in ticks (1/USER_HZ s, 10 ms on Linux): a round whose regular side read 0 has no "
         f"ratio, and a case whose regular side read 0 in every round says '{UNDER_A_TICK}'; at quick scales, "
         "few ticks a round make these ratios coarse."], align_left=3)


def one_major_detail(series: Series, column: int) -> tuple[int, ...]:
    """The PG column says nothing on a terminal when the run has one major: detail then."""
    return (column,) if len(majors_in(series)) == 1 else ()


def q6_above_q1(found: dict[tuple, float]) -> list[str]:
    """The seed's finding, per major and layout: a light scan (Q6) slows down more than Q1."""
    notes = []
    for (pg, la) in sorted({(k[2], k[1]) for k in found}):
        q1, q6 = found.get(("q1", la, pg)), found.get(("q6", la, pg))
        if q1 and q6:
            notes.append(f"PG {pg}, {la}: Q6 slowdown {q6:.2f}x {'above' if q6 > q1 else 'NOT above'} Q1 "
                         f"slowdown {q1:.2f}x (seed: Q6 11.8x, Q1 1.7x: parsing dominates a light query, "
                         "is dwarfed by Q1's aggregates).")
    return notes


def parse_table(series: Series, slow: dict[tuple[str, str, str], Slowdown], env: dict[str, dict]) -> Table | None:
    rows = []
    for (q, st, la, pg), values in sorted(series.items()):
        fp = env.get(pg) or {}
        # on citus, the shards' files it parsed (COPY's text: char(n) padded)
        files = citus_file_sizes(fp.get("citus") or {}) if canonical(la) == CITUS else fp.get("files") or {}
        nbytes = files.get(SCAN_QUERIES.get(q, ""))
        if st != "foreign" or not nbytes:
            continue
        plan = (fp.get("plans") or {}).get(f"{q}:foreign:{la}") or {}
        cores = scan_cores(la, plan.get("workers", 0), fp.get("partitions", 1))
        s = summarise(list(values.values()))
        rate, per_core = parse_rate(nbytes, s.median, cores)
        rows.append([query_label(q), la, pg, nbytes / MB, s.median, cores, rate, per_core,
                     parse_only(values, slow[(q, la, pg)].regular if (q, la, pg) in slow else None, nbytes, cores),
                     FILE_FDW_TPCH_PARSE_MB_S_PER_CORE])
    if not rows:
        return None
    return Table("Parse rate of file_fdw: MB of lineitem's file per second", [
        "Query", "Layout", "PG", "File MB", "Foreign s", "Cores", "MB/s", "MB/s per core",
        "Parse only, MB/s per core", "Published MB/s per core"], rows,
        ["MB/s: the file's bytes over the query's median time on file_fdw (the seed's arithmetic: lineitem "
         "over the time of Q1 or Q6). Cores: processes that parse (1 + the plan's parallel workers; one per "
         "shard on postgres_fdw and citus). Parse only: the bytes over the extra time file_fdw takes "
         "(foreign - regular, paired by round).", "Published: the seed's 7.2 GB lineitem in a little over "
         "200 s on one core."], align_left=3)


def parse_only(foreign: dict[int, float], regular: dict[int, float] | None, nbytes: int, cores: int) -> float | None:
    """MB/s per core over the time file_fdw adds (foreign - regular, paired by round)."""
    if not regular:
        return None
    deltas = [foreign[r] - regular[r] for r in sorted(foreign.keys() & regular.keys()) if foreign[r] > regular[r]]
    return parse_rate(nbytes, summarise(deltas).median, cores)[1] if deltas else None


def plans_table(series: Series, env: dict[str, dict]) -> Table | None:
    rows, differ = [], []
    for pg in majors_in(series):
        plans = (env.get(pg) or {}).get("plans") or {}
        for q in queries_in(series):
            for la in sorted({k.split(":")[2] for k in plans}, key=layout_rank):
                reg, fdw = plans.get(f"{q}:regular:{la}"), plans.get(f"{q}:foreign:{la}")
                if not reg or not fdw:
                    continue
                same = reg["shape"] == fdw["shape"]
                if not same:
                    differ.append(f"{query_label(q)} {la}")
                rows.append([query_label(q), la, pg, reg["shape"], reg["workers"], fdw["shape"], fdw["workers"],
                             "same" if same else "DIFFERS"])
    if not rows:
        return None
    return Table("Plans: join tree of each query on each side", [
        "Query", "Layout", "PG", "Regular plan", "Regular workers", "Foreign plan", "Foreign workers", "Shape"], rows,
        ["Join methods and order over base tables (a table, its partitions, or file_fdw over its file read the "
         "same); sorts, hashes, gathers and aggregates left out; [InitPlan/SubPlan] in brackets; per-partition: "
         "a partitionwise join; remote(...): pushed down by postgres_fdw. Workers: parallel workers planned.",
         ("Plan shape differs between regular and foreign: " + ", ".join(differ) + ".") if differ else
         "Every query has the same plan shape on both storages (file_fdw tables are ANALYZEd too; the seed's "
         "9.1 could not, and chose another plan for Q12).",
         "Plans: with report --wide (or in markdown, HTML). Full EXPLAIN texts: `pgpathbench report RUN --format "
         "json`, run.environment.sessions[].setup.N.file-fdw-tpch.plans."], align_left=3, detail=(3, 5))


def answers_table(env: dict[str, dict]) -> Table | None:
    rows, notes = [], []
    for pg, fp in sorted(env.items()):
        if "answers" not in fp:
            continue
        sides = len(fp.get("storages", DEFAULT_STORAGES)) * len(fp.get("layouts", []))
        for q, a in fp["answers"].items():
            rows.append([query_label(q), pg, a.get("rows"), f"{len(a.get('agreeing', []))} of {sides}",
                         a.get("duckdb"), a.get("digest")])
        duck = fp.get("duckdb") or {}
        notes.append(f"PG {pg}: DuckDB {duck.get('version')} over the same files in {duck.get('seconds')} s"
                     if duck.get("checked") else f"PG {pg}: no DuckDB check ({duck.get('reason')})")
    if not rows:
        return None
    return Table("Answer checks (the warm-up run of every case)", [
        "Query", "PG", "Rows", "Sides agreeing", "DuckDB", "Digest"], rows,
        [("Sides: regular and foreign on every layout" if all(len(fp.get("storages", DEFAULT_STORAGES)) > 1 for fp in
                                                              env.values() if "answers" in fp)
          else "Sides: the storages measured") + ", compared exactly (sorted rows, PostgreSQL's numerics are "
         "exact); DuckDB runs the specification's text (Q2, Q17, Q20, Q21 with their correlated subqueries, "
         "which PostgreSQL runs decorrelated), numbers within 1e-6 relative. Any difference fails the run; every "
         "measurement re-checks its digest.", *notes], align_left=2)


def data_table(env: dict[str, dict]) -> Table | None:
    rows = [row for pg, fp in sorted(env.items()) if "files" in fp
            for row in data_rows(pg, fp) + settings_rows(pg, fp.get("settings") or {})]
    if not rows:
        return None
    return Table("Data, load and settings", ["Set-up", "What", "Figure", "Detail"], rows,
                 ["Load: COPY FROM STDIN of each file (large files in slices at line boundaries, all loaded at "
                  "once on one connection per core); MB/s over the wall time. bench/tpch_load.py compares it "
                  "with one plain COPY of lineitem. Detail: with report --wide (or in markdown, HTML)."],
                 align_left=2, detail=(3,))


def data_rows(pg: str, fp: dict) -> list[list]:
    """The files, their generation, the load and ANALYZE of one major's set-up."""
    gen = fp.get("generate") or {}
    rows = [[pg, "scale factor", scale_text(fp["scale"]), ""],
            [pg, "files", f"{sum(fp['files'].values()) / MB:,.0f} MB",
             ", ".join(f"{t} {b / MB:,.1f}" for t, b in fp["files"].items())],
            [pg, "generation", f"{gen.get('seconds')} s, {gen.get('mb_per_s')} MB/s",
             "cached from an earlier run" if gen.get("cached") else gen.get("command", "")]]
    parts = fp.get("generate_parts")
    if parts:
        rows.append([pg, f"generation of {fp['partitions']} parts", f"{parts.get('seconds')} s, "
                     f"{parts.get('mb_per_s')} MB/s",
                     "cached from an earlier run" if parts.get("cached") else parts.get("command", "")])
    load = fp.get("load") or {}
    rows.append([pg, "load (COPY)", f"{load.get('seconds')} s, {load.get('mb_per_s')} MB/s",
                 f"{load.get('bytes', 0) / MB:,.0f} MB on {load.get('connections')} connections; " + "; ".join(
                     f"{g}: {v['bytes'] / MB:,.0f} MB" for g, v in (load.get("by_layout") or {}).items())])
    an = fp.get("analyze") or {}
    rows.append([pg, "ANALYZE", f"{an.get('seconds')} s", "; ".join(
        f"{g} {v['busy_s']:.1f} s" for g, v in (an.get("by_layout") or {}).items())])
    rows.append([pg, "warm-up and answer checks", f"{fp.get('warmup_and_check_s')} s", ""])
    return rows


def settings_rows(pg: str, s: dict) -> list[list]:
    """Every setting in the detail column; the figure says the one that matters most."""
    cluster = s.get("cluster") or {}
    rows = [[pg, "settings", ", ".join(f"{k}={cluster[k]}" for k in SEED_SETTINGS if k in cluster),
             settings_text(cluster)]]
    if s.get("session"):   # a user server: its own settings (in its fingerprint), ours by SET
        rows = [[pg, "settings (SET; the rest your server's)", ", ".join(
            f"{k}={s['session'][k]}" for k in SEED_SETTINGS if k in s["session"]), settings_text(s["session"])]]
    for la, v in (s.get("layouts") or {}).items():
        rows.append([pg, f"settings {la}", (s.get("search_path") or {}).get(f"{la}/foreign", ""), settings_text(v)])
    if s.get("postgres_fdw"):
        rows.append([pg, "postgres_fdw", s["postgres_fdw"].get("transport", ""), settings_text(s["postgres_fdw"])])
    return rows


def settings_text(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


# -- charts -----------------------------------------------------------------------------------------
def plots(result: StudyResult) -> list[Plot]:
    series = seconds_series(result)
    if not series:
        return []
    seconds: dict[str, list] = defaultdict(list)
    slowdown: dict[str, list] = defaultdict(list)
    multi = len(majors_in(series)) > 1
    slow = slowdowns(result)
    for (q, st, la, pg), values in sorted(series.items(), key=lambda kv: query_rank(kv[0][0])):
        s = summarise(list(values.values()))
        suffix = f" (PG {pg})" if multi else ""
        seconds[f"{la} {st}{suffix}"].append(Point(query_label(q), s.median, s.ci_low, s.ci_high))
        if st == "foreign" and (q, la, pg) in slow:
            r = slow[(q, la, pg)].ratio
            slowdown[la + suffix].append(Point(query_label(q), r.median, r.ci_low, r.ci_high))
    measured = bool(slowdown)   # none with the regular storage alone: no slowdown chart then
    for system, label in (("postgresql", "published PostgreSQL"), ("citusdb", "published CitusDB")):
        pts = [Point(query_label(q), v) for q in queries_in(series) if (v := file_fdw_tpch_slowdown(q, system))]
        if pts:
            slowdown[label] = pts
    charts = [Plot("Seconds per TPC-H query", "Query", "Seconds (median)", "bar", dict(seconds), log_y=True,
                   notes=["Error bars: 95% CI of the median (fewer than 6 rounds cover less)."])]
    if measured:
        charts.append(Plot("Slowdown through file_fdw (foreign / regular)", "Query", "Slowdown, x", "bar",
                           dict(slowdown), ref_y=1.0,
                           notes=["Paired by round; error bars: the interval of the median ratio."]))
    return charts
