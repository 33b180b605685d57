"""fdw-overhead (seeds 000, 001): pgbench over a local table vs postgres_fdw.

Two managed instances, as in the seeds: `source` holds the pgbench tables (database source)
and a database localfdw whose foreign tables reach source on the same instance (FDW_local);
`external` holds databases external and external_ro whose foreign tables reach the source
instance (FDW_external, FDW_ext_ro with updatable 'false', Snippet 2). Snippet 1 is followed
(IMPORT FOREIGN SCHEMA of the four tables over TCP to 127.0.0.1).

What we know now that the seeds did not say: pgbench always runs with -n, because without it
pgbench TRUNCATEs pgbench_history and postgres_fdw (14+) sends that TRUNCATE to the source; the
source is instead vacuumed directly before every read-write measurement (what -n skips).
All transactions run at REPEATABLE READ, as in the seeds (postgres_fdw uses it remotely), so
several read-write clients meet serialization failures: pgbench retries them (--max-tries) and
failures and retries are kept with each measurement.

Remote links (--latency, --bandwidth): the external instance reaches the source through an
emulated link per requested latency (a database per link: external_5ms, external_ro_5ms);
local and fdw_local never cross one and are measured once, at 0ms. Every link's round trip is
measured before and after each round, and the report reads the overhead against it.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections import defaultdict
from typing import NamedTuple

from psycopg import sql

from ..errors import CaseError
from .. import validate
from ..matrix import Case, Dimension, Parameter, Preset, cross, positive_int
from ..procs import run_client
from ..references import FDW_OVERHEAD_LATENCY_MS, FDW_OVERHEAD_TPS, published_tps_ratio
from ..report import Table
from ..stats import linear_fit, ratio_summary, summarise
from .base import (BANDWIDTH, DIRECT, LATENCY, PG, StudyEnv, StudyOptions, latencies_with_direct, link_text,
                   links_requested, measured_rtt, pg_link_name)

TABLES = ("pgbench_accounts", "pgbench_history", "pgbench_branches", "pgbench_tellers")
REMOTE_TARGETS = ("fdw_external", "fdw_external_ro")   # the targets that cross a link to the source
TARGET_LABEL = {"local": "local", "fdw_local": "FDW_local", "fdw_external": "FDW_external",
                "fdw_external_ro": "FDW_ext_ro"}
ISOLATIONS = {"repeatable-read": "repeatable read", "read-committed": "read committed",
              "serializable": "serializable"}
PGBENCH_GRACE_S = 60   # pgbench -T ends on time; past duration + grace it is hung


def _duration(v: str) -> int:
    return validate.seconds(v, validate.MAX_DURATION_S, whole_for="pgbench")


def _count(what: str, minimum: int):
    def parse(v: str) -> int:
        return validate.whole(v, minimum, None, what)
    return parse


def _isolation(v: str) -> str:
    if v not in ISOLATIONS:
        raise ValueError(f"unknown isolation '{v}'; choose from {','.join(ISOLATIONS)}")
    return v


class FdwOverhead:
    name = "fdw-overhead"
    title = "pgbench through a local table vs postgres_fdw"
    seeds = ("000", "001")
    required_tools = ("initdb", "postgres", "pgbench")
    dimensions = {
        "workload": Dimension("workload", "ro: pgbench -S (select only); rw: the default TPC-B-like script",
                              ("ro", "rw")),
        "target": Dimension("target", "where pgbench connects: the table itself, or foreign tables over it",
                            ("local", "fdw_local", "fdw_external", "fdw_external_ro")),
        "clients": Dimension("clients", "pgbench -c: concurrent client sessions", parse=positive_int("clients")),
        "latency": LATENCY,
        "pg": PG,
    }
    parameters = {
        "scale": Parameter("scale", "pgbench scale factor of the source (100 = 10M accounts)", _count("scale", 1)),
        "duration": Parameter("duration", "seconds per measurement (pgbench -T)", _duration),
        "max_tries": Parameter("max_tries", "pgbench --max-tries for serialization failures", _count("tries", 1), 10),
        "isolation": Parameter("isolation", "default_transaction_isolation on every database",
                               _isolation, "repeatable-read"),
        "bandwidth": BANDWIDTH,
    }
    presets = {
        "quick": Preset("quick", "scale 1, 3 rounds x 2 s (demo, tests)", 3, {"scale": 1, "duration": 2}),
        "standard": Preset("standard", "scale 10, 5 rounds x 10 s", 5, {"scale": 10, "duration": 10}),
        "paper": Preset("paper", "the seeds: scale 100, 10 rounds x 10 s", 10, {"scale": 100, "duration": 10}),
    }
    default_dims = {"workload": ("ro", "rw"), "target": tuple(TARGET_LABEL), "clients": ("1", "5"),
                    "latency": (DIRECT,), "pg": ("15",)}

    # -- the matrix -------------------------------------------------------------------------
    def cases(self, options: StudyOptions) -> list[Case]:
        requested = options.dims["latency"]
        dims = {**options.dims, "latency": latencies_with_direct(requested)}

        def exclude(d: dict[str, str]) -> bool:
            # updatable 'false' foreign tables cannot take pgbench's writes: RO only, as in seed 001.
            if d["workload"] == "rw" and d["target"] == "fdw_external_ro":
                return True
            # Only the external targets cross a link; the others are always measured, directly.
            if d["target"] in REMOTE_TARGETS:
                return d["latency"] not in requested
            return d["latency"] != DIRECT

        return cross(self.name, self.dimensions, dims, exclude)

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> None:
        p = env.options.params
        t0 = time.monotonic()
        # With links requested, the source is a remote role: on its own network stack when possible.
        source = env.servers.cluster("source", remote=links_requested(env.options), bandwidth_kbit=p.get("bandwidth"))
        needs_external = any(t.startswith("fdw_external") for t in env.options.dims["target"])
        external = env.servers.cluster("external") if needs_external else None
        env.log(f"servers up in {time.monotonic() - t0:.1f} s")

        t0 = time.monotonic()
        source.create_database("source")
        res = subprocess.run(
            [str(env.bins.path("pgbench")), "-i", "-q", "-s", str(p["scale"]), "--init-steps=dtGvp",
             "-h", str(source.sockdir), "-p", str(source.port), "-U", "pgpathbench", "source"],
            capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"pgbench -i failed: {res.stderr.strip()}")
        env.log(f"pgbench data at scale {p['scale']} loaded in {time.monotonic() - t0:.1f} s")

        isolation = ISOLATIONS[p["isolation"]]
        source.execute("source", f"ALTER DATABASE source SET default_transaction_isolation = '{isolation}'")
        targets = {("local", DIRECT): (source, "source")}
        # fdw_local's path to the source is the direct loopback one: probed like every link.
        env.servers.link(link_name(DIRECT), source)
        for target in env.options.dims["target"]:
            if target == "fdw_local":
                self._create_foreign_tables(source, "localfdw", source.port, source, isolation, readonly=False)
                targets[(target, DIRECT)] = (source, "localfdw")
            elif target in REMOTE_TARGETS:
                base = {"fdw_external": "external", "fdw_external_ro": "external_ro"}[target]
                for latency in env.options.dims["latency"]:
                    link = env.servers.link(link_name(latency), source, int(latency[:-2]), p.get("bandwidth"))
                    db = base if latency == DIRECT else f"{base}_{latency}"
                    self._create_foreign_tables(external, db, link.port, source, isolation,
                                                readonly=target == "fdw_external_ro", host=link.host)
                    targets[(target, latency)] = (external, db)
        env.state["targets"] = targets
        env.state["source"] = source
        env.fingerprint["pgbench"] = subprocess.run(
            [str(env.bins.path("pgbench")), "--version"], capture_output=True, text=True).stdout.strip()
        env.fingerprint["fdw_overhead"] = {
            "scale": p["scale"], "isolation": isolation, "pgbench_flags": "-n always; --max-tries",
            "foreign_server": "postgres_fdw over TCP (scram-sha-256), direct or through an emulated link"}

    @staticmethod
    def _create_foreign_tables(cluster, db, port: int, source, isolation: str, readonly: bool,
                               host: str = "127.0.0.1") -> None:
        cluster.create_database(db)
        statements = [
            "CREATE EXTENSION IF NOT EXISTS postgres_fdw",
            sql.SQL("CREATE SERVER source_server FOREIGN DATA WRAPPER postgres_fdw "
                    "OPTIONS (host {}, port {}, dbname 'source')").format(sql.Literal(host), sql.Literal(str(port))),
            sql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER source_server "
                    "OPTIONS (user 'pgpathbench', password {})").format(sql.Literal(source.password)),
            sql.SQL("IMPORT FOREIGN SCHEMA public LIMIT TO ({}) FROM SERVER source_server INTO public").format(
                sql.SQL(", ").join(map(sql.Identifier, TABLES))),
            sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = {}").format(
                sql.Identifier(db), sql.Literal(isolation)),
        ]
        if readonly:  # seed 000, Snippet 2
            statements += [sql.SQL("ALTER FOREIGN TABLE {} OPTIONS (updatable 'false')").format(sql.Identifier(t))
                           for t in TABLES]
        with cluster.connect(db) as conn:
            for s in statements:
                conn.execute(s)

    # -- one measurement --------------------------------------------------------------------
    def measure(self, env: StudyEnv, case: Case) -> dict:
        p = env.options.params
        cluster, db = env.state["targets"][(case["target"], case["latency"])]
        if case["workload"] == "rw":
            # What pgbench -n skips, done on the source itself: never through a foreign table.
            env.state["source"].execute("source", "VACUUM pgbench_branches", "VACUUM pgbench_tellers",
                                        "TRUNCATE pgbench_history")
        duration = int(p["duration"])
        args = [str(env.bins.path("pgbench")), "-n", "-c", case["clients"], "-T", str(duration),
                "-P", str(duration + 1),   # a progress interval past the end: no lines, but latency stddev
                f"--max-tries={p['max_tries']}",
                "-h", str(cluster.sockdir), "-p", str(cluster.port), "-U", "pgpathbench", db]
        if case["workload"] == "ro":
            args.insert(2, "-S")
        try:
            res = run_client(args, timeout=duration + PGBENCH_GRACE_S, env={**os.environ, "PGAPPNAME": "pgpathbench"})
        except subprocess.TimeoutExpired:
            raise CaseError(f"pgbench did not finish within {duration + PGBENCH_GRACE_S} s") from None
        if res.returncode != 0:
            lines = [l for l in res.stderr.splitlines() if l.strip()]
            raise CaseError(f"pgbench exit {res.returncode}: {lines[-1] if lines else 'no message'}")
        return parse_pgbench(res.stdout)

    # -- the report -------------------------------------------------------------------------
    def report(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Table]:
        series: dict[tuple, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
        failed: dict[tuple, list[str]] = defaultdict(list)
        for m in measurements:
            if m["study"] != self.name:
                continue
            d = m["dims"]
            key = Key(d["workload"], d["target"], int(d["clients"]), d.get("latency", DIRECT), d.get("pg", "15"))
            if not m["ok"]:
                failed[key].append(m["error"])
                continue
            for metric in ("tps", "latency_ms", "failures", "retries", "initial_connection_ms"):
                if m["metrics"].get(metric) is not None:
                    series[key][metric][m["round"]] = float(m["metrics"][metric])
        rtt = measured_rtt(probes)
        order = {t: i for i, t in enumerate(TARGET_LABEL)}
        keys = sorted(series, key=lambda k: (k.workload, int(k.pg), k.clients, order[k.target], int(k.latency[:-2])))
        tables = [self._aggregate_table("TPS (without initial connection time)", "tps", keys, series, rtt,
                                        FDW_OVERHEAD_TPS),
                  self._aggregate_table("Latency average, ms", "latency_ms", keys, series, rtt,
                                        FDW_OVERHEAD_LATENCY_MS),
                  self._ratio_table(keys, series, rtt)]
        if len({k.latency for k in keys}) > 1:
            tables.append(self._rtt_cost_table(keys, series, probes))
        retry_rows = [[_bench(k), _med(series[k].get("failures")), _med(series[k].get("retries")),
                       _med(series[k].get("initial_connection_ms"))]
                      for k in keys if any(series[k].get(x) and max(series[k][x].values()) > 0
                                           for x in ("failures", "retries"))]
        if retry_rows:
            tables.append(Table("Serialization failures and retries per measurement (median)",
                                ["Bench", "Failed txns", "Retries", "Init. conn. ms"], retry_rows,
                                ["Failed: still failing after --max-tries; retried transactions are counted in TPS."]))
        if failed:
            tables.append(Table("Failed measurements", ["Bench", "n", "Last error"],
                                [[_bench(k), len(v), v[-1]] for k, v in sorted(failed.items())]))
        return tables

    @staticmethod
    def _aggregate_table(title, metric, keys, series, rtt, published) -> Table:
        rows = []
        for k in keys:
            values = series[k].get(metric)
            if not values:
                continue
            s = summarise(list(values.values()))
            ref = published.get(k[:3]) if k.latency == DIRECT else None
            rows.append([_bench(k), k.workload.upper(), TARGET_LABEL[k.target], k.clients, k.pg, _link_text(k, rtt),
                         s.max, s.min, s.mean, s.median, s.ci_text, s.n, ref.mean if ref else None])
        return Table(title, ["Bench", "Type", "Target", "Clients", "PG", "Path to source (measured RTT)", "Max",
                             "Min", "Mean", "Median", "95% CI of median", "n", "Published mean"], rows,
                     ["Published: seed 000's table (PostgreSQL 9.6.2, scale 100, 10 x 10 s, 1 client; "
                      "FDW_ext_ro from seed 001). Compare ratios, not absolute figures, across machines.",
                      "An interval followed by (NN%) covers only NN%: too few rounds for 95%."], align_left=6)

    @staticmethod
    def _ratio_table(keys, series, rtt) -> Table:
        rows = []
        for k in keys:
            workload, target, clients = k.workload, k.target, k.clients
            local = series.get(k._replace(target="local", latency=DIRECT), {}).get("tps")
            if target == "local" or not local or not series[k].get("tps"):
                continue
            r = ratio_summary(local, series[k]["tps"])
            if r is None:
                continue
            rows.append([workload.upper(), clients, TARGET_LABEL[target], k.pg, _link_text(k, rtt), r.median, r.ci_text,
                         r.verdict(1.0), published_tps_ratio(workload, target, clients) if k.latency == DIRECT else None])
        notes = ["Ratio: TPS of local / TPS through the target, paired by round (measured back to back); "
                 "above 1 = the FDW path is slower. Published: from the means of seed 000's table."]
        by = {(row[0], row[1], row[2], row[3], row[4]): row[5] for row in rows}
        for pg, clients in sorted({(k.pg, k.clients) for k in keys}):
            direct = _link_text(Key("", "fdw_external", clients, DIRECT, pg), rtt)
            ro = by.get(("RO", clients, "FDW_external", pg, direct))
            rw = by.get(("RW", clients, "FDW_external", pg, direct))
            if ro and rw:
                notes.append(f"PG {pg}, {clients} client(s), FDW_external: RO overhead {ro:.2f}x "
                             f"{'above' if ro > rw else 'NOT above'} RW overhead {rw:.2f}x "
                             "(seed 000: RO about 6.7x, far above RW).")
        return Table("Overhead: TPS local / TPS target", ["Type", "Clients", "Target", "PG",
                                                         "Path to source (measured RTT)", "Ratio (median)", "95% CI",
                                                         "Differs from 1", "Published ratio"], rows, notes, align_left=5)

    @staticmethod
    def _rtt_cost_table(keys, series, probes) -> Table:
        """Latency per transaction against the round trip measured in the same round."""
        round_rtt = _rtt_by_link_round(probes)
        rows = []
        groups = sorted({(k.workload, k.target, k.clients, k.pg) for k in keys if k.target in REMOTE_TARGETS})
        for workload, target, clients, pg in groups:
            xs, ys = [], []
            for k in keys:
                if (k.workload, k.target, k.clients, k.pg) != (workload, target, clients, pg):
                    continue
                for round_no, latency in series[k].get("latency_ms", {}).items():
                    x = round_rtt.get((pg_link_name(k.pg, link_name(k.latency)), round_no))
                    if x is not None:
                        xs.append(x)
                        ys.append(latency)
            try:
                fit = linear_fit(xs, ys)
            except ValueError:
                continue
            rows.append([workload.upper(), clients, TARGET_LABEL[target], pg, fit.n, fit.slope,
                         f"[{fit.slope_low:.2f}, {fit.slope_high:.2f}]", fit.intercept, fit.r2])
        return Table("Cost of a round trip: latency per transaction against measured RTT",
                     ["Type", "Clients", "Target", "PG", "Points", "ms per ms of RTT", "95% CI",
                      "Latency at 0 RTT, ms", "R²"], rows,
                     ["Slope of pgbench's latency average against the link's round trip measured in the same round: "
                      "about the number of network round trips each transaction makes through postgres_fdw."],
                     align_left=4)

    # -- charts (report --html) and compare -------------------------------------------------
    primary_metric = "tps"       # what `pgpathbench compare` sets two runs side by side on
    higher_is_better = True

    def plots(self, run: dict, measurements: list[dict], probes: list[dict]):
        """TPS and latency by target (grouped bars per workload and clients, with the 95% CI
        of the median as error bars); with several latencies, TPS and latency against the
        link's measured round trip (x = median of the link's probes)."""
        from ..report import Plot
        series = _plot_series(self.name, measurements)
        if not series:
            return []
        rtt = measured_rtt(probes)
        plots = [
            _target_bars(series, "tps", "Throughput by target (TPS, without initial connection time)",
                         "Throughput, transactions/s"),
            _target_bars(series, "latency_ms", "Latency by target (pgbench latency average)",
                         "Latency per transaction, ms"),
        ]
        if len({k.latency for k in series}) > 1:
            plots += [
                _rtt_lines(series, rtt, "tps", "Throughput against measured round-trip time",
                           "Throughput, transactions/s", log_y=True),
                _rtt_lines(series, rtt, "latency_ms", "Latency per transaction against measured round-trip time",
                           "Latency per transaction, ms", log_y=False,
                           extra_note="The slope is about the number of network round trips per transaction "
                                      "(fitted in the table 'Cost of a round trip')."),
            ]
        return [p for p in plots if isinstance(p, Plot) and any(p.series.values())]


class Key(NamedTuple):
    """One case of the report, with clients as a number (for sorting)."""
    workload: str
    target: str
    clients: int
    latency: str = DIRECT
    pg: str = "15"


def link_name(latency: str) -> str:
    """The link from the external instance (or fdw_local) to the source, at one latency."""
    return f"source_{latency}"


def _rtt_by_link_round(probes: list[dict]) -> dict[tuple[str, int], float]:
    """The mean of the before and after probes of each link and round."""
    by: dict[tuple[str, int], list[float]] = defaultdict(list)
    for p in probes:
        by[(p["link"], p["round"])].append(p["rtt_median_ms"])
    return {k: sum(v) / len(v) for k, v in by.items()}


def _link_text(key: Key, rtt: dict[str, float]) -> str:
    return "unix socket" if key.target == "local" else link_text(key.pg, key.latency, rtt)


def _bench(key: Key) -> str:
    return (f"{key.workload.upper()}.{TARGET_LABEL[key.target]}" + (f"_{key.clients}" if key.clients != 1 else "")
            + (f"@{key.latency}" if key.latency != DIRECT else ""))


def _med(values: dict[int, float] | None) -> float | None:
    return summarise(list(values.values())).median if values else None


_PGBENCH_FIGURES = {
    "transactions": r"number of transactions actually processed: (\d+)",
    "failures": r"number of failed transactions: (\d+)",
    "retried": r"number of transactions retried: (\d+)",
    "retries": r"total number of retries: (\d+)",
    "latency_ms": r"latency average = ([\d.]+) ms",
    "latency_stddev_ms": r"latency stddev = ([\d.]+) ms",
    "initial_connection_ms": r"initial connection time = ([\d.]+) ms",
    "tps": r"tps = ([\d.]+) \(without initial connection time\)",
    "clients": r"number of clients: (\d+)",
    "threads": r"number of threads: (\d+)",
    "max_tries": r"maximum number of tries: (\d+)",
    "scale": r"scaling factor: (\d+)",
    "duration_s": r"duration: (\d+) s",
}


def parse_pgbench(stdout: str) -> dict:
    """Every figure pgbench printed (15+ format); CaseError if the essential ones are missing."""
    out: dict[str, float | int] = {}
    for key, pattern in _PGBENCH_FIGURES.items():
        m = re.search(pattern, stdout)
        if m:
            text = m.group(1)
            out[key] = float(text) if "." in text else int(text)
    missing = [k for k in ("tps", "latency_ms", "transactions") if k not in out]
    if missing:
        raise CaseError(f"pgbench printed no {', '.join(missing)}: {stdout.strip()[-200:]!r}")
    out.setdefault("failures", 0)
    out.setdefault("retries", 0)
    out.setdefault("retried", 0)
    return out


# -- charts: helpers of FdwOverhead.plots -------------------------------------------------------
class _PlotKey(NamedTuple):
    workload: str
    target: str
    clients: int
    latency: str
    extra: tuple            # dimensions beyond these four (e.g. ('pg', '16')), in the case's order


_PLOT_DIMS = ("workload", "target", "clients", "latency")


def _plot_series(study: str, measurements: list[dict]) -> dict[_PlotKey, dict[str, list[float]]]:
    out: dict[_PlotKey, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for m in measurements:
        if m["study"] != study or not m["ok"]:
            continue
        d = m["dims"]
        key = _PlotKey(d["workload"], d["target"], int(d["clients"]), d.get("latency", DIRECT),
                       tuple((k, v) for k, v in sorted(d.items()) if k not in _PLOT_DIMS))
        for metric in ("tps", "latency_ms"):
            if m["metrics"].get(metric) is not None:
                out[key][metric].append(float(m["metrics"][metric]))
    # Extra dimensions with one value in the whole run say nothing on a chart: drop them.
    values: dict[str, set[str]] = defaultdict(set)
    for key in out:
        for name, value in key.extra:
            values[name].add(value)
    varying = {name for name, vs in values.items() if len(vs) > 1}
    return {k._replace(extra=tuple((n, v) for n, v in k.extra if n in varying)): v for k, v in out.items()}


def _plot_order(k: _PlotKey) -> tuple:
    order = {t: i for i, t in enumerate(TARGET_LABEL)}
    return (k.workload, k.extra, k.clients, order.get(k.target, 99), int(k.latency[:-2] or 0))


def _extra_text(extra: tuple) -> str:
    return "".join(f" · {'PG ' + v if k == 'pg' else f'{k} {v}'}" for k, v in extra)


def _coverage_note(summaries: list) -> str:
    n_min = min(s.n for s in summaries)
    worst = min(s.coverage for s in summaries)
    text = ("Bars and points: median of the rounds; error bars: 95% confidence interval of the median "
            "(order statistics, no assumption about the distribution)")
    if worst < 0.95:
        text += (f". With {n_min} rounds the widest interval, min to max, covers only {worst:.0%}: "
                 "run more rounds (6 or more) for 95%")
    return text + "."


def _target_bars(series, metric: str, title: str, y_label: str):
    from ..report import Plot, Point
    points: dict[str, list] = {}
    summaries = []
    for k in sorted(series, key=_plot_order):
        values = series[k].get(metric)
        if not values:
            continue
        s = summarise(values)
        summaries.append(s)
        name = TARGET_LABEL.get(k.target, k.target) + (f" over {k.latency} link" if k.latency != DIRECT else "")
        category = f"{k.workload.upper()} · {k.clients} client{'s' if k.clients != 1 else ''}{_extra_text(k.extra)}"
        points.setdefault(name, []).append(Point(category, s.median, s.ci_low, s.ci_high))
    if not summaries:
        return None
    medians = [s.median for s in summaries]
    log_y = min(medians) > 0 and max(medians) / min(medians) > 20
    notes = [_coverage_note(summaries)]
    if log_y:
        notes.append("Logarithmic axis: the values span more than a factor of 20; equal steps are equal ratios.")
    return Plot(title, "pgbench workload (RO: select only, RW: TPC-B-like) · concurrent clients", y_label, "bar",
                points, log_y=log_y, notes=notes)


def _measured_rtt(rtt: dict[str, float], latency: str, extra: tuple) -> float | None:
    """The median probed RTT of the link this case's target crossed."""
    name = link_name(latency)
    if name in rtt:
        return rtt[name]
    pg = dict(extra).get("pg")
    found = [v for link, v in rtt.items() if link.endswith("_" + name) and (pg is None or f"pg{pg}" in link)]
    return found[0] if len(found) == 1 else None


def _rtt_lines(series, rtt: dict[str, float], metric: str, title: str, y_label: str, log_y: bool,
               extra_note: str | None = None):
    from ..report import Plot, Point
    points: dict[str, list] = {}
    summaries = []
    for k in sorted(series, key=_plot_order):
        if k.target not in REMOTE_TARGETS or not series[k].get(metric):
            continue
        x = _measured_rtt(rtt, k.latency, k.extra)
        if x is None:
            continue
        s = summarise(series[k][metric])
        summaries.append(s)
        name = (f"{k.workload.upper()} · {k.clients} client{'s' if k.clients != 1 else ''} · "
                f"{TARGET_LABEL[k.target]}{_extra_text(k.extra)}")
        points.setdefault(name, []).append(Point(x, s.median, s.ci_low, s.ci_high))
    if not summaries:
        return None
    notes = [_coverage_note(summaries),
             "x: the round trip of the link to the source, median of its probes before and after every round."]
    if extra_note:
        notes.append(extra_note)
    return Plot(title, "Measured round-trip time to the source, ms", y_label, "line", points, log_y=log_y,
                notes=notes)
