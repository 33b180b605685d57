"""interfaces (seed 003, Joe Conway's "Postgres Interface Performance"): client interfaces and
their fetch methods, over each transport, connecting per query or once, printing or not.

As the seed built it: one command-line client per interface, in its native language, with the
same structure and command line (clients/CONTRACT.md: pgpb_libpq in C, pgpb_odbc in C over
unixODBC and psqlODBC, pgpb-jdbc.jar in Java over pgjdbc; and, beyond the seed, pgpb_psycopg
in Python over psycopg 3), run once per measurement against the seed's tables t50k and t10m
(datasets/seed003.py). The driver tables are dimensions (spec.py). Exclusions as in the seed:
pgjdbc has no unix sockets; each interface has only its own methods. The seed's "remote" was
another machine on its LAN; here it is a second managed server (`remote`, the same data), on its
own network stack when we are root (a namespace behind a veth), reached over TCP directly
("0ms") or through an emulated link per --latency. The local server (`local`) serves the unix
socket and loopback TCP. Both paths' round trips are probed every round.

Every measurement is one run of a client, as the seed's driver function ran one command: its
`duration_ms` is the command's wall time, process start included (the JVM's, the interpreter's);
what the seed could not show is kept beside it: the client's own connect, execute and fetch
times, its CPU (user, system) and peak resident set from the kernel (os.wait4), rows/s and MB/s.
Every client's rows, bytes and checksum (the sum of the FNV-1a of COPY's text of every row: row
order does not matter) must equal psql's COPY of the same query (tools/psql_copy.py), computed
once before the first round: a client that returns other data fails the measurement, loudly.

The seed's analysis (its testcases, normalised durations and summaries) is report.py's, in
Python, read from the result model.
"""

from __future__ import annotations

import os
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ... import user_queries
from ...clients import iteration_percentiles, require_clients, run_native_client, session_env
from ...datasets import seed003
from ...datasets.seed003 import DB, QUERIES
from ...errors import CaseError, UserError
from ...evidence import Watched
from ...matrix import Case, cross
from ...report import Plot, Table
from ...results.model import StudyResult
from ...servers import guc
from ...servers.cluster import Cluster
from ...servers.paths import DIRECT, NetworkPath
from ...tools.psql_copy import CopyFailed, Reference, copy_reference
from ..base import Declared, Setup, StudyEnv, StudyOptions, latencies_with_direct
from . import charts, report as study_report, spec
from .spec import LOCAL_ROLE, REMOTE_ROLE, client_times, process_figures, query_rank, split_sqlstrat


