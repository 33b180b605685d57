"""file-fdw-tpch (seed 002): TPC-H on regular tables vs file_fdw foreign tables over the same
files, on one node and partitioned.

The seed ran TPC-H SF 10 on PostgreSQL 9.1 regular tables and on file_fdw foreign tables over
the '|' files, and the same on a one-worker CitusDB cluster with lineitem and orders in 4
blocks (all cores); no indexes; shared_buffers 2GB, work_mem 64MB; a warm-up, then three runs.

Here, four layouts, each on both storages (and Citus's columnar access method, when asked):

- `single`: one instance, regular tables and file_fdw tables, no parallel query (the seed's
  PostgreSQL column: one core per query).
- `partitioned`: lineitem and orders as partitioned tables of N range partitions on the order
  key (N = cores by default), in the parts tpchgen-cli writes (--parts N --part K): regular
  partitions, or file_fdw partitions, one per part file; parallel query on (cores - 1 workers
  and the leader), partitionwise join and aggregate on. The small tables are the single
  layout's.
- `postgres_fdw` (sharding through postgres_fdw; stored runs call it scaleout): N more managed
  instances each hold one part (regular tables and file_fdw tables over their part); a
  coordinator reaches them through postgres_fdw partitions with
  async_capable, so the N instances scan their parts at once; partitionwise join (with
  use_remote_estimate, else postgres_fdw's own estimate of a remote join is far too high) pushes
  the lineitem-orders join of a part down to its instance, and no nested loop on the
  coordinator (else the parameterized remote scans use_remote_estimate offers re-scan a whole
  part per outer row: minutes for Q17 and Q21 at SF 0.1). postgres_fdw cannot push a partial
  aggregate down, and a local partial aggregate per partition would make the scans run one
  after the other: partitionwise aggregate is off there. Its instances can run on other hosts
  (--place worker=NAME or workerK=NAME: placed.py), their part files shipped there.
- `citus`: a Citus coordinator and --workers worker nodes (citus.py): lineitem and orders
  distributed in N shards, the small tables reference tables; the seed's CitusDB column, on the
  engine (the coordinator merges what the shards' tasks computed, partial aggregates included).
  Its workers can run on other hosts too (--place citus_worker=NAME or citus_workerK=NAME).

A run with the citus layout or the columnar storage runs every managed server on the PostgreSQL
build that has Citus (servers/citus.py: pgpathbench's own 15.20 tree here), so that its layouts
are compared on one build; only the citus layout's nodes preload citus, the others create
citus_columnar alone, and only for the columnar storage (their regular baselines stay stock).

The stock layouts live in one database `tpch` of the instance `tpch` (the postgres_fdw layout's
coordinator too), in schemas named LAYOUT_STORAGE; a case's connection has search_path
LAYOUT_STORAGE, then single_STORAGE for the small tables. The citus layout's are in its own
cluster (its coordinator: managed, or the user's with --server coordinator=DSN). A file_fdw table has one extra, always empty, trailing
column, because every tpchgen line ends with '|'; regular tables are loaded without it.

With --server tpch=DSN the instance is the user's: a database of ours there, the regular storage
of the single layout only (user_role.py says why, and refuses the rest when named), the files
generated here and streamed to COPY FROM STDIN over the DSN.

Warm-up and answer checks happen in prepare(): every case runs once before the first round
(unrecorded, as the seed's warm-up run), and its rows are compared: regular, foreign and every
layout must return the same rows (exactly: PostgreSQL's numerics are exact), and at scale <= 1
they must agree with DuckDB run over the same files with the specification's own text (numbers
within 1e-6 relative). Any mismatch fails the run with the differing rows. Every measurement
then checks its rows' digest against the checked answer.

One measurement is one execution of one query on one storage and layout: the time from sending
it to having fetched every row (over the instance's unix socket; results are small). For the
scan-bound queries (Q1 and Q6 read lineitem only) of the foreign storage the bytes of the files
parsed are kept too: the parse rate is bytes over seconds, per core used.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, TypeVar

import psycopg

from ...datasets.tpch.answers import answer_digest
from ...datasets.tpch.files import TpchFiles, parse_rate, scale_text, tpchgen_path, tpchgen_version
from ...datasets.tpch.queries import SCAN_QUERIES
from ...errors import CaseError, UserError, reason
from ...evidence import Watched, flush_statistics
from ...matrix import Case, cross
from ...report import Plot, Table
from ...results.model import StudyResult
from ...servers import guc
from ...servers.binaries import PgBinaries
from ...servers.fdw import set_case_options
from ...servers.paths import DIRECT, NetworkPath
from ..base import Declared, Setup, StudyEnv, StudyOptions
from . import checks, citus, placed, report, spec, user_role
from .loading import load_and_analyze  # noqa: F401 (bench/ imports)
from .nodes import Nodes, start_servers
from .objects import create_objects, load_tasks, worker_servers  # noqa: F401 (bench/ imports)
from .shape import Shape
from .spec import (CITUS, CORES, DB, POSTGRES_FDW_OPTIONS, canonical, cluster_settings, disk_needed, layout_settings,
                   scan_cores, search_path)

T = TypeVar("T")


@dataclass
class FileFdwTpchState:
    """What prepare() makes for one major's measurements (StudyEnv.state): the servers and the
    run's shape first, then what the warm-up found, and the sorts each case's plan did."""
    nodes: Nodes
    shape: Shape
    plans: dict[tuple[str, str, str], dict] = field(default_factory=dict)   # (query, layout, storage) -> plan facts
    answers: dict[str, str] = field(default_factory=dict)        # query -> its checked answer's digest
    sizes: dict[str, int] = field(default_factory=dict)          # table -> bytes of its file
    citus_sizes: dict[str, int] = field(default_factory=dict)    # table -> bytes of its shards' files
    sort_methods: dict[str, str] = field(default_factory=dict)   # case id -> its plan's sorts (--set)


class FileFdwTpch(Declared):
    vocabulary = spec.VOCABULARY

    def refine(self, options: StudyOptions, given: set[str]) -> StudyOptions:
        """What user servers run (user_role.py); Citus for PostgreSQL 15 only."""
        return user_role.refine(options, given)

    def check(self, options: StudyOptions, bins: PgBinaries) -> None:
        super().check(options, bins)
        placed.check(options)                 # workers on hosts (--place)
        self.server_binaries(options, bins)   # Citus there, before anything is written

    def server_binaries(self, options: StudyOptions, bins: PgBinaries) -> PgBinaries:
        """The build with Citus (servers/citus.py) when a managed server runs citus or columnar."""
        return user_role.server_binaries(options, bins)

    def check_user_servers(self, options: StudyOptions, facts, dsns) -> None:
        """A user's Citus cluster: citus_columnar for the columnar storage, and workers in pg_dist_node."""
        if user_role.COORDINATOR in facts:
            user_role.check_coordinator(options, facts[user_role.COORDINATOR], dsns[user_role.COORDINATOR])

    def cases(self, options: StudyOptions) -> list[Case]:
        dims = {**options.dims, "queries": Shape.of(options).queries}
        return cross(self.name, self.dimensions, dims)

    def path(self, case: Case) -> NetworkPath | None:
        return None   # the instance's unix socket; the other nodes on loopback, or at their hosts (--place)

    def probe(self, env: StudyEnv) -> list[dict]:
        """The FDW hop to each placed worker (placed.py), every round."""
        workers = placed.placed_workers(env.options)
        return placed.probes(env.state.nodes, workers) if workers and env.state is not None else []

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> Setup:
        shape = Shape.of(env.options)
        ws = env.servers.workspace
        files = TpchFiles(ws.root / "data" / "tpch", shape.scale)
        user_role.say(env.log, env.options)
        here = dataclasses.replace(shape, layouts=tuple(la for la in shape.layouts
                                                        if user_role.managed(env.options, la)))
        need, free = check_disk(ws, files, here, managed=bool(here.layouts))
        env.log(f"TPC-H SF {scale_text(shape.scale)}, layouts {','.join(shape.layouts)}: needs about "
                f"{need / 1e9:.1f} GB of disk, {free / 1e9:.0f} GB free")
        tool = tpchgen_path()
        tools = {"tpchgen-cli": tpchgen_version(tool)}
        # The files are generated while the servers start: both are fixed costs of a first run.
        generated = in_background(generate, ws.root, files, shape, tool, env.log)
        nodes = start_servers(env, shape)
        for role, server in (("tpch", nodes.main), ("coordinator", nodes.citus and nodes.citus.coordinator)):
            if server is not None and not server.managed:   # a real network: its round trip probed every round
                env.servers.path(NetworkPath(env.major, role, DIRECT), server)
        facts: dict = {"scale": shape.scale, "partitions": shape.partitions, "layouts": list(shape.layouts),
                       "storages": list(shape.storages),
                       "queries": list(shape.queries), "cores": CORES, **generated()}
        if nodes.main is not None:
            placed.check_room(nodes, files, shape)
            read_at = create_objects(nodes.main, nodes.fdw_workers, files, shape)
            if read_at:
                facts["worker_files"] = read_at
        if nodes.citus is not None:
            citus.create_objects(nodes.citus, shape)
        facts.update(load_and_analyze(nodes, files, shape, env.log))
        env.state = FileFdwTpchState(nodes, shape)
        conns = {side: env.kept_connection(side, lambda side=side: connect(nodes, *side, shape.timeout))
                 for side in shape.sides}
        facts["settings"] = settings_facts(shape, nodes)
        plans = checks.explain(conns, shape)
        t0 = time.monotonic()
        answers, duck, digests = checks.warm_up_and_check(conns, files, shape, plans)
        facts.update(answers=answers, duckdb=duck, warmup_and_check_s=round(time.monotonic() - t0, 3))
        env.log(warmup_line(len(shape.queries) * len(shape.sides), facts["warmup_and_check_s"], answers, duck))
        if duck.get("checked"):
            tools["duckdb"] = duck["version"]
        if nodes.citus is not None:
            facts["citus"] = {**citus.facts(nodes.citus, shape),
                              "links": citus.links(conns[(CITUS, shape.storages[0])])}
        if shape.columnar:
            facts["reads"] = checks.reads(conns, shape, plans)
        facts["plans"] = {f"{q}:{st}:{la}": v for (q, la, st), v in plans.items()}
        env.state = dataclasses.replace(env.state, plans=plans, answers=digests, sizes=files.sizes(),
                                        citus_sizes=citus.file_sizes(facts.get("citus") or {}))
        return Setup(tools, facts)

    # -- one measurement --------------------------------------------------------------------
    def watched(self, env: StudyEnv, case: Case) -> list[Watched]:
        """The coordinator of the case's layout, and the workers its tasks or foreign tables reach."""
        return env.state.nodes.watched(case["layout"])

    def before_measure(self, env: StudyEnv, case: Case) -> None:
        """The case's --set session settings on its side's kept connection (SET), and once per case
        the sorts its plan does under them (EXPLAIN ANALYZE: the evidence that they took effect)."""
        conn = side_connection(env, case)
        guc.set_session(conn, env, case)
        nodes, shape = env.state.nodes, env.state.shape
        if canonical(case["layout"]) == "postgres_fdw":   # and on the workers' sessions postgres_fdw opens
            set_case_options(env, case, nodes.main, DB, worker_servers(len(nodes.fdw_workers)),
                             kept=[side_connection(env, {"layout": case["layout"], "storage": st})
                                   for st in shape.storages])
        sorts = env.state.sort_methods
        if case.knobs(guc.FAMILY) and case.case_id not in sorts:
            try:
                sorts[case.case_id] = checks.sort_methods(conn, shape.text(case["queries"]))
            except psycopg.Error as e:
                raise CaseError(f"EXPLAIN ANALYZE: {refusal(e, shape.timeout)}") from None

    def measure(self, env: StudyEnv, case: Case) -> dict:
        st, shape = env.state, env.state.shape
        q, storage, layout = case["queries"], case["storage"], canonical(case["layout"])
        plan = st.plans[(q, layout, storage)]
        if "refused" in plan:
            raise CaseError(plan["refused"])
        conn = side_connection(env, case)
        try:
            t0 = time.perf_counter()
            rows = conn.execute(shape.text(q)).fetchall()
            seconds = time.perf_counter() - t0
            flush_statistics(conn)   # a kept session: its statistics are the evidence's now, not in 10 s
        except psycopg.Error as e:
            raise CaseError(refusal(e, shape.timeout)) from None
        digest = answer_digest(rows)
        expected = st.answers.get(q)
        if expected is not None and digest != expected:
            raise CaseError(f"wrong answer: {len(rows)} rows, digest {digest}, checked answer {expected}")
        workers = plan["workers"]
        metrics = {"duration_ms": round(seconds * 1000, 3), "rows": len(rows), "answer": digest,
                   "plan_workers": workers}
        if case.case_id in st.sort_methods:
            metrics["sort_methods"] = st.sort_methods[case.case_id]
        if storage == "foreign" and q in SCAN_QUERIES:
            sizes = st.citus_sizes if layout == CITUS else st.sizes   # its shards' files, on citus
            metrics.update(scan_metrics(sizes[SCAN_QUERIES[q]], seconds, scan_cores(layout, workers,
                                                                                          shape.partitions)))
        return metrics

    # -- the report -------------------------------------------------------------------------
    def report(self, result: StudyResult) -> list[Table]:
        return report.tables(result)

    def plots(self, result: StudyResult) -> list[Plot]:
        return report.plots(result)


