"""interfaces' charts: the seed's ranking, peak memory on the largest result, and the primary
metric against the cursor's rows per fetch (--fetch, a knob) where the run measured several."""

from __future__ import annotations

from collections import defaultdict

from ...references import INTERFACES_CANDIDATE_RANKING
from ...report import Plot, Point
from ...results.model import StudyResult
from .report import ONE_ROW, _shared_transport, candidate_ranking, largest_query, seed_groups
from .spec import SEED_IFNAME, conndesc


def plots(result: StudyResult) -> list[Plot]:
    groups = seed_groups(result)
    if not groups:
        return []
    ranked = candidate_ranking(groups)
    multi = len(ranked) > 1
    series = {f"PG {pg}" if multi else "this run": [Point(r.candidate, r.avg_nml_dur) for r in rows]
              for pg, rows in ranked.items()}
    published = [Point(c, v[1]) for c, v in INTERFACES_CANDIDATE_RANKING.items()
                 if any(p.x == c for pts in series.values() for p in pts)]
    if published:
        series["published (seed 003)"] = published
    out = [Plot("Average normalised duration by candidate (0 = fastest in every testcase)",
                "Candidate (interface:method)", "Average normalised duration", "bar", series)]
    cases = sorted(((g.key, g.case) for g in groups), key=lambda kc: kc[0].order())
    largest = largest_query(cases)
    transport = _shared_transport(cases)
    points: dict[str, list[Point]] = defaultdict(list)
    for k, c in cases:
        if k.query == largest != ONE_ROW and k.strategy == "once" and k.transport == transport:
            s = c.summary("peak_rss_mib")
            points[k.method + k.variant].append(Point(SEED_IFNAME[k.interface] + (f" · PG {k.pg}" if multi else ""),
                                          s.median, s.ci_low, s.ci_high))
    if points:
        out.append(Plot(f"Client peak resident set on the largest result ({largest}, connect once, "
                        f"{conndesc(transport)})", "Client", "Peak RSS, MiB", "bar", dict(points),
                        notes=["Medians with the 95% CI of the median (order statistics)."]))
    return out + fetch_plots(cases)


def fetch_plots(cases) -> list[Plot]:
    """Duration against the cursor's rows per fetch, one line per client and testcase, where the
    run measured several fetch sizes (the knob)."""
    points: dict[str, list[Point]] = defaultdict(list)
    for k, c in cases:
        if k.fetch:
            s = c.summary("duration_ms")
            if s is not None:
                points[f"{SEED_IFNAME[k.interface]} {k.query}:{k.strategy}:{k.location}:{k.output}"
                       + (f" PG {k.pg}" if len({kk.pg for kk, _ in cases}) > 1 else "")].append(
                    Point(int(k.fetch), s.median, s.ci_low, s.ci_high))
    if not points:
        return []
    return [Plot("Duration by the cursor's rows per fetch (--fetch)", "Rows per fetch", "Duration, ms", "line",
                 dict(points), log_x=True,
                 notes=["Medians with the 95% CI of the median; the client command's wall time, as the seed's "
                        "duration."])]