class Interfaces(Declared):
    vocabulary = spec.VOCABULARY

    # -- the matrix -------------------------------------------------------------------------
    def cases(self, options: StudyOptions) -> list[Case]:
        require_clients(options.dims["interface"])
        requested = options.dims["latency"]
        each_only = {dim: options.params[p] for dim, p in spec.EACH_ONLY.items() if options.params.get(p)}
        dims = {**options.dims, "latency": latencies_with_direct(requested), "fetch": spec.fetch_values(options),
                "sqlstrat": sqlstrats(options)}
        cases = cross(self.name, self.dimensions, dims, lambda d: spec.excluded(d, requested, each_only))
        if not cases:
            limits = "".join(f", connect per query runs only with {dim} {values} "
                             f"(--{spec.EACH_ONLY[dim].replace('_', '-')})" for dim, values in each_only.items())
            raise UserError("no cases left after exclusions: each interface has only its own methods (libpq: "
                            "normal,single-row,copy; odbc: normal,cursor; jdbc, psycopg: normal,cursor,copy), "
                            f"jdbc has no unix socket{limits}; widen --interface, --method or --transport")
        return cases

    def path(self, case: Case) -> NetworkPath | None:
        return spec.network_path(case["transport"], case["latency"], case["pg"])

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> Setup:
        p, transports = env.options.params, env.options.dims["transport"]
        env.state["queries"] = {**QUERIES, **user_queries.given(p)}
        t0 = time.monotonic()
        local = env.servers.cluster(LOCAL_ROLE) if {"unix", "tcp"} & set(transports) else None
        # The seed's other machine: a second server, on its own network stack when we can make one.
        remote = env.servers.cluster(REMOTE_ROLE, remote=True, bandwidth_kbit=p.get("bandwidth")) \
            if "remote" in transports else None
        servers = [c for c in (local, remote) if c is not None]
        env.log(f"servers up in {time.monotonic() - t0:.1f} s")
        sizes = self._load(env, servers)
        conninfo = self._conninfo(env, local, remote)
        t0 = time.monotonic()
        reference = self._references(env, servers)
        env.log(f"reference checksums (psql COPY) in {time.monotonic() - t0:.1f} s")
        servers_by_role = {LOCAL_ROLE: local, REMOTE_ROLE: remote}
        versions = self._client_versions(env, conninfo, servers_by_role)
        out_dir = env.servers.root
        out_dir.mkdir(parents=True, exist_ok=True)
        env.state.update(servers=servers_by_role, conninfo=conninfo, reference=reference,
                         jvm_options=shlex.split(p["jvm_options"]), outfile=str(out_dir / f"iftest-{env.major}.out"))
        facts = {
            "database": DB, "tables": {t: {"rows": n, "copy_bytes": seed003.row_bytes(t, n)} for t, n in sizes.items()},
            "queries": {q: env.state["queries"][q] for q in reference}, "iterations_sql001": p["iterations"],
            "reference": {q: r.to_json() for q, r in reference.items()},
            "jvm_options": p["jvm_options"], "cursor_fetch": [int(f) for f in spec.fetch_values(env.options)[:-1]],
            "conninfo": {f"{t}_{lat}": ci for (t, lat), ci in conninfo.items()},   # no password: see _client_env
            "outfile": env.state["outfile"],
            "remote": "a second managed server with the same data" + (
                f", in network namespace {remote.netns['netns']} (veth)" if remote is not None and remote.netns
                else ", on loopback" if remote is not None else ""),
            "duration": "wall time of the client command (os.wait4), process start included, as the seed's",
        }
        return Setup(tools={f"{iface} client": v for iface, v in versions.items()}, facts=facts)

    @staticmethod
    def _queries(env: StudyEnv) -> list[str]:
        return sorted({split_sqlstrat(s)[0] for s in sqlstrats(env.options)}, key=query_rank)

    def _load(self, env: StudyEnv, servers: list[Cluster]) -> dict[str, int]:
        """The seed's tables the queries read, on every server at once; {table: rows}."""
        t0 = time.monotonic()
        p = env.options.params
        rows = {"t50k": p["t50k_rows"], "t10m": p["t10m_rows"]}
        queries = self._queries(env)
        named = {t for q in queries if q not in QUERIES for t in user_queries.tables_named(env.state["queries"][q], rows)}
        sizes = {t: rows[t] for t in sorted({*seed003.tables_of([q for q in queries if q in QUERIES]), *named})}
        seed003.check_disk(sizes, len(servers), env.servers.workspace.free_bytes())
        with ThreadPoolExecutor(max_workers=len(servers)) as pool:
            list(pool.map(lambda cluster: seed003.load(cluster, sizes), servers))
        env.log(f"tables {', '.join(f'{t} ({n:,} rows)' for t, n in sizes.items())} loaded in "
                f"{time.monotonic() - t0:.1f} s on {len(servers)} server(s)")
        return sizes

    @staticmethod
    def _conninfo(env: StudyEnv, local: Cluster | None, remote: Cluster | None) -> dict[tuple[str, str], str]:
        """(transport, latency) -> the clients' conninfo; every TCP path is a link, probed every round."""
        conninfo: dict[tuple[str, str], str] = {}
        if local is not None:
            path = spec.network_path("tcp", DIRECT, env.major)
            conninfo[("unix", path.latency)] = local.conninfo(DB, "unix")
            conninfo[("tcp", path.latency)] = env.servers.path(path, local).conninfo(local.conninfo(DB, "tcp"))
        if remote is not None:
            for latency in env.options.dims["latency"]:
                link = env.servers.path(spec.network_path("remote", latency, env.major), remote,
                                        env.options.params.get("bandwidth"))
                conninfo[("remote", latency)] = link.conninfo(remote.conninfo(DB, "tcp"))
        return conninfo

    def _references(self, env: StudyEnv, servers: list[Cluster]) -> dict[str, Reference]:
        """psql's COPY of every query, on every server: their data must be the same."""
        psql, timeout = env.bins.path("psql"), env.options.params["timeout"]
        reference: dict[str, Reference] = {}
        for query in self._queries(env):
            refs = [self._reference(psql, c, query, env.state["queries"][query], timeout) for c in servers]
            if any(r != refs[0] for r in refs):
                raise UserError(f"{query}: the servers' tables differ (psql COPY): " + "; ".join(
                    f"{c.name} {r.brief()}" for c, r in zip(servers, refs)))
            reference[query] = refs[0]
        return reference

    @staticmethod
    def _reference(psql, cluster: Cluster, query: str, sql: str, timeout: float) -> Reference:
        """psql's COPY of a query; a query of the user's runs read-only, and an error of it is the user's."""
        if query in QUERIES:
            return copy_reference(psql, cluster.conninfo(DB), sql, timeout)
        try:
            return copy_reference(psql, cluster.conninfo(DB), sql, timeout, read_only=True)
        except CopyFailed as e:
            raise UserError(f"--query {query}: psql COPY of it on {cluster.name}: {e.detail}; give a query that "
                            "only reads (tables t50k, t10m of the database iftest) and returns rows") from None

    def _client_versions(self, env: StudyEnv, conninfo: dict[tuple[str, str], str],
                         servers: dict[str, Cluster | None]) -> dict[str, str]:
        """Every client once (select 1): its version, and a failure now rather than in every case."""
        paths: dict[str, tuple[str, str]] = {}
        for case in self.cases(env.options):
            paths.setdefault(case["interface"], (case["transport"], case["latency"]))
        versions = {}
        jvm = shlex.split(env.options.params["jvm_options"])
        for iface, path in paths.items():
            try:
                versions[iface] = run_native_client(iface, conninfo[path], "select 1", timeout=120, jvm_options=jvm,
                                                    env=_client_env(servers, path[0])).output["version"]
            except CaseError as e:
                raise UserError(f"--interface: the {iface} client does not work here: {e}") from None
        return versions

    # -- one measurement --------------------------------------------------------------------
    def watched(self, env: StudyEnv, case: Case) -> list[Watched]:
        role = REMOTE_ROLE if case["transport"] == "remote" else LOCAL_ROLE
        return [env.state["servers"][role].watched(role, DB)]

    def measure(self, env: StudyEnv, case: Case) -> dict:
        p, st = env.options.params, env.state
        iface = case["interface"]
        query, strategy = split_sqlstrat(case["sqlstrat"])
        printfrac, dest = case["output"].split(":")
        iterations = p["iterations"] if query == "sql001" else 1
        mode = f"cursor:{case['fetch']}" if case["method"] == "cursor" else case["method"]
        out = st["outfile"] if dest == "file" else "/dev/null"
        written = None
        try:
            run = run_native_client(iface, st["conninfo"][(case["transport"], case["latency"])], st["queries"][query],
                                    mode=mode, keep=strategy == "once", iterations=iterations,
                                    print_rows=printfrac == "p-all", dest=out, timeout=p["timeout"],
                                    jvm_options=st["jvm_options"], env=_client_env(st["servers"], case["transport"], guc.session(env, case)))
            if dest == "file":
                written = os.path.getsize(out)
        finally:
            if dest == "file":
                Path(out).unlink(missing_ok=True)
        o = run.output
        expected = st["reference"][query].repeated(iterations)
        got = (o["rows"], o["bytes"], o["checksum"])
        if got != expected:
            raise CaseError(f"checksum mismatch: {iface} {mode} over {case['transport']} returned rows {got[0]}, "
                            f"bytes {got[1]}, checksum {got[2]} for {query} x {iterations}; psql COPY gives rows "
                            f"{expected[0]}, bytes {expected[1]}, checksum {expected[2]}")
        if written is not None and written != (o["bytes"] if printfrac == "p-all" else 0):
            raise CaseError(f"{iface} {mode} wrote {written} bytes to its file, not the {o['bytes']} it read")
        total_s = o["total_s"]
        return {
            **process_figures(run), **client_times(o), "startup_ms": max(0.0, run.wall_s - total_s) * 1000,
            "rows": o["rows"], "bytes": o["bytes"], "iterations": o["iterations"], "checksum": o["checksum"],
            "rows_per_s": o["rows"] / total_s if total_s > 0 else None,
            "mb_per_s": o["bytes"] / 1e6 / total_s if total_s > 0 else None,
            "ms_per_iteration": total_s * 1000 / iterations,
            **(iteration_percentiles(o["iteration_us"]) if iterations > 1 else {}),
            "mode": mode, "version": o["version"],
        }

    # -- the report -------------------------------------------------------------------------
    def report(self, result: StudyResult) -> list[Table]:
        return study_report.tables(result)

    def plots(self, result: StudyResult) -> list[Plot]:
        return charts.plots(result)


def sqlstrats(options: StudyOptions) -> tuple[str, ...]:
    """The run's sqlstrat values: --sqlstrat's, and NAME:once of each query of the user's it does not
    name; UserError (before anything is written) when it names a query nobody gave."""
    try:
        given = user_queries.given(options.params)
    except ValueError as e:
        raise UserError(f"--query-file: {e}") from None
    chosen = options.dims["sqlstrat"]
    unknown = [s for s in chosen if split_sqlstrat(s)[0] not in QUERIES and split_sqlstrat(s)[0] not in given]
    if unknown:
        name = split_sqlstrat(unknown[0])[0]
        raise UserError(f"--sqlstrat: '{unknown[0]}' names no query; give --query {name}=SQL or "
                        f"--query-file {name}=FILE, or choose from {','.join(spec.SQLSTRATS)}")
    return spec.user_sqlstrats(chosen, given)


def _client_env(servers: dict[str, Cluster | None], transport: str,
                settings: dict[str, str] | None = None) -> dict[str, str]:
    """A client's environment (session_env) with PGPASSFILE naming the password file of the server
    the transport reaches: the password never goes on the command line."""
    return servers[REMOTE_ROLE if transport == "remote" else LOCAL_ROLE].client_env(session_env(settings))