def scan_metrics(nbytes: int, seconds: float, cores: int) -> dict:
    """A file_fdw scan's parse rate: the file's bytes over the query's time, per core."""
    rate, per_core = parse_rate(nbytes, seconds, cores)
    return {"bytes_scanned": nbytes, "scan_cores": cores, "mb_per_s": round(rate, 2),
            "mb_per_s_per_core": round(per_core, 2)}


def warmup_line(cases: int, seconds: float, answers: dict, duck: dict) -> str:
    """The warm-up's line; the cases it could not finish (a timeout, temp_file_limit) are named:
    their answers were not checked, and their measurements will most likely fail alike."""
    unfinished = [f"{q} {why}" for q, a in answers.items() for why in a["unchecked"]]
    agree = "every answer that finished agrees" if unfinished else "every answer agrees"
    return (f"warm-up run and answer checks of {cases} cases in {seconds:.1f} s: {agree}"
            + (f" (and with DuckDB {duck['version']})" if duck.get("checked") else "")
            + (f"; not finished, so not checked: {'; '.join(unfinished)}" if unfinished else ""))


def check_disk(ws, files: TpchFiles, shape: Shape, managed: bool = True) -> tuple[float, float]:
    """Not managed: the tables' disk is the user server's; only the files count here."""
    n = shape.partitions
    need = disk_needed(shape.scale, shape.layouts, files.complete(), files.complete(n), n, managed, shape.workers,
                       shape.columnar)
    free = ws.free_bytes()
    if need > free:
        raise UserError(f"--scale: TPC-H SF {scale_text(shape.scale)} with layouts {','.join(shape.layouts)} needs "
                        f"about {need / 1e9:.0f} GB free in the workspace ({ws.root}), {free / 1e9:.0f} GB are; "
                        "free some space, use --workspace elsewhere, a smaller --scale or fewer --layout")
    return need, free


