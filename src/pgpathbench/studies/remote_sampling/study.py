"""remote-sampling (seed 004): sampling a table directly and through postgres_fdw, and ANALYZE
of foreign tables with analyze_sampling (PostgreSQL 16+).

Sampling test, as the seed built it: the tables live in `source`; for every sample (method and
fraction) a view with an optimisation fence (OFFSET 0) does the sampling where the case says,
so that postgres_fdw cannot push random() or TABLESAMPLE anywhere else. `direct` queries the
view on the source; `fdw` queries a foreign table over it from `external`, so only the sampled
rows cross the link (`full` transfers everything and samples on arrival: what postgres_fdw's
ANALYZE did before 16). The count is of whole rows, so every column is read and sent.

ANALYZE test: ANALYZE of the table itself (`local`) vs of a foreign table over it with
analyze_sampling off, auto, random, system and bernoulli, at several statistics targets. What
the seed could not show: how good each sample is. After each ANALYZE, the statistics
(n_distinct, null_frac, most common values, histogram) are compared with the truth computed
from the whole table, as error figures. The SQL postgres_fdw sent is recorded from
pg_stat_statements on the source (EXPLAIN cannot show ANALYZE's remote SQL): the statements of
our source database whose calls grew during the ANALYZE, never by a reset, which a user's server
is not ours to do. Where the source has no pg_stat_statements in our database (a user's server
without it in template1) the remote SQL is not recorded, and the run's facts say why.

Either role can be the user's server (--server source=DSN, external=DSN): everything here is done
in databases of ours there, named through server.dbname(); the tables sampled live on the
source's own disk then, which the disk check leaves to its owner. Either can be placed on a host
(--place, servers/placement.py): a managed server there, loaded over TCP, its disk the host's.

Tables and views are named after row counts ('t_10M'): always through sql.Identifier, since an
unquoted name would be folded to lower case ('t_10m') and miss the table.
"""

from __future__ import annotations

import re
import time
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Sequence

import psycopg
from psycopg import sql

from ...errors import CaseError, UserError, reason
from ...evidence import Watched, flush_statistics
from ...evidence.snapshots import Unavailable, read_statements, statement_deltas
from ...matrix import Case, StudyOptions, cross
from ...servers import fdw, guc, tls
from ...servers.paths import DIRECT, NetworkPath
from ...servers.topology import Server
from ...report import Plot, Table
from ...results.model import StudyResult
from ..base import Declared, Setup, StudyEnv, check_tls_given, latencies_with_direct, links_requested, tls_values, \
    user_roles
from .report import study_plots, study_tables
from . import hop, spec
from .spec import NA, ROW_BYTES, row_count, table_name, view_name

