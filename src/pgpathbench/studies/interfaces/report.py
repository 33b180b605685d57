"""interfaces' tables and charts, read from the result model: seed 003's analysis, in Python.

The seed's testresults are our measurements (its iter = our round, its duration = the client
command's wall time in seconds); its inner GROUP BY is one group per case (grpsz rounds, average
duration and range); ifmeth_cat_results normalises each candidate's duration and range within a
testcase, (x - min) / (max - min) (0 where a testcase has a single value), loccomm_cat_results
each location within an interface/method testcase; its three summaries average those. Beside
them: connect per query over once, where the time goes, CPU and peak memory, the checksums.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from ...datasets.seed003 import QUERIES
from ...references import (INTERFACES_CANDIDATE_RANKING, INTERFACES_LOCATION_RANKING, INTERFACES_LOCCOMM_DURATION,
                           INTERFACES_SOURCE, INTERFACES_STRATEGY_AVG_DURATION, INTERFACES_TESTCASE_DURATION)
from ...report import Table
from ...results.model import CaseResult, StudyResult
from ...servers.paths import latency_ms
from ...stats import normalise, ratio_summary, summarise
from .spec import (ACCDESC, INTERFACES, METHODS, OUTPUTS, PREFERRED_OUTPUT, QUERY_ORDER, SEED_IFNAME,
                   SEED_NUMITER, STRATEGIES, STREAMING, TRANSPORTS, conndesc, network_path, numiter_text,
                   pool_mode_of, query_rank, split_sqlstrat)

STUDY = "interfaces"
ONE_ROW = "sql001"      # its result holds one row: no method holds more memory than another for it
COVERAGE_NOTE = "An interval followed by (NN%) covers only NN%: too few rounds for 95%."


class Key(NamedTuple):
    """One case, by its dimensions (the query/strategy pair taken apart). fetch: the cursor's rows
    per fetch where the run measured several ('' otherwise: the labels stay the seed's)."""
    pg: str
    interface: str
    method: str
    transport: str
    latency: str
    query: str
    strategy: str
    output: str
    fetch: str = ""
    pool_mode: str = ""          # through a PgBouncer in this mode ('': directly)
    tls: str = "off"      # on: the location's TCP hop has TLS (lcl:tcp+tls, rmt:tcp+tls)

    @classmethod
    def of(cls, case: CaseResult, fetch: str = "") -> "Key":
        query, strategy = split_sqlstrat(case["sqlstrat"])
        return cls(case["pg"], case["interface"], case["method"], case["transport"], case["latency"], query,
                   strategy, case["output"], fetch, pool_mode_of(case) or "", case.dims.get("tls", "off"))

    def testcase_order(self) -> tuple:
        return (int(self.pg), query_rank(self.query), list(STRATEGIES).index(self.strategy),
                TRANSPORTS.index(self.transport), latency_ms(self.latency), self.pool_mode, self.tls,
                OUTPUTS.index(self.output))

    def order(self) -> tuple:
        return (*self.testcase_order(), INTERFACES.index(self.interface), METHODS.index(self.method),
                int(self.fetch or 0))

    @property
    def variant(self) -> str:
        """' fetch N' of a cursor case where the run measured several fetch sizes."""
        return f" fetch {self.fetch}" if self.fetch else ""

    @property
    def location(self) -> str:
        """The seed's conninfos key, '+pgbouncer-MODE' through a pooler (lcl:ipc+pgbouncer-session) and
        +tls where the case's TCP hop has TLS (beyond the seed)."""
        return conndesc(self.transport, self.latency) + (f"+pgbouncer-{self.pool_mode}" if self.pool_mode else "") \
            + ("+tls" if self.tls == "on" else "")

    @property
    def client(self) -> str:
        return f"{SEED_IFNAME[self.interface]}:{self.method}{self.variant}"

    def seed_testcase(self) -> str:
        """The seed's ifmeth testcase of the same shape, at the seed's iteration counts."""
        prnt, dest = self.output.split(":")
        return ":".join((self.query, SEED_NUMITER.get(self.query, "001"), self.location, STRATEGIES[self.strategy],
                         prnt, dest))

    def seed_loccomm(self) -> str:
        prnt, dest = self.output.split(":")
        return ":".join((SEED_IFNAME[self.interface], ACCDESC[self.method], self.query,
                         SEED_NUMITER.get(self.query, "001"), STRATEGIES[self.strategy], prnt, dest))


@dataclass(frozen=True)
class Group:
    """One row of the seed's inner GROUP BY: a candidate in a testcase, over its rounds (a case)."""
    key: Key
    case: CaseResult
    numiter: str
    grpsz: int
    duration: float           # average, seconds
    drange: float             # max - min, seconds

    @property
    def candidate(self) -> str:                     # iface:extra (and the fetch size, when the run varied it)
        return f"{SEED_IFNAME[self.key.interface]}:{ACCDESC[self.key.method]}{self.key.variant}"

    @property
    def ifmeth_testcase(self) -> str:               # sql:numiter:loc:comm:connstrat:prnt:dest
        k = self.key
        return ":".join((k.query, self.numiter, k.location, STRATEGIES[k.strategy], k.output))

    @property
    def loccomm_testcase(self) -> str:              # iface:extra:sql:numiter:connstrat:prnt:dest
        k = self.key
        return ":".join((self.candidate, k.query, self.numiter, STRATEGIES[k.strategy], k.output))

    @property
    def location(self) -> str:                      # loc:comm
        return self.key.location


def fetch_of(case: CaseResult) -> str:
    """A cursor case's rows per fetch; '' for the other methods."""
    return case["fetch"] if case["method"] == "cursor" else ""


def seed_groups(result: StudyResult) -> list[Group]:
    """Every case with successful rounds, as the seed's group (durations in seconds)."""
    varied = len({fetch_of(c) for c in result.cases} - {""}) > 1
    out = []
    for c in result.cases:
        seconds = [v / 1000 for v in c.values("duration_ms").values()]
        if seconds:
            iterations = next(iter(c.values("iterations").values()))
            out.append(Group(Key.of(c, fetch_of(c) if varied else ""), c, numiter_text(int(iterations)),
                             len(seconds), statistics.fmean(seconds), max(seconds) - min(seconds)))
    return out


def normalised(groups: list[Group], partition: str) -> list[tuple[Group, float, float]]:
    """Each group with its nml_dur and nml_drng within its testcase (the seed's window w), rounded
    to 5 places as the seed's views round them; 0 where the testcase has a single value (flat)."""
    parts: dict[tuple, list[Group]] = defaultdict(list)
    for g in groups:
        parts[(g.key.pg, getattr(g, partition))].append(g)
    out = []
    for members in parts.values():
        d = [g.duration for g in members]
        r = [g.drange for g in members]
        for g in members:
            out.append((g, round(normalise(g.duration, min(d), max(d)), 5),
                        round(normalise(g.drange, min(r), max(r)), 5)))
    return out


class Ranked(NamedTuple):
    """One row of the seed's summaries: a candidate (or location) over its testcases."""
    candidate: str
    avg_grpsz: float
    avg_nml_dur: float
    avg_nml_drng: float
    testcases: int
    key: Key                  # one of its cases (its interface and method, or its path)


def ranking(groups: list[Group], partition: str, candidate: str) -> dict[str, list[Ranked]]:
    """Per pg, ordered as the seed's summary (ORDER BY avg_nml_dur, avg_nml_drng, candidate)."""
    by: dict[tuple[str, str], list[tuple[Group, float, float]]] = defaultdict(list)
    for g, nd, nr in normalised(groups, partition):
        by[(g.key.pg, getattr(g, candidate))].append((g, nd, nr))
    out: dict[str, list[Ranked]] = defaultdict(list)
    for (pg, cand), rows in by.items():
        out[pg].append(Ranked(cand, round(statistics.fmean(g.grpsz for g, _, _ in rows), 1),
                              round(statistics.fmean(nd for _, nd, _ in rows), 3),
                              round(statistics.fmean(nr for _, _, nr in rows), 3), len(rows), rows[0][0].key))
    return {pg: sorted(rows, key=lambda r: (r.avg_nml_dur, r.avg_nml_drng, r.candidate)) for pg, rows in out.items()}


def candidate_ranking(groups: list[Group]) -> dict[str, list[Ranked]]:
    """The seed's 'Results - Interface/Method Summarized'."""
    return ranking(groups, "ifmeth_testcase", "candidate")


def location_ranking(groups: list[Group]) -> dict[str, list[Ranked]]:
    """The seed's 'Results - Location/Transport Summarized'."""
    return ranking(groups, "loccomm_testcase", "location")


# -- tables ---------------------------------------------------------------------------------------
def tables(result: StudyResult) -> list[Table]:
    groups = seed_groups(result)
    out: list[Table | None] = []
    if groups:
        pgs = _Pg(len({g.key.pg for g in groups}) > 1)
        cases = sorted(((g.key, g.case) for g in groups), key=lambda kc: kc[0].order())
        out += [_candidate_table(groups, pgs), _location_table(groups, pgs, result.rtt()),
                _strategy_table(groups, pgs), _connect_ratio_table(cases, pgs), _testcase_table(groups, pgs),
                _loccomm_table(groups, pgs), _time_table(cases, pgs), _resources_table(cases, pgs),
                _memory_ratio_table(cases, pgs)]
    out.append(_checksum_table(result))
    return [t for t in out if t is not None]


class _Pg:
    """The PG column, only when the run measured several majors."""

    def __init__(self, multi: bool):
        self.multi = multi

    def row(self, pg: str, cells: list) -> list:
        return [pg, *cells] if self.multi else cells

    def table(self, title: str, columns: list[str], rows: list, notes: list[str], left: int,
              detail: tuple[int, ...] = ()) -> Table:
        return Table(title, ["PG", *columns] if self.multi else columns, rows, notes, left + self.multi,
                     tuple(c + self.multi for c in detail))


def _candidate_table(groups: list[Group], pgs: _Pg) -> Table:
    rows = []
    for pg, ranked in sorted(candidate_ranking(groups).items(), key=lambda kv: int(kv[0])):
        for rank, r in enumerate(ranked, 1):
            pub = INTERFACES_CANDIDATE_RANKING.get(r.candidate)
            pub_rank = list(INTERFACES_CANDIDATE_RANKING).index(r.candidate) + 1 if pub else None
            rows.append(pgs.row(pg, [rank, r.candidate, r.key.method, r.testcases, r.avg_grpsz, r.avg_nml_dur,
                                     r.avg_nml_drng, pub_rank, pub[1] if pub else None, pub[2] if pub else None]))
    return pgs.table("Interface/method: candidates ranked by average normalised duration (seed's "
                 "ifmeth_cat_results summary)",
                 ["Rank", "Candidate", "Method", "Testcases", "avg_grpsz", "avg_nml_dur", "avg_nml_drng",
                          "Published rank", "Published avg_nml_dur", "Published avg_nml_drng"], rows,
                 ["nml_dur: (duration - fastest) / (slowest - fastest) among the candidates of each testcase "
                  "(query, iterations, location, transport, strategy, print, destination); 0 = always the "
                  "fastest. nml_drng: the same for each candidate's range (max - min) over its rounds.",
                  f"Published: {INTERFACES_SOURCE}. acc-n normal, acc-a single-row (libpq) or cursor, "
                  "acc-y COPY."], 3, (4, 9))


def path_text(key: Key, rtt: dict[str, float]) -> str:
    """'unix socket', 'loopback, 0.04 ms', 'direct, 0.04 ms', '5ms link, 5.1 ms'."""
    path = network_path(key.transport, key.latency, key.pg, key.pool_mode or None)
    if path is None:
        return "unix socket"
    text = path.describe(rtt)
    return text.replace("direct", "loopback", 1) if key.transport == "tcp" else text


def _location_table(groups: list[Group], pgs: _Pg, rtt: dict[str, float]) -> Table:
    rows = []
    for pg, ranked in sorted(location_ranking(groups).items(), key=lambda kv: int(kv[0])):
        for rank, r in enumerate(ranked, 1):
            pub = INTERFACES_LOCATION_RANKING.get(r.candidate)
            rows.append(pgs.row(pg, [rank, r.candidate, path_text(r.key, rtt), r.testcases, r.avg_grpsz,
                                     r.avg_nml_dur, r.avg_nml_drng, pub[1] if pub else None, pub[2] if pub else None]))
    return pgs.table("Location/transport ranked by average normalised duration (seed's loccomm_cat_results summary)",
                 ["Rank", "Candidate", "Path (measured RTT)", "Testcases", "avg_grpsz", "avg_nml_dur",
                          "avg_nml_drng", "Published avg_nml_dur", "Published avg_nml_drng"], rows,
                 ["Normalised among the transports of each interface/method testcase. lcl:ipc: unix socket; "
                  "lcl:tcp: loopback TCP; rmt:tcp: the remote server over TCP (the seed's: another machine on "
                  "its LAN; here a second server on its own network stack, rmt+Nms: behind an emulated link); "
                  "+tls: with TLS, the server verified (sslmode=verify-full)."],
                 3, (4, 8))


def _strategy_table(groups: list[Group], pgs: _Pg) -> Table:
    by: dict[tuple[str, str], list[Group]] = defaultdict(list)      # the seed's Query/Connect Strategy summary
    for g in groups:
        by[(g.key.pg, g.ifmeth_testcase)].append(g)
    avg = {k: statistics.fmean(g.duration for g in gs) for k, gs in by.items()}
    rows = [pgs.row(pg, [testcase, len(by[(pg, testcase)]), round(avg[(pg, testcase)], 3),
                         INTERFACES_STRATEGY_AVG_DURATION.get(by[(pg, testcase)][0].key.seed_testcase())])
            for pg, testcase in sorted(by, key=lambda k: (int(k[0]), avg[k]))]
    return pgs.table("Query/connect strategy: average duration per testcase (seed's summary)",
                 ["Testcase", "Candidates", "avg_dur s", "Published avg_dur s"], rows,
                 ["avg_dur: the mean over the candidates of each candidate's average duration (s), ordered by it, "
                  "as the seed's query. Testcase = query:iterations:location:transport:strategy (0 = connect per "
                  "query, 1 = once):print:destination. Published: the seed's testcase of the same shape, at its "
                  "sizes (sql001 x 50k)."], 1)


Cases = list[tuple[Key, CaseResult]]


def _connect_ratio_table(cases: Cases, pgs: _Pg) -> Table | None:
    by_key = dict(cases)
    rows, medians = [], []
    for k, c in cases:
        once = by_key.get(k._replace(strategy="once"))
        r = ratio_summary(c.values("duration_ms"), once.values("duration_ms")) \
            if k.strategy == "each" and once else None
        if r is None:
            continue
        medians.append(r.median)
        rows.append(pgs.row(k.pg, [f"{k.query}:{k.location}:{k.output}", k.client, c.median("duration_ms") / 1000,
                                   once.median("duration_ms") / 1000, r.median, r.ci_text, r.verdict(1.0)]))
    if not rows:
        return None
    return pgs.table("Connect per query vs connect once: duration ratio per candidate",
                 ["Testcase", "Client:method", "Each s", "Once s", "Ratio each/once",
                          "95% CI", "Differs from 1"], rows,
                 [f"Median over the {len(rows)} candidate/testcase pairs: {statistics.median(medians):.1f}x. "
                  "Each s, once s: medians of the durations. Ratios of durations paired by round (measured in the same "
                  "round)."], 2, (6,))


def _testcase_table(groups: list[Group], pgs: _Pg) -> Table:
    rows = []
    for g in sorted(groups, key=lambda g: (g.key.testcase_order(), g.duration)):
        s = summarise([v / 1000 for v in g.case.values("duration_ms").values()])
        rows.append(pgs.row(g.key.pg, [g.ifmeth_testcase, g.candidate, round(g.duration, 5), s.median, s.ci_text,
                                       s.n, INTERFACES_TESTCASE_DURATION.get((g.key.seed_testcase(), g.candidate))]))
    return pgs.table("Per testcase: candidates by average duration (the seed's per-testcase tables)",
                 ["Testcase", "Candidate", "Duration s (avg)", "Median s", "95% CI", "n", "Published s"],
                 rows, ["Duration: the client command's wall time, process start included (JVM, interpreter), as the "
                        "seed's. Published: the seed's testcase of the same shape, at its sizes (sql001 x 50k, t50k "
                        "50k rows, t10m 10M rows): compare orders and ratios, not seconds, unless this run used them.",
                        COVERAGE_NOTE], 2, (5,))


def _loccomm_table(groups: list[Group], pgs: _Pg) -> Table | None:
    """The seed's last slide: each candidate's duration by location/transport (loccomm_cat_results)."""
    rows = [pgs.row(g.key.pg, [g.loccomm_testcase, g.location, round(g.duration, 5),
                               INTERFACES_LOCCOMM_DURATION.get((g.key.seed_loccomm(), g.location))])
            for g in sorted(groups, key=lambda g: (g.key.testcase_order()[:3], INTERFACES.index(g.key.interface),
                                                   METHODS.index(g.key.method), g.duration))
            if g.key.strategy == "once"]
    if not rows:
        return None
    return pgs.table("Per interface/method: duration by location/transport, connect once (seed's loccomm_cat_results)",
                 ["Testcase", "Candidate", "Duration s (avg)", "Published s"], rows,
                 ["Testcase = interface:method:query:iterations:strategy:print:destination. Published: the "
                  "seed's acc-n sql50k rows (its last slide), at its sizes."], 2)


def _preferred_output(cases: Cases) -> str:
    present = {k.output for k, _ in cases}
    return PREFERRED_OUTPUT if PREFERRED_OUTPUT in present else next(o for o in OUTPUTS if o in present)


def _shared_transport(cases: Cases) -> str:
    """lcl:tcp where every interface meets, else the first transport measured."""
    present = {k.transport for k, _ in cases}
    return "tcp" if "tcp" in present else next(t for t in TRANSPORTS if t in present)


def _ms_as_s(c: CaseResult, metric: str) -> float | None:
    m = c.median(metric)
    return m / 1000 if m is not None else None


def _time_table(cases: Cases, pgs: _Pg) -> Table:
    output = _preferred_output(cases)
    rows = [pgs.row(k.pg, [f"{k.query}:{k.strategy}:{k.location}", k.client,
                           *(_ms_as_s(c, m) for m in ("connect_ms", "exec_ms", "fetch_ms", "total_ms", "startup_ms",
                                                      "duration_ms")),
                           c.median("rows_per_s"), c.median("mb_per_s")])
            for k, c in cases if k.output == output]
    return pgs.table(f"Where the time goes: connect, execute, fetch (the client's clock) and process start, "
                 f"medians ({output})",
                 ["Testcase", "Client:method", "Connect s", "Execute s", "Fetch s", "Client total s",
                          "Process start+exit s", "Duration s", "Rows/s", "MB/s"], rows,
                 ["Execute: from sending the query to the first result; where the driver receives the whole "
                  "result first (normal modes), the transfer is in Execute, so compare Execute + Fetch. "
                  "Process start+exit: the command's wall time minus the client's own total (JVM or interpreter "
                  "start). Rows/s and MB/s (10^6 bytes of COPY text) over the client's total."],
                 2, (5, 8, 9))


def _resources_table(cases: Cases, pgs: _Pg) -> Table:
    output, transport = _preferred_output(cases), _shared_transport(cases)
    rows = []
    for k, c in cases:
        if k.output != output or k.transport != transport or k.strategy != "once":
            continue
        mb, cpu_ms = (c.median("bytes") or 0) / 1e6, c.median("cpu_ms")
        rows.append(pgs.row(k.pg, [f"{k.query}:{k.strategy}:{k.location}", k.client, c.median("peak_rss_mib"),
                                   c.summary("peak_rss_mib").ci_text, _ms_as_s(c, "cpu_user_ms"),
                                   _ms_as_s(c, "cpu_sys_ms"), cpu_ms / mb if mb >= 1 and cpu_ms else None]))
    return pgs.table(f"Client CPU and peak memory per method, connect once over {conndesc(transport)} ({output})",
                 ["Testcase", "Client:method", "Peak RSS MiB", "95% CI", "CPU user s", "CPU sys s",
                          "CPU ms per MB"], rows,
                 ["From the kernel's accounting of the client process (os.wait4): peak resident set and CPU "
                  "time, every thread included. Normal methods hold the whole result in the client; streaming "
                  "ones (single-row, cursor, COPY) hold a row or a batch: that is why they exist."],
                 2)


def largest_query(cases: Cases) -> str | None:
    """The seed's query with the largest result among the cases (the user's are of unknown size)."""
    return max((k.query for k, _ in cases if k.query in QUERY_ORDER), key=QUERY_ORDER.index, default=None)


def _memory_ratio_table(cases: Cases, pgs: _Pg) -> Table | None:
    largest = largest_query(cases)
    rows = []
    for k, c in cases:
        if k.query != largest or largest == ONE_ROW or k.method != "normal" or k.strategy != "once":
            continue
        streaming = [(s, sc) for s, sc in cases if s.method in STREAMING and s._replace(method="normal", fetch="") == k]
        for s, sc in sorted(streaming, key=lambda kc: kc[0].order()):
            r = ratio_summary(c.values("peak_rss_mib"), sc.values("peak_rss_mib"))
            if r is not None:
                rows.append(pgs.row(k.pg, [k.location, k.output, SEED_IFNAME[k.interface],
                                           f"normal / {s.method}{s.variant}",
                                           c.median("peak_rss_mib"), sc.median("peak_rss_mib"), r.median, r.ci_text,
                                           r.verdict(1.0)]))
    if not rows:
        return None
    return pgs.table(f"Peak memory of the normal method over the streaming ones, largest result ({largest}, "
                 "connect once)",
                 ["Transport", "Output", "Client", "Ratio of", "Normal MiB", "Streaming MiB", "Ratio (median)",
                          "95% CI", "Differs from 1"], rows,
                 ["Ratio of peak resident sets paired by round."], 4, (1, 8))


def setup_facts(result: StudyResult, pg: str) -> dict:
    """What prepare() recorded for a major, by the last session."""
    return (result.run.environment.last.setup.get(pg) or {}).get(STUDY) or {}


def _checksum_table(result: StudyResult) -> Table | None:
    measured = [(c, m) for c, m in result.measurements]
    if not measured:
        return None
    rows = []
    for pg in sorted({c["pg"] for c, _ in measured}, key=int):
        facts = setup_facts(result, pg)
        reference, texts = facts.get("reference", {}), {**QUERIES, **facts.get("queries", {})}
        for query in sorted({split_sqlstrat(c["sqlstrat"])[0] for c, _ in measured}, key=query_rank):
            ms = [(c, m) for c, m in measured if c["pg"] == pg and split_sqlstrat(c["sqlstrat"])[0] == query]
            if not ms:
                continue
            agree = [c["interface"] for c, m in ms if m.ok]
            mismatch = [m for _, m in ms if not m.ok and (m.error or "").startswith("checksum mismatch")]
            ref = reference.get(query, {})
            rows.append([pg, query, texts.get(query), ref.get("rows"), ref.get("bytes"), ref.get("checksum"),
                         f"{len(agree)}/{len(ms)}", len(mismatch),
                         ", ".join(sorted(set(agree), key=INTERFACES.index))])
    return Table("Every client returns the same data: rows, bytes and checksum against psql's COPY",
                 ["PG", "Query", "SQL", "Rows", "Bytes", "Checksum (1 iteration)", "Agree", "Mismatches",
                  "Clients that agree"], rows,
                 ["Reference: psql -c 'COPY (SQL) TO STDOUT', the contract's checksum of its rows, once per run "
                  "and server; each measurement must return exactly these rows, bytes and checksum (x iterations), "
                  "or it fails with 'checksum mismatch'."], align_left=3, detail=(2, 5))