def in_background(fn: Callable[..., T], *args) -> Callable[[], T]:
    """fn(*args) on a daemon thread; the returned call waits for its result (or raises its error).
    An interrupt never waits for it: at exit its children die with us (PR_SET_PDEATHSIG)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, fn(*args)))
        except BaseException as e:   # handed to the caller, raised in its thread
            outcome.append((False, e))

    thread = threading.Thread(target=run, name=f"tpch-{fn.__name__}", daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value
    return result


def generate(root, files: TpchFiles, shape: Shape, tool: str, log) -> dict:
    """The files, generated once per scale (and per number of parts), then reused."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data").chmod(0o755)
    facts = {"generate": files.ensure(tool, log)}
    if shape.needs_parts:
        facts["generate_parts"] = files.ensure_parts(tool, shape.partitions, log)
    facts.update(data_dir=str(files.dir), files=files.sizes())
    if shape.needs_parts:
        facts["part_files"] = files.part_sizes(shape.partitions)
    return facts


def refusal(e: psycopg.Error, timeout: int) -> str:
    """Why the server did not run a case's query: one line for the measurement's error."""
    if isinstance(e, psycopg.errors.QueryCanceled):
        return f"statement timeout ({timeout} s)"
    if isinstance(e, psycopg.errors.ConfigurationLimitExceeded):
        return (f"{reason(e)}: more than this run's share of the disk for temporary files per process; "
                "--set temp_file_limit=SIZE raises it, if the disk holds it")
    return reason(e)