SOURCE_DB = "source"
FDW_SERVER = "source_server"
# A managed source counts every statement (ANALYZE's remote SQL is read back from it); a user's has its own.
STATEMENTS = {"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}


@dataclass
class RemoteSamplingState:
    """What prepare() makes for one major's measurements (StudyEnv.state), and what they keep."""
    source: Server                      # holds the sampled tables, database SOURCE_DB
    external: Server                    # holds their foreign tables, one database per latency
    dbs: dict[str, str]                 # latency -> the external's database whose link it crosses
    statements_missing: str | None      # why ANALYZE's remote SQL cannot be read back, or None
    explained: dict[str, dict] = field(default_factory=dict)   # case id -> its remote SQL (EXPLAIN)
    truth: dict[str, dict] = field(default_factory=dict)       # table -> the whole table's statistics
    statements_before: dict | None = None   # the source's statements before the ANALYZE measured now


class RemoteSampling(Declared):
    vocabulary = spec.VOCABULARY

    # -- the matrix -------------------------------------------------------------------------
    def refine(self, options: StudyOptions, given: set[str]) -> StudyOptions:
        check_tls_given(options, given)
        return options

    def cases(self, options: StudyOptions) -> list[Case]:
        dims = dict(options.dims)
        with_tls = tls_values(options)
        if "tls" in dims:   # a direct case has no FDW hop: measured without TLS whatever --tls says
            dims["tls"] = tuple(dict.fromkeys((tls.OFF, *with_tls)))
        requested = dims["latency"]
        old = [m for m in dims["pg"] if int(m) < 16]
        modes = _sampling_modes(options)
        # A user's external runs ANALYZE with its own postgres_fdw: check_user_servers() asks its version.
        if old and modes and "external" not in user_roles(options):
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
            if d.get("tls", tls.OFF) not in ((tls.OFF,) if direct else with_tls):
                return True
            return d["latency"] != DIRECT if direct else d["latency"] not in requested

        return cross(self.name, self.dimensions, dims, exclude)

    def check_user_servers(self, options: StudyOptions, facts, dsns) -> None:
        """analyze_sampling is an option of the postgres_fdw that runs ANALYZE: the external's (16+)."""
        external, modes = facts.get("external"), _sampling_modes(options)
        if external is not None and external.version_num < 160000 and modes:
            raise UserError(f"--server external: its postgres_fdw (PostgreSQL {external.version_num // 10000}) has "
                            f"no analyze_sampling ({','.join(modes)} need 16+); give --analyze-sampling local,off, "
                            "or an external server of PostgreSQL 16 or newer")

    def path(self, case: Case) -> NetworkPath | None:
        """Through the FDW, the path from `external` to the source; direct cases cross none."""
        return NetworkPath(case["pg"], "source", case["latency"]) if case["access"] == "fdw" else None

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> Setup:
        opts, bandwidth = env.options, env.options.params.get("bandwidth")
        sizes = sorted(opts.dims["rows"], key=row_count)
        source = env.servers.server("source", STATEMENTS, remote=links_requested(opts), bandwidth_kbit=bandwidth,
                                    tls=tls.ON in tls_values(opts))
        if source.managed:   # a user's source keeps the rows on its own disk
            self._check_disk(env, source, sizes)
        external = env.servers.server("external")
        if not external.managed:
            fdw.warn_logged_password(env.log, external)
        source.create_database(SOURCE_DB)
        fractions = opts.dims["fraction"] if "sampling" in opts.dims["test"] else ()
        t0 = time.monotonic()
        with source.connect(SOURCE_DB) as conn:
            if source.managed:   # a user's server: only where its DBA put it in template1
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            names = [name for size in sizes for name in load_table(conn, size, fractions)]
            missing = _statements_missing(conn, source.dbname(SOURCE_DB))
        env.log(f"sampled tables ({', '.join(sizes)} rows) loaded in {time.monotonic() - t0:.1f} s")
        if missing:
            env.log(f"ANALYZE's remote SQL will not be recorded: {missing}")
        dbs = self._foreign_tables(env, source, external, names)
        env.state = RemoteSamplingState(source, external, dbs, missing)
        if "analyze" in opts.dims["test"]:
            # Here, not in the first ANALYZE measurement: 4 min at 100M rows, which the ETA took for
            # that case's cost in every round ("the rest: about 25m39s" for 3.2 min).
            t0 = time.monotonic()
            for size in sizes:
                _truth(env, table_name(size))
            env.log(f"the whole tables' statistics (what ANALYZE's are judged against) in {time.monotonic() - t0:.1f} s")
        return Setup(facts={
            "rows": list(sizes), "row_bytes_on_disk": ROW_BYTES,
            "views": "one per (table, method, fraction), each with OFFSET 0 as an optimisation fence",
            "stats_truth": "computed from the whole table",
            "analyze_remote_sql": f"not recorded: {missing}" if missing else
            "pg_stat_statements of the source database: the statements whose calls grew during the ANALYZE"})

    @staticmethod
    def _foreign_tables(env: StudyEnv, source: Server, external: Server, names: list[str]) -> dict[str, str]:
        """Per latency, a database on the external server whose foreign tables (`names`, and only
        those: the source's public schema may hold a template's objects) reach the source through
        that latency's link: latency -> database."""
        dbs = {}
        for latency in env.options.dims["latency"]:
            link = env.servers.path(NetworkPath(env.major, "source", latency), source,
                                    env.options.params.get("bandwidth"), external)
            dbs[latency] = f"sampling_{latency}"
            external.create_database(dbs[latency])
            with external.connect(dbs[latency]) as conn:
                fdw.reach(conn, FDW_SERVER, source, SOURCE_DB, source.reached_at(link))
                fdw.import_schema(conn, FDW_SERVER, tables=names)
        return dbs

    @staticmethod
    def _check_disk(env: StudyEnv, source: Server, sizes) -> None:
        need = sum(row_count(s) for s in sizes) * ROW_BYTES * 1.3   # heap plus WAL and slack
        placed = getattr(source, "network", None)   # a placed server's (--place): its host's disk, read there
        free = int(source.host.facts.values.get("disk_free_kb") or 0) * 1024 if placed else \
            env.servers.workspace.free_bytes()
        if need > free:
            raise UserError(f"--rows: {','.join(sizes)} rows need about {need / 1e9:.0f} GB free "
                            f"{f'on {placed}' if placed else 'in the workspace'}, {free / 1e9:.0f} GB are; use "
                            f"smaller --rows or {'a host with more room' if placed else 'another --workspace'}")

    # -- one measurement --------------------------------------------------------------------
    def before_measure(self, env: StudyEnv, case: Case) -> None:
        # The case's --set session settings on the kept connection it runs on (SET), and through the
        # FDW on the remote sessions too (the foreign server's options).
        through_fdw = _through_fdw(case)
        conn = _connection(env, *self._where(env, case, through_fdw))
        guc.set_session(conn, env, case)
        if through_fdw:
            fdw.set_case_options(env, case, *self._where(env, case, True), [FDW_SERVER], kept=[conn],
                                 hop=hop.options(env, case))
        if case["test"] == "analyze" and case["analyze_sampling"] != "local" and not env.state.statements_missing:
            # ANALYZE's remote SQL is read back: what the source's statements counted from now on.
            env.state.statements_before = _statements(env, with_text=False)

    def watched(self, env: StudyEnv, case: Case) -> list[Watched]:
        """The server the query or ANALYZE runs on, and the source behind its foreign table."""
        through_fdw = _through_fdw(case)
        source = env.state.source.watched("source", SOURCE_DB)
        if not through_fdw:
            return [source]
        return [env.state.external.watched("external", env.state.dbs[case["latency"]]), source]

    def measure(self, env: StudyEnv, case: Case) -> dict:
        metrics = self._measure_sampling(env, case) if case["test"] == "sampling" else self._measure_analyze(env, case)
        if _through_fdw(case) and env.state.source.tls:
            metrics["tls"] = hop.negotiated(env, case, _source(env), SOURCE_DB)
        return metrics

    def _measure_sampling(self, env: StudyEnv, case: Case) -> dict:
        size, method, f = case["rows"], case["method"], case["fraction"]
        view = view_name(size, method, f)
        query = sql.SQL("SELECT count(s) FROM (SELECT * FROM {} OFFSET 0) s").format(sql.Identifier(view))
        if method == "full":
            query += sql.SQL(" WHERE random() < {}").format(sql.Literal(float(f)))
        fdw_access = case["access"] == "fdw"
        conn = _connection(env, *self._where(env, case, fdw_access))
        t0 = time.perf_counter()
        try:
            sampled = conn.execute(query).fetchone()[0]
        except psycopg.Error as e:
            raise CaseError(f"{query.as_string(conn)}: {e}".strip()) from None
        elapsed = time.perf_counter() - t0
        flush_statistics(conn)   # a kept session: its statistics are the evidence's now, not in 10 s
        n = row_count(size)
        metrics = {"duration_ms": elapsed * 1000, "rows_table": n, "rows_sampled": sampled,
                   "rows_transferred": (n if method == "full" else sampled) if fdw_access else 0,
                   "sampled_fraction": sampled / n}
        if fdw_access:
            metrics.update(self._remote_sql(env, conn, case.case_id, query, view))
        return metrics

    @staticmethod
    def _where(env: StudyEnv, case: Case, through_fdw: bool) -> tuple:
        """(cluster, database) a case runs in: the external one for the FDW, else the source."""
        if through_fdw:
            return env.state.external, env.state.dbs[case["latency"]]
        return env.state.source, SOURCE_DB

    @staticmethod
    def _remote_sql(env: StudyEnv, conn, case_id: str, query: sql.Composable, view: str) -> dict:
        """What postgres_fdw sends (EXPLAIN VERBOSE), and what the view it names does there."""
        if case_id not in env.state.explained:
            plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN VERBOSE ") + query))
            remote = re.search(r"Remote SQL: (.*)", plan)
            viewdef = _source(env).execute("SELECT pg_get_viewdef(quote_ident(%s)::regclass)", (view,)).fetchone()[0]
            env.state.explained[case_id] = {
                "remote_sql": remote.group(1).strip() if remote else None,
                "remote_view_sql": " ".join(viewdef.split()),
                "local_filter": " ".join(re.findall(r"Filter: (.*)", plan))}
        return env.state.explained[case_id]

    def _measure_analyze(self, env: StudyEnv, case: Case) -> dict:
        size, mode = case["rows"], case["analyze_sampling"]
        local = mode == "local"
        table = table_name(size)
        conn = _connection(env, *self._where(env, case, not local))
        notices: list[str] = []

        def keep(diag) -> None:
            notices.append(diag.message_primary or "")

        conn.add_notice_handler(keep)
        try:
            if not local and conn.info.server_version >= 160000:   # the external's, a user's may be older
                set_analyze_sampling(conn, table, mode)
            conn.execute(sql.SQL("SET default_statistics_target = {}").format(sql.Literal(int(case["stats_target"]))))
            t0 = time.perf_counter()
            conn.execute(sql.SQL("ANALYZE VERBOSE {}").format(sql.Identifier(table)))
            elapsed = time.perf_counter() - t0
            flush_statistics(conn)
        except psycopg.Error as e:
            raise CaseError(f"ANALYZE {table} ({mode}): {e}".strip()) from None
        finally:
            conn.remove_notice_handler(keep)
        metrics = {"duration_ms": elapsed * 1000, "rows_table": row_count(size)}
        found = [re.search(r"(\d+) rows in sample", n) for n in notices]
        sample = next((int(m.group(1)) for m in found if m), None)
        if sample is not None:
            metrics["rows_sampled"] = sample
        if not local and not env.state.statements_missing:
            before, env.state.statements_before = env.state.statements_before, None
            ran = statement_deltas(before, _statements(env, with_text=True))
            metrics["remote_sql"] = analyze_remote_sql(ran, table)
        try:
            metrics.update(stats_error(conn, table, _truth(env, table)))
        except psycopg.Error as e:   # the ANALYZE was timed; its statistics could not be judged
            raise CaseError(f"statistics of {table} against the whole table: {e}".strip()) from None
        return metrics

    # -- the report -------------------------------------------------------------------------
    def report(self, result: StudyResult) -> list[Table]:
        return study_tables(result)

    def plots(self, result: StudyResult) -> list[Plot]:
        return study_plots(result)


# -- the data ---------------------------------------------------------------------------------
def load_table(conn: psycopg.Connection, size: str, fractions) -> list[str]:
    """The table of `size` rows, and a sampling view per method and fraction over it: their names."""
    t = sql.Identifier(table_name(size))
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(t))
    # a: uniform ints (a histogram), b: a skewed float, c: 50 values with a skew and 10% NULLs (MCVs),
    # pad: the seed's rows were about 200 bytes.
    conn.execute(sql.SQL("CREATE TABLE {} (id int, a int, b float8, c text, pad text)").format(t))
    conn.execute("SELECT setseed(0.42)")
    conn.execute(sql.SQL("""INSERT INTO {} SELECT i, (random() * 1000)::int, (-ln(1 - random())) * 100,
                           CASE WHEN random() < 0.1 THEN NULL ELSE 'v' || (power(random(), 3) * 50)::int END,
                           repeat(md5(i::text), 5) FROM generate_series(1, {}) i""").format(
        t, sql.Literal(row_count(size))))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(t))
    views = [(view_name(size, "full", NA), sql.SQL("SELECT * FROM {} OFFSET 0").format(t))]
    for f in fractions:
        pct = sql.Literal(float(f) * 100)
        views += [(view_name(size, "system", f),
                   sql.SQL("SELECT * FROM {} TABLESAMPLE SYSTEM ({}) OFFSET 0").format(t, pct)),
                  (view_name(size, "bernoulli", f),
                   sql.SQL("SELECT * FROM {} TABLESAMPLE BERNOULLI ({}) OFFSET 0").format(t, pct)),
                  (view_name(size, "random", f),
                   sql.SQL("SELECT * FROM {} WHERE random() < {} OFFSET 0").format(t, sql.Literal(float(f))))]
    for name, body in views:
        conn.execute(sql.SQL("CREATE VIEW {} AS ").format(sql.Identifier(name)) + body)
    return [table_name(size), *(name for name, _ in views)]


