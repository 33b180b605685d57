"""remote-sampling (seed 004): sampling a table directly and through postgres_fdw, and ANALYZE
of foreign tables with analyze_sampling (PostgreSQL 16+).

Sampling test, as the seed built it: the tables live in `source`; for every sample (method and
fraction) a view with an optimisation fence (OFFSET 0) does the sampling where the case says,
so that postgres_fdw cannot push random() or TABLESAMPLE anywhere else. `direct` queries the
view on the source; `fdw` queries a foreign table over it from `external`, so only the sampled
rows cross the link (`full` transfers everything and samples on arrival: what postgres_fdw's
ANALYZE did before 16). The count is of whole rows, so every column is read and sent.

ANALYZE test: ANALYZE of the table itself (`local`) vs of a foreign table over it with
analyze_sampling off, auto, random, system and bernoulli, at statistics targets 100, 1000,
10000. What the seed could not show: how good each sample is. After each ANALYZE, the
statistics (n_distinct, null_frac, most common values, histogram) are compared with the truth
computed from the whole table, as error figures. The SQL postgres_fdw sent is recorded from
pg_stat_statements on the source (EXPLAIN cannot show ANALYZE's remote SQL).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict

import psycopg
from psycopg import sql

from .. import validate
from ..errors import CaseError, UserError
from ..matrix import Case, Dimension, Preset, cross
from ..references import SAMPLING_US_PER_ROW
from ..report import Plot, Point, Table
from ..stats import linear_fit, summarise
from .base import (BANDWIDTH, DIRECT, LATENCY, PG, StudyEnv, StudyOptions, latencies_with_direct, link_text,
                   links_requested, measured_rtt)

NA = "-"
SAMPLING_METHODS = ("full", "system", "bernoulli", "random")
ANALYZE_MODES = ("local", "off", "auto", "random", "system", "bernoulli")
ROW_BYTES = 250            # on disk per row of the test table (heap, with pad), for the disk check


def parse_rows(text: str) -> str:
    """'10k' -> '10k', '1000000' -> '1M': a row count, canonically written."""
    m = re.fullmatch(r"([0-9]{1,15})([kKmM]?)", text.strip())
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"'{text}' is not a row count (e.g. 10k, 1M, 10M)")
    n = int(m.group(1)) * {"": 1, "k": 1000, "m": 1_000_000}[m.group(2).lower()]
    validate.at_most(n, validate.MAXIMA["rows"], text, "rows")
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)


def row_count(text: str) -> int:
    return int(text[:-1]) * (1_000_000 if text.endswith("M") else 1000) if text[-1] in "kM" else int(text)


def parse_fraction(text: str) -> str:
    try:
        f = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a fraction (e.g. 0.01)") from None
    if not 0 < f <= 1:
        raise ValueError(f"a sample fraction is in (0, 1], got {text}")
    return f"{f:g}"


def parse_target(text: str) -> str:
    if not validate.digits(text) or not 1 <= int(text) <= 10000:
        raise ValueError(f"a statistics target is a whole number from 1 to 10000, got '{text}'")
    return str(int(text))


FRACTIONS_PAPER = ("0.01", "0.02", "0.05", "0.1", "0.2", "0.3", "0.5", "0.7", "0.9", "1")


class RemoteSampling:
    name = "remote-sampling"
    title = "sampling directly vs through postgres_fdw, and ANALYZE with analyze_sampling"
    seeds = ("004",)
    required_tools = ("initdb", "postgres")
    primary_metric = "duration_ms"
    higher_is_better = False
    dimensions = {
        "test": Dimension("test", "sampling: sample with a query; analyze: ANALYZE", ("sampling", "analyze")),
        "rows": Dimension("rows", "rows in the sampled table (10k, 1M, 10M, 100M)", parse=parse_rows),
        "method": Dimension("method", "sampling test: full (transfer all, sample locally), TABLESAMPLE system, "
                            "bernoulli, or random() < fraction", SAMPLING_METHODS),
        "fraction": Dimension("fraction", "sampling test: fraction of the table sampled", parse=parse_fraction),
        "access": Dimension("access", "sampling test: on the source itself, or through postgres_fdw",
                            ("direct", "fdw")),
        "analyze_sampling": Dimension("analyze_sampling", "analyze test: ANALYZE the table itself (local), or the "
                                      "foreign table with this analyze_sampling", ANALYZE_MODES),
        "stats_target": Dimension("stats_target", "analyze test: default_statistics_target", parse=parse_target),
        "latency": LATENCY,
        "pg": PG,
    }
    parameters = {"bandwidth": BANDWIDTH}
    presets = {
        "quick": Preset("quick", "10k and 100k rows, 4 fractions, targets 100 and 1000, 3 rounds", 3, {},
                        {"rows": ("10k", "100k"), "fraction": ("0.01", "0.1", "0.5", "1"),
                         "stats_target": ("100", "1000")}),
        "standard": Preset("standard", "10k and 1M rows, the seed's fractions, targets 100-10000, 5 rounds", 5, {},
                           {"rows": ("10k", "1M")}),
        "paper": Preset("paper", "the seed: 10k and 10M rows (100M with --rows, disk checked), 5 rounds", 5, {},
                        {"rows": ("10k", "10M")}),
    }
    default_dims = {"test": ("sampling", "analyze"), "rows": ("10k", "1M"), "method": SAMPLING_METHODS,
                    "fraction": FRACTIONS_PAPER, "access": ("direct", "fdw"), "analyze_sampling": ANALYZE_MODES,
                    "stats_target": ("100", "1000", "10000"), "latency": (DIRECT,), "pg": ("17",)}

    # -- the matrix -------------------------------------------------------------------------
    def cases(self, options: StudyOptions) -> list[Case]:
        dims = dict(options.dims)
        requested = dims["latency"]
        if "analyze" in dims["test"]:
            old = [m for m in dims["pg"] if int(m) < 16]
            modes = [m for m in dims["analyze_sampling"] if m not in ("local", "off")]
            if old and modes:
                raise UserError(f"--pg: analyze_sampling ({','.join(modes)}) needs PostgreSQL 16+, asked for "
                                f"{','.join(old)}; use --pg 16 or newer, or --analyze-sampling local,off")
        dims.update(latency=latencies_with_direct(requested), method=(*dims["method"], NA),
                    fraction=(*dims["fraction"], NA), analyze_sampling=(*dims["analyze_sampling"], NA),
                    stats_target=(*dims["stats_target"], NA))

        def exclude(d: dict[str, str]) -> bool:
            sampling = d["test"] == "sampling"
            own = (d["method"], d["fraction"]) if sampling else (d["analyze_sampling"], d["stats_target"])
            other = (d["analyze_sampling"], d["stats_target"]) if sampling else (d["method"], d["fraction"])
            if NA in own or other != (NA, NA) or d["method"] == NA and sampling:
                return True
            direct = d["access"] == "direct"
            if not sampling and direct != (d["analyze_sampling"] == "local"):
                return True
            return d["latency"] != DIRECT if direct else d["latency"] not in requested

        return cross(self.name, self.dimensions, dims, exclude)

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> None:
        opts, p = env.options, env.options.params
        sizes = sorted(opts.dims["rows"], key=row_count)
        self._check_disk(env, sizes)
        source = env.servers.cluster("source", {"shared_preload_libraries": "pg_stat_statements",
                                                "pg_stat_statements.track": "all"},
                                     remote=links_requested(opts), bandwidth_kbit=p.get("bandwidth"))
        external = env.servers.cluster("external")
        source.create_database("source")
        t0 = time.monotonic()
        with source.connect("source") as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            for size in sizes:
                self._load_table(conn, size, opts)
        env.log(f"sampled tables ({', '.join(sizes)} rows) loaded in {time.monotonic() - t0:.1f} s")

        dbs = {}
        for latency in opts.dims["latency"]:
            link = env.servers.link(f"source_{latency}", source, int(latency[:-2]), p.get("bandwidth"))
            db = f"sampling_{latency}"
            external.create_database(db)
            with external.connect(db) as conn:
                for s in (
                    "CREATE EXTENSION IF NOT EXISTS postgres_fdw",
                    sql.SQL("CREATE SERVER source_server FOREIGN DATA WRAPPER postgres_fdw "
                            "OPTIONS (host {}, port {}, dbname 'source')").format(
                        sql.Literal(link.host), sql.Literal(str(link.port))),
                    sql.SQL("CREATE USER MAPPING FOR CURRENT_USER SERVER source_server "
                            "OPTIONS (user 'pgpathbench', password {})").format(sql.Literal(source.password)),
                    "IMPORT FOREIGN SCHEMA public FROM SERVER source_server INTO public",
                ):
                    conn.execute(s)
            dbs[latency] = db
        env.state.update(source=source, external=external, dbs=dbs, explained={}, truth={})
        env.fingerprint["remote_sampling"] = {
            "rows": list(sizes), "row_bytes_on_disk": ROW_BYTES,
            "views": "one per (table, method, fraction), each with OFFSET 0 as an optimisation fence",
            "stats_truth": "computed from the whole table"}

    @staticmethod
    def _check_disk(env: StudyEnv, sizes) -> None:
        need = sum(row_count(s) for s in sizes) * ROW_BYTES * 1.3   # heap plus WAL and slack
        free = env.servers.workspace.free_bytes()
        if need > free:
            raise UserError(f"--rows: {','.join(sizes)} rows need about {need / 1e9:.0f} GB free in the workspace, "
                            f"{free / 1e9:.0f} GB are; use smaller --rows or another --workspace")

    @staticmethod
    def _load_table(conn: psycopg.Connection, size: str, opts: StudyOptions) -> None:
        n, t = row_count(size), f"t_{size}"
        conn.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
        # a: uniform ints (a histogram), b: a skewed float, c: 50 values with a skew and 10% NULLs (MCVs),
        # pad: the seed's rows were about 200 bytes.
        conn.execute(f"CREATE TABLE {t} (id int, a int, b float8, c text, pad text)")
        conn.execute("SELECT setseed(0.42)")
        conn.execute(f"""INSERT INTO {t} SELECT i, (random() * 1000)::int, (-ln(1 - random())) * 100,
                           CASE WHEN random() < 0.1 THEN NULL ELSE 'v' || (power(random(), 3) * 50)::int END,
                           repeat(md5(i::text), 5) FROM generate_series(1, {n}) i""")
        conn.execute(f"VACUUM ANALYZE {t}")
        views = [(f"v_{size}_full", f"SELECT * FROM {t} OFFSET 0")]
        for f in opts.dims["fraction"] if "sampling" in opts.dims["test"] else ():
            tag = f.replace(".", "_")
            views += [(f"v_{size}_system_{tag}", f"SELECT * FROM {t} TABLESAMPLE SYSTEM ({float(f) * 100}) OFFSET 0"),
                      (f"v_{size}_bernoulli_{tag}",
                       f"SELECT * FROM {t} TABLESAMPLE BERNOULLI ({float(f) * 100}) OFFSET 0"),
                      (f"v_{size}_random_{tag}", f"SELECT * FROM {t} WHERE random() < {f} OFFSET 0")]
        for name, body in views:
            conn.execute(f"CREATE VIEW {name} AS {body}")

    # -- one measurement --------------------------------------------------------------------
    def measure(self, env: StudyEnv, case: Case) -> dict:
        if case["test"] == "sampling":
            return self._measure_sampling(env, case)
        return self._measure_analyze(env, case)

    def _measure_sampling(self, env: StudyEnv, case: Case) -> dict:
        size, method, f = case["rows"], case["method"], case["fraction"]
        view = f"v_{size}_full" if method == "full" else f"v_{size}_{method}_{f.replace('.', '_')}"
        query = f"SELECT count(s) FROM (SELECT * FROM {view} OFFSET 0) s" + \
            (f" WHERE random() < {f}" if method == "full" else "")
        fdw = case["access"] == "fdw"
        cluster, db = (env.state["external"], env.state["dbs"][case["latency"]]) if fdw else \
            (env.state["source"], "source")
        conn = self._connection(env, cluster, db)
        t0 = time.perf_counter()
        try:
            sampled = conn.execute(query).fetchone()[0]
        except psycopg.Error as e:
            raise CaseError(f"{query}: {e}".strip()) from None
        elapsed = time.perf_counter() - t0
        n = row_count(size)
        metrics = {"duration_ms": elapsed * 1000, "rows_table": n, "rows_sampled": sampled,
                   "rows_transferred": (n if method == "full" else sampled) if fdw else 0,
                   "sampled_fraction": sampled / n}
        if fdw:
            metrics.update(self._remote_sql(env, conn, case.case_id, query, view))
        return metrics

    def _remote_sql(self, env: StudyEnv, conn, case_id: str, query: str, view: str) -> dict:
        """What postgres_fdw sends (EXPLAIN VERBOSE), and what the view it names does there."""
        if case_id not in env.state["explained"]:
            plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN VERBOSE {query}"))
            remote = re.search(r"Remote SQL: (.*)", plan)
            with env.state["source"].connect("source") as src:
                viewdef = src.execute("SELECT pg_get_viewdef(%s::regclass)", (view,)).fetchone()[0]
            env.state["explained"][case_id] = {
                "remote_sql": remote.group(1).strip() if remote else None,
                "remote_view_sql": " ".join(viewdef.split()),
                "local_filter": " ".join(re.findall(r"Filter: (.*)", plan))}
        return env.state["explained"][case_id]

    def _measure_analyze(self, env: StudyEnv, case: Case) -> dict:
        size, mode, target = case["rows"], case["analyze_sampling"], case["stats_target"]
        local = mode == "local"
        cluster, db = (env.state["source"], "source") if local else \
            (env.state["external"], env.state["dbs"][case["latency"]])
        table = f"t_{size}"
        conn = self._connection(env, cluster, db)
        notices: list[str] = []

        def keep(diag) -> None:
            notices.append(diag.message_primary or "")

        conn.add_notice_handler(keep)
        try:
            if not local and int(case["pg"]) >= 16:
                conn.execute(sql.SQL("ALTER FOREIGN TABLE {} OPTIONS ({} analyze_sampling {})").format(
                    sql.Identifier(table), sql.SQL("SET" if self._has_option(conn, table) else "ADD"),
                    sql.Literal(mode)))
            conn.execute(f"SET default_statistics_target = {int(target)}")
            if not local:
                with env.state["source"].connect("source") as src:
                    src.execute("SELECT pg_stat_statements_reset()")
            t0 = time.perf_counter()
            conn.execute(f"ANALYZE VERBOSE {table}")
            elapsed = time.perf_counter() - t0
        except psycopg.Error as e:
            raise CaseError(f"ANALYZE {table} ({mode}): {e}".strip()) from None
        finally:
            conn.remove_notice_handler(keep)
        metrics = {"duration_ms": elapsed * 1000, "rows_table": row_count(size)}
        found = [re.search(r"(\d+) rows in sample", n) for n in notices]
        sample = next((int(m.group(1)) for m in found if m), None)
        if sample is not None:
            metrics["rows_sampled"] = sample
        if not local:
            metrics["remote_sql"] = self._analyze_remote_sql(env, table)
        metrics.update(self._stats_error(env, conn, table))
        return metrics

    @staticmethod
    def _has_option(conn, table: str) -> bool:
        opts = conn.execute("SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = %s::regclass",
                            (table,)).fetchone()[0] or []
        return any(o.startswith("analyze_sampling=") for o in opts)

    @staticmethod
    def _analyze_remote_sql(env: StudyEnv, table: str) -> str | None:
        with env.state["source"].connect("source") as src:
            rows = src.execute("SELECT query FROM pg_stat_statements WHERE query ILIKE %s "
                               "AND query NOT ILIKE '%%pg_stat_statements%%' ORDER BY calls DESC",
                               (f"%{table}%",)).fetchall()
        texts = [" ".join(r[0].split()) for r in rows]
        return next((t for t in texts if "select" in t.lower()), texts[0] if texts else None)

    def _stats_error(self, env: StudyEnv, conn, table: str) -> dict:
        """The ANALYZE statistics against the truth of the whole table, per kind of statistic."""
        stats = {r[0]: r[1:] for r in conn.execute(
            "SELECT attname, n_distinct, null_frac, most_common_vals::text, most_common_freqs, "
            "histogram_bounds::text FROM pg_stats WHERE tablename = %s AND attname IN ('a', 'b', 'c')", (table,))}
        truth = self._truth(env, table)
        n = truth["rows"]
        out = {}
        nd_a = stats.get("a", (None,))[0]
        if nd_a is not None:
            est = -nd_a * n if nd_a < 0 else nd_a
            out["ndistinct_error"] = abs(est - truth["nd_a"]) / truth["nd_a"]
        if "c" in stats:
            out["null_frac_error"] = abs(stats["c"][1] - truth["null_c"])
            mcv_vals, mcv_freqs = stats["c"][2], stats["c"][3]
            if mcv_vals and mcv_freqs:
                values = mcv_vals.strip("{}").split(",")
                errs = [abs(f - truth["freq_c"].get(v.strip('"'), 0.0)) for v, f in zip(values, mcv_freqs)]
                out["mcv_freq_error"] = sum(errs) / len(errs)
        if "b" in stats and stats["b"][4]:
            bounds = [float(x) for x in stats["b"][4].strip("{}").split(",")]
            with env.state["source"].connect("source") as src:
                counts = dict(src.execute(
                    f"SELECT width_bucket(b, %s::float8[]), count(*) FROM {table} GROUP BY 1", (bounds,)).fetchall())
            buckets = len(bounds) - 1
            inside = [counts.get(i, 0) for i in range(1, buckets + 1)]
            total = sum(inside) + counts.get(0, 0) + counts.get(len(bounds), 0)
            # A perfect histogram puts 1/buckets of the rows in each bucket: mean relative deviation.
            out["histogram_error"] = sum(abs(c / total * buckets - 1) for c in inside) / buckets
        return out

    @staticmethod
    def _truth(env: StudyEnv, table: str) -> dict:
        if table not in env.state["truth"]:
            with env.state["source"].connect("source") as src:
                n, nd_a, null_c = src.execute(
                    f"SELECT count(*), count(DISTINCT a), avg((c IS NULL)::int) FROM {table}").fetchone()
                freq = dict(src.execute(f"SELECT c, count(*)::float8 / %s FROM {table} WHERE c IS NOT NULL "
                                        "GROUP BY c", (n,)).fetchall())
            env.state["truth"][table] = {"rows": n, "nd_a": nd_a, "null_c": float(null_c), "freq_c": freq}
        return env.state["truth"][table]

    @staticmethod
    def _connection(env: StudyEnv, cluster, db: str) -> psycopg.Connection:
        """One connection per database, kept: connection set-up is not what is measured."""
        conns = env.state.setdefault("connections", {})
        key = (cluster.name, db)
        if key not in conns or conns[key].closed:
            conns[key] = cluster.connect(db)
        return conns[key]

    # -- the report -------------------------------------------------------------------------
    def report(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Table]:
        ours = [m for m in measurements if m["study"] == self.name and m["ok"]]
        rtt = measured_rtt(probes)
        tables = []
        sampling = [m for m in ours if m["dims"]["test"] == "sampling"]
        if sampling:
            tables.append(self._sampling_table(sampling, rtt))
            tables.append(self._per_row_table(sampling, rtt))
        analyze = [m for m in ours if m["dims"]["test"] == "analyze"]
        if analyze:
            tables.append(self._analyze_table(analyze))
        failed = [m for m in measurements if m["study"] == self.name and not m["ok"]]
        if failed:
            tables.append(Table("Failed measurements", ["Case", "Round", "Error"],
                                [[m["case_id"], m["round"], m["error"]] for m in failed]))
        return tables

    def plots(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Plot]:
        """The seed's curves: duration against fraction per method, direct and through the FDW
        (one chart per table size and link); ANALYZE duration and statistics error per mode."""
        ours = [m for m in measurements if m["study"] == self.name and m["ok"]]
        rtt = measured_rtt(probes)
        plots = []
        sampling = defaultdict(lambda: defaultdict(list))
        for m in ours:
            d = m["dims"]
            if d["test"] == "sampling":
                chart = (d["pg"], d["rows"], d["access"], d["latency"])
                sampling[chart][(d["method"], float(d["fraction"]))].append(m["metrics"]["duration_ms"])
        for (pg, size, access, latency), by in sorted(sampling.items(),
                                                      key=lambda kv: (kv[0][0], row_count(kv[0][1]), kv[0][2])):
            where = "directly on the source" if access == "direct" else \
                f"through postgres_fdw ({link_text(pg, latency, rtt)})"
            series = {method: [_median_point(f, v) for (m, f), v in sorted(by.items()) if m == method]
                      for method in SAMPLING_METHODS}
            plots.append(Plot(f"Sampling {size} rows {where}, PostgreSQL {pg}", "Fraction of the table sampled",
                              "Duration, ms", "line", {k: v for k, v in series.items() if v},
                              notes=["Median of the rounds, error bars: 95% CI of the median. full = every row "
                                     "read (and, through the FDW, sent) then sampled; the others sample first."]))
        analyze = defaultdict(lambda: defaultdict(list))
        errors = defaultdict(lambda: defaultdict(list))
        for m in ours:
            d = m["dims"]
            if d["test"] == "analyze":
                chart = (d["pg"], d["rows"], d["latency"])
                analyze[chart][(d["analyze_sampling"], d["stats_target"])].append(m["metrics"]["duration_ms"])
                if m["metrics"].get("histogram_error") is not None:
                    errors[chart][(d["analyze_sampling"], d["stats_target"])].append(m["metrics"]["histogram_error"])
        for chart, by in sorted(analyze.items(), key=lambda kv: (kv[0][0], row_count(kv[0][1]))):
            pg, size, latency = chart
            targets = sorted({t for _, t in by}, key=int)
            for title, data, label in (("ANALYZE duration", by, "Duration, ms"),
                                       ("Histogram error after ANALYZE", errors[chart],
                                        "Mean relative deviation of bucket shares")):
                series = {f"target {t}": [_median_point(mode, data[(mode, t)]) for mode in ANALYZE_MODES
                                          if data.get((mode, t))] for t in targets}
                if any(series.values()):
                    plots.append(Plot(f"{title}, {size} rows, PostgreSQL {pg} ({link_text(pg, latency, rtt)})",
                                      "ANALYZE of the local table, or of the foreign table with analyze_sampling",
                                      label, "bar", series,
                                      notes=["Median of the rounds, error bars: 95% CI of the median."]))
        return plots

    @staticmethod
    def _sampling_table(ms: list[dict], rtt: dict) -> Table:
        by: dict[tuple, list[float]] = defaultdict(list)
        moved: dict[tuple, list[float]] = defaultdict(list)
        for m in ms:
            d = m["dims"]
            key = (d["pg"], d["rows"], d["latency"], d["method"], float(d["fraction"]), d["access"])
            by[key].append(m["metrics"]["duration_ms"])
            moved[key].append(m["metrics"]["rows_transferred"])
        rows = []
        for key in sorted(by, key=lambda k: (k[0], row_count(k[1]), int(k[2][:-2]), k[3], k[4], k[5])):
            pg, size, latency, method, f, access = key
            s = summarise(by[key])
            link = "—" if access == "direct" else link_text(pg, latency, rtt)
            rows.append([pg, size, link, method, f"{f:g}", access, s.median, s.ci_text, s.n,
                         summarise(moved[key]).median])
        return Table("Sampling: duration against fraction, per method, direct vs through postgres_fdw",
                     ["PG", "Rows", "Link (measured RTT)", "Method", "Fraction", "Access", "Median ms",
                      "95% CI", "n", "Rows moved"], rows,
                     ["full = transfer every row and sample on arrival (postgres_fdw's ANALYZE before 16); "
                      "system/bernoulli/random = sample where the table is, transfer only the sample."],
                     align_left=6)

    @staticmethod
    def _per_row_table(ms: list[dict], rtt: dict) -> Table:
        """Per-row costs fitted from the measurements, beside the seed's 0.2 / 1.5 / 5.5 us."""
        rows = []
        by_round: dict[tuple, float] = {}
        for m in ms:
            d = m["dims"]
            by_round[(d["pg"], d["rows"], d["method"], d["fraction"], d["access"], d["latency"], m["round"])] = \
                m["metrics"]["duration_ms"]
        # Reading and sampling a row: direct random() sampling reads every row, at every size.
        for pg in sorted({k[0] for k in by_round}):
            pts = [(row_count(k[1]), v) for k, v in by_round.items()
                   if k[0] == pg and k[4] == "direct" and k[2] == "random"]
            fit = _fit(pts)
            ref = SAMPLING_US_PER_ROW["read_and_sample"]
            rows.append([pg, "read and sample a row (direct random())", "—", *_fit_cells(fit), ref])
            # Sending a row: FDW minus direct, same sample and round, against rows moved.
            for latency in sorted({k[5] for k in by_round if k[4] == "fdw"}, key=lambda l: int(l[:-2])):
                pts = []
                for k, v in by_round.items():
                    if k[0] == pg and k[4] == "fdw" and k[5] == latency:
                        base = by_round.get((*k[:4], "direct", DIRECT, k[6]))
                        if base is not None:
                            n = row_count(k[1])
                            sent = n if k[2] == "full" else n * float(k[3])
                            pts.append((sent, v - base))
                fit = _fit(pts)
                ref = SAMPLING_US_PER_ROW["send_localhost"] if latency == DIRECT else None
                rows.append([pg, "send a row through postgres_fdw", link_text(pg, latency, rtt), *_fit_cells(fit),
                             ref])
        return Table("Per-row costs fitted from the measurements (least squares, us per row)",
                     ["PG", "Cost", "Link (measured RTT)", "us per row", "95% CI", "Points", "Published us"], rows,
                     ["Published: seed 004 — reading+sampling about 0.2 us, sending about 1.5 us on localhost and "
                      "5.5 us on a LAN (about 0.1 ms RTT); compare with the link of similar measured RTT."],
                     align_left=3)

    @staticmethod
    def _analyze_table(ms: list[dict]) -> Table:
        by: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        sql_seen: dict[tuple, str] = {}
        for m in ms:
            d = m["dims"]
            key = (d["pg"], d["rows"], d["latency"], int(d["stats_target"]), d["analyze_sampling"])
            for k in ("duration_ms", "rows_sampled", "ndistinct_error", "null_frac_error", "mcv_freq_error",
                      "histogram_error"):
                if m["metrics"].get(k) is not None:
                    by[key][k].append(m["metrics"][k])
            if m["metrics"].get("remote_sql"):
                sql_seen[key] = m["metrics"]["remote_sql"]
        order = {mode: i for i, mode in enumerate(ANALYZE_MODES)}
        rows = []
        for key in sorted(by, key=lambda k: (k[0], row_count(k[1]), int(k[2][:-2]), k[3], order[k[4]])):
            v = by[key]
            s = summarise(v["duration_ms"])
            med = {k: summarise(x).median if x else None for k, x in v.items()}
            rows.append([key[0], key[1], key[2], key[3], key[4], s.median, s.ci_text, s.n, med.get("rows_sampled"),
                         med.get("ndistinct_error"), med.get("null_frac_error"), med.get("mcv_freq_error"),
                         med.get("histogram_error"), _sampling_clause(sql_seen.get(key))])
        return Table("ANALYZE: local table vs foreign table per analyze_sampling, with the error of its statistics",
                     ["PG", "Rows", "Link", "Target", "Sampling", "Median ms", "95% CI", "n", "Sample rows",
                      "n_distinct rel. err", "null_frac err", "MCV freq err", "Histogram err", "Remote sampling"],
                     rows,
                     ["Errors against the whole table: n_distinct of column a (relative), null_frac and most common "
                      "values' frequencies of c (absolute), histogram of b (mean relative deviation of bucket shares "
                      "from equal). Remote sampling: what the SQL postgres_fdw sent does (pg_stat_statements)."],
                     align_left=5)


def _sampling_clause(remote_sql: str | None) -> str:
    if not remote_sql:
        return "—"
    m = re.search(r"TABLESAMPLE \w+|random\(\) <|WHERE[^)]*random", remote_sql, re.I)
    return m.group(0) if m else "none (every row)"


def _fit(points: list[tuple[float, float]]):
    try:
        return linear_fit([x for x, _ in points], [y for _, y in points])
    except ValueError:
        return None


def _fit_cells(fit) -> list:
    if fit is None:
        return [None, "needs 2+ sizes or fractions", 0]
    # ms per row -> us per row
    return [fit.slope * 1000, f"[{fit.slope_low * 1000:.3f}, {fit.slope_high * 1000:.3f}]", fit.n]


def _median_point(x, values: list[float]) -> Point:
    s = summarise(values)
    return Point(x, s.median, s.ci_low, s.ci_high)