def side_connection(env: StudyEnv, case: Mapping[str, str]) -> psycopg.Connection:
    """The kept connection of the case's (layout, storage), made again if it was lost."""
    st, key = env.state, (canonical(case["layout"]), case["storage"])
    try:
        return env.kept_connection(key, lambda: connect(st.nodes, *key, st.shape.timeout))
    except psycopg.Error as e:
        raise CaseError(f"cannot connect: {str(e).strip()}") from None


def session_search_path(nodes: Nodes, layout: str, storage: str) -> str:
    return nodes.citus.schema(storage) if layout == CITUS else search_path(layout, storage)


def connect(nodes: Nodes, layout: str, storage: str, timeout: int) -> psycopg.Connection:
    server = nodes.server(layout)
    conn = nodes.citus.connect() if layout == CITUS else server.connect(DB)
    conn.execute(f"SET search_path = {session_search_path(nodes, layout, storage)}")
    session = {} if server.managed else user_role.SESSION_SETTINGS   # a managed server has them already
    # EXPLAIN shows every task of a Citus plan (each shard's), not one of them.
    citus_explain = {"citus.explain_all_tasks": "on"} if layout == CITUS else {}
    for k, v in {**session, **layout_settings(layout), **citus_explain}.items():
        conn.execute(f"SET {k} = '{v}'")
    conn.execute(f"SET statement_timeout = '{int(timeout)}s'")
    return conn


def settings_facts(shape: Shape, nodes: Nodes) -> dict:
    managed = all(s.managed for s in (nodes.main, nodes.citus and nodes.citus.coordinator) if s is not None)
    facts = {"cluster": cluster_settings(shape.scale, shape.partitions) if managed else {},
             "layouts": {la: layout_settings(la) for la in shape.layouts},
             "search_path": {f"{la}/{st}": session_search_path(nodes, la, st) for la, st in shape.sides}}
    if not managed:   # the server's own settings are in its fingerprint
        facts["session"] = user_role.SESSION_SETTINGS
    if nodes.fdw_workers:
        at = ", ".join(dict.fromkeys(w.tcp_host for w in nodes.fdw_workers))   # a placed worker's: its host's
        facts["postgres_fdw"] = {**POSTGRES_FDW_OPTIONS, "transport": f"TCP {at}, scram-sha-256"}
    return facts