def set_analyze_sampling(conn: psycopg.Connection, table: str, mode: str) -> None:
    """The foreign table's analyze_sampling option (ADD the first time, SET after)."""
    options = conn.execute("SELECT ftoptions FROM pg_foreign_table WHERE ftrelid = quote_ident(%s)::regclass",
                           (table,)).fetchone()[0] or []
    verb = "SET" if any(o.startswith("analyze_sampling=") for o in options) else "ADD"
    conn.execute(sql.SQL("ALTER FOREIGN TABLE {} OPTIONS ({} analyze_sampling {})").format(
        sql.Identifier(table), sql.SQL(verb), sql.Literal(mode)))


def analyze_remote_sql(ran: list[dict], table: str) -> str | None:
    """The SELECT postgres_fdw sent for ANALYZE of `table`, among the statements the source ran
    meanwhile (statement_deltas: most calls first)."""
    texts = [" ".join(s["query"].split()) for s in ran
             if table.lower() in s["query"].lower() and "pg_stat_statements" not in s["query"].lower()]
    return next((t for t in texts if "select" in t.lower()), texts[0] if texts else None)


def stats_error(conn: psycopg.Connection, table: str, truth: dict) -> dict:
    """The ANALYZE statistics (pg_stats where ANALYZE ran) against the truth of the whole table."""
    stats = {r[0]: r[1:] for r in conn.execute(
        "SELECT attname, n_distinct, null_frac, most_common_vals::text, most_common_freqs, "
        "histogram_bounds::text FROM pg_stats WHERE tablename = %s AND attname IN ('a', 'b', 'c')", (table,))}
    out = {}
    nd_a = stats.get("a", (None,))[0]
    if nd_a is not None:
        est = -nd_a * truth["rows"] if nd_a < 0 else nd_a
        out["ndistinct_error"] = abs(est - truth["nd_a"]) / truth["nd_a"]
    if "c" in stats:
        out["null_frac_error"] = abs(stats["c"][1] - truth["null_c"])
        mcv_vals, mcv_freqs = stats["c"][2], stats["c"][3]
        if mcv_vals and mcv_freqs:
            values = mcv_vals.strip("{}").split(",")
            errs = [abs(f - truth["freq_c"].get(v.strip('"'), 0.0)) for v, f in zip(values, mcv_freqs)]
            out["mcv_freq_error"] = sum(errs) / len(errs)
    if "b" in stats and stats["b"][4]:
        out["histogram_error"] = histogram_error(truth["b_sorted"], [float(x) for x in stats["b"][4].strip("{}").split(",")])
    return out


def histogram_error(b_sorted: Sequence[float], bounds: list[float]) -> float:
    """A perfect histogram puts 1/buckets of the rows in each bucket: the mean relative deviation.
    Bucket i holds bounds[i-1] <= b < bounds[i], as width_bucket() counts; counted by bisection in
    the whole column, sorted once, instead of a scan of the table after every ANALYZE."""
    below = [bisect_left(b_sorted, x) for x in bounds]
    buckets = len(bounds) - 1
    return sum(abs((below[i] - below[i - 1]) / len(b_sorted) * buckets - 1) for i in range(1, len(bounds))) / buckets


def _truth(env: StudyEnv, table: str) -> dict:
    """The whole table's statistics, computed once per table on the source."""
    if table not in env.state.truth:
        t = sql.Identifier(table)
        src = _source(env)
        n, nd_a, null_c = src.execute(sql.SQL(
            "SELECT count(*), count(DISTINCT a), avg((c IS NULL)::int) FROM {}").format(t)).fetchone()
        freq = dict(src.execute(sql.SQL("SELECT c, count(*)::float8 / %s FROM {} WHERE c IS NOT NULL "
                                        "GROUP BY c").format(t), (n,)).fetchall())
        env.state.truth[table] = {"rows": n, "nd_a": nd_a, "null_c": float(null_c), "freq_c": freq,
                                     "b_sorted": sorted_column(src, table, "b")}
    return env.state.truth[table]


def sorted_column(conn: psycopg.Connection, table: str, column: str) -> array:
    """A float8 column's non-NULL values in order, COPY'd out as text chunk by chunk (float8's
    text round-trips exactly): one array_agg of them fails past about 100M rows, a value being
    limited to 1 GB."""
    out, rest = array("d"), b""
    query = sql.SQL("COPY (SELECT {c} FROM {t} WHERE {c} IS NOT NULL ORDER BY {c}) TO STDOUT").format(
        c=sql.Identifier(column), t=sql.Identifier(table))
    with conn.cursor().copy(query) as copy:
        for chunk in copy:
            data = rest + bytes(chunk)
            cut = data.rfind(b"\n") + 1   # a chunk may end inside a line
            out.extend(map(float, data[:cut].split()))
            rest = data[cut:]
    out.extend(map(float, rest.split()))
    return out


def _statements_missing(conn: psycopg.Connection, db: str) -> str | None:
    """Why the source's database `db` cannot give its pg_stat_statements (None: it can)."""
    try:
        read_statements(conn, conn.info.server_version, [db], with_text=False)
    except (Unavailable, psycopg.Error) as e:
        return reason(e)
    return None


def _statements(env: StudyEnv, with_text: bool) -> dict:
    """The source database's pg_stat_statements entries, read on its kept session."""
    conn = _source(env)
    return read_statements(conn, conn.info.server_version, [env.state.source.dbname(SOURCE_DB)], with_text)


def _sampling_modes(options: StudyOptions) -> list[str]:
    """The analyze_sampling modes the run asks of postgres_fdw (16+): all but local and off."""
    if "analyze" not in options.dims["test"]:
        return []
    return [m for m in options.dims["analyze_sampling"] if m not in ("local", "off")]


def _through_fdw(case: Case) -> bool:
    """Whether the case's query or ANALYZE runs on the external server, through a foreign table."""
    return case["access"] == "fdw" if case["test"] == "sampling" else case["analyze_sampling"] != "local"


def _source(env: StudyEnv) -> psycopg.Connection:
    return _connection(env, env.state.source, SOURCE_DB)


def _connection(env: StudyEnv, cluster: Server, db: str) -> psycopg.Connection:
    """One connection per database, kept: connection set-up is not what is measured."""
    return env.kept_connection((cluster.name, db), lambda: cluster.connect(db))
