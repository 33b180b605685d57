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

Either role may be the user's server (--server local=DSN, remote=DSN): the tables go into a
database of ours there, and every client, psql's reference too, connects by the DSN (its TLS
settings included; the password by PGPASSFILE, servers/user.py). We have no socket of our own on a
user server, so it serves its DSN's transport only (refine(): the other is refused when asked for,
left out otherwise).

Every measurement is one run of a client, as the seed's driver function ran one command: its
`duration_ms` is the command's wall time, process start included (the JVM's, the interpreter's);
what the seed could not show is kept beside it: the client's own connect, execute and fetch
times, its CPU (user, system) and peak resident set from the kernel (os.wait4), rows/s and MB/s.
Every client's rows, bytes and checksum (the sum of the hashes of COPY's text of every row: row
order does not matter) must equal psql's COPY of the same query (tools/psql_copy.py), computed
once before the first round: a client that returns other data fails the measurement, loudly.

The seed's analysis (its testcases, normalised durations and summaries) is report.py's, in
Python, read from the result model.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from ... import user_queries
from ...at_once import at_once
from ...tools.clients import check_jdbc_dsns, iteration_percentiles, require_clients, run_native_client
from ...datasets import seed003
from ...datasets.seed003 import DB, QUERIES
from ...errors import CaseError, UserError
from ...evidence import Watched, pooler as pooler_evidence
from ...matrix import Case, StudyOptions, cross
from ...report import Plot, Table
from ...results.model import StudyResult
from ...servers import guc, pgbouncer, tls, user
from ...servers.cluster import TCP_AUTH
from ...servers.paths import DIRECT, NetworkPath
from ...servers.topology import Server
from ...tools.psql_copy import CopyFailed, Reference, copy_reference
from ..base import Declared, Setup, StudyEnv, check_tls_given, evidence_on, latencies_with_direct, links_requested, \
    tls_values
from . import charts, pooled, report as study_report, spec
from .local import Target, local_targets, refine_local, say_local
from .spec import LOCAL_ROLE, REMOTE_ROLE, client_times, process_figures, query_rank, split_sqlstrat


@dataclass
class InterfacesState:
    """What prepare() makes for one major's measurements (StudyEnv.state)."""
    queries: dict[str, str]                     # name -> SQL: the seed's and the user's (--query)
    servers: dict[str, Server | None]           # role -> its server, None when no transport needs it
    targets: dict[tuple[str, str, str], Target]  # pooled.target_key -> where the clients connect
    reference: dict[str, Reference]             # query -> psql COPY's rows, bytes and checksum
    jvm_options: list[str]                      # --jvm-options, split as the jdbc client takes them
    outfile: str                                # the file the cases of destination "file" write
    pooler_counters: dict = field(default_factory=dict)   # a pooled case's PgBouncer counters before it


class Interfaces(Declared):
    vocabulary = spec.VOCABULARY

    # -- the matrix -------------------------------------------------------------------------
    def refine(self, options: StudyOptions, given: set[str]) -> StudyOptions:
        """A user server serves its DSN's transport only: the local role's other one is refused when
        --transport names it, left out otherwise (prepare() says so)."""
        pooled.check(options, given)
        dsns = user.from_stored(options.params)
        remote = dsns.get(REMOTE_ROLE)
        if remote is not None and "remote" in options.dims["transport"]:
            _check_remote(remote, options)
        check_tls_given(options, given)
        if tls.ON in tls_values(options) and set(options.dims["transport"]) == {"unix"}:
            raise UserError("--tls on: the unix transport has no TLS; add --transport tcp or remote, or leave "
                            "--tls out")
        if dsns and spec.tcp_auth(options) != TCP_AUTH[0]:
            raise UserError(f"--tcp-auth: your server (--server {', '.join(sorted(dsns))}) checks passwords as its "
                            "pg_hba.conf says, which pgpathbench never changes; leave --tcp-auth out")
        return refine_local(options, given)

    def cases(self, options: StudyOptions) -> list[Case]:
        require_clients(options.dims["interface"])
        requested = options.dims["latency"]
        each_only = {dim: options.params[p] for dim, p in spec.EACH_ONLY.items() if options.params.get(p)}
        dims = {**options.dims, "latency": latencies_with_direct(requested), "fetch": spec.fetch_values(options),
                "sqlstrat": sqlstrats(options)}
        if "pool_mode" in dims:
            dims["pool_mode"] = pooled.pool_modes(options)
        cases = cross(self.name, self.dimensions, dims, lambda d: spec.excluded(d, requested, each_only))
        if not cases:
            limits = "".join(f", connect per query runs only with {dim} {values} "
                             f"(--{spec.EACH_ONLY[dim].replace('_', '-')})" for dim, values in each_only.items())
            raise UserError("no cases left after exclusions: each interface has only its own methods (libpq: "
                            "normal,single-row,copy; odbc: normal,cursor; jdbc, psycopg: normal,cursor,copy), "
                            f"jdbc has no unix socket{limits}; widen --interface, --method or --transport")
        return cases

    def path(self, case: Case) -> NetworkPath | None:
        return spec.case_path(case)

    def check(self, options: StudyOptions, bins) -> None:
        super().check(options, bins)
        pooled.requires(options)

    def check_user_servers(self, options: StudyOptions, facts, dsns) -> None:
        """The jdbc client connects by a user server's DSN: one it cannot map is refused now."""
        roles = {REMOTE_ROLE if c["transport"] == "remote" else LOCAL_ROLE
                 for c in self.cases(options) if c["interface"] == "jdbc"}
        check_jdbc_dsns(roles, dsns, "--interface")

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> Setup:
        p, transports = env.options.params, env.options.dims["transport"]
        queries = {**QUERIES, **user_queries.given(p)}
        t0 = time.monotonic()
        auth, with_tls = spec.tcp_auth(env.options), tls.ON in tls_values(env.options)
        local = env.servers.server(LOCAL_ROLE, tcp_auth=auth, tls=with_tls and "tcp" in transports) \
            if {"unix", "tcp"} & set(transports) else None
        # The seed's other machine: a second server, on its own network stack when we can make one.
        remote = env.servers.server(REMOTE_ROLE, remote=True, bandwidth_kbit=p.get("bandwidth"), tcp_auth=auth,
                                    tls=with_tls) if "remote" in transports else None
        servers = [c for c in (local, remote) if c is not None]
        env.log(f"servers up in {time.monotonic() - t0:.1f} s")
        if local is not None:
            say_local(env, local)
        sizes = self._load(env, servers, queries)
        targets = self._targets(env, local, remote)
        targets.update(pooled.targets(env, {LOCAL_ROLE: local, REMOTE_ROLE: remote}))
        t0 = time.monotonic()
        # each server by its own conninfo: a managed one's socket, a user's DSN (as its clients connect)
        reference = self._references(env, [Target(s.conninfo(DB), s) for s in servers], queries)
        env.log(f"reference checksums (psql COPY) in {time.monotonic() - t0:.1f} s")
        versions = self._client_versions(env, targets)
        out_dir = env.servers.root
        out_dir.mkdir(parents=True, exist_ok=True)
        env.state = InterfacesState(queries, {LOCAL_ROLE: local, REMOTE_ROLE: remote}, targets, reference,
                                    shlex.split(p["jvm_options"]), str(out_dir / f"iftest-{env.major}.out"))
        facts = {
            "database": DB, "tables": {t: {"rows": n, "copy_bytes": seed003.row_bytes(t, n)} for t, n in sizes.items()},
            "queries": {q: queries[q] for q in reference}, "iterations_sql001": p["iterations"],
            "reference": {q: r.to_json() for q, r in reference.items()},
            "jvm_options": p["jvm_options"], "cursor_fetch": [int(f) for f in spec.fetch_values(env.options)[:-1]],
            # no password: see Target
            "conninfo": {f"{t}_{lat}" + (f"_pgbouncer-{hop}" if hop != "direct" else ""): tg.conninfo
                         for (t, lat, hop), tg in targets.items()},
            "outfile": env.state.outfile, "remote": _remote_fact(remote),
            "duration": "wall time of the client command (os.wait4), process start included, as the seed's",
        }
        if any(hop != "direct" for _t, _l, hop in targets):
            facts["excluded"] = spec.EXCLUDED
            versions["pgbouncer"] = pgbouncer.version()
        return Setup(tools={(k if k == "pgbouncer" else f"{k} client"): v for k, v in versions.items()}, facts=facts)

    @staticmethod
    def _queries(env: StudyEnv) -> list[str]:
        return sorted({split_sqlstrat(s)[0] for s in sqlstrats(env.options)}, key=query_rank)

    def _load(self, env: StudyEnv, servers: list[Server], texts: dict[str, str]) -> dict[str, int]:
        """The seed's tables the queries read, on every server at once (in a database of ours on a
        user's); {table: rows}."""
        t0 = time.monotonic()
        p = env.options.params
        rows = {"t50k": p["t50k_rows"], "t10m": p["t10m_rows"]}
        queries = self._queries(env)
        named = {t for q in queries if q not in QUERIES for t in user_queries.tables_named(texts[q], rows)}
        sizes = {t: rows[t] for t in sorted({*seed003.tables_of([q for q in queries if q in QUERIES]), *named})}
        # a user server's disk is its own: the workspace holds managed servers' data only
        seed003.check_disk(sizes, sum(s.managed for s in servers), env.servers.workspace.free_bytes())
        at_once(lambda cluster: seed003.load(cluster, sizes), servers)
        env.log(f"tables {', '.join(f'{t} ({n:,} rows)' for t, n in sizes.items())} loaded in "
                f"{time.monotonic() - t0:.1f} s on {len(servers)} server(s)")
        return sizes

    @staticmethod
    def _targets(env: StudyEnv, local: Server | None, remote: Server | None) -> dict[tuple[str, str, str], Target]:
        """(transport, latency) -> where the clients connect, by the server's own conninfo (a user's: its
        DSN, TLS settings included) over the transports it serves; every TCP path is a link, probed
        every round."""
        targets = {(t, DIRECT, "direct"): tg for t, tg in (local_targets(env, local) if local else {}).items()}
        if remote is not None:
            for latency in env.options.dims["latency"]:
                link = env.servers.path(spec.network_path("remote", latency, env.major), remote,
                                        env.options.params.get("bandwidth"))
                targets[("remote", latency, "direct")] = Target(link.conninfo(remote.conninfo(DB, "tcp")), remote)
        return targets

    def _references(self, env: StudyEnv, targets: list[Target], texts: dict[str, str]) -> dict[str, Reference]:
        """psql's COPY of every query on every server (through a target of each, as a client connects):
        their data must be the same."""
        psql, timeout = env.bins.path("psql"), env.options.params["timeout"]
        reference: dict[str, Reference] = {}
        for query in self._queries(env):
            refs = [self._reference(psql, t, query, texts[query], timeout) for t in targets]
            if any(r != refs[0] for r in refs):
                raise UserError(f"{query}: the servers' tables differ (psql COPY): " + "; ".join(
                    f"{t.server.name} {r.brief()}" for t, r in zip(targets, refs)))
            reference[query] = refs[0]
        return reference

    @staticmethod
    def _reference(psql, target: Target, query: str, sql: str, timeout: float) -> Reference:
        """psql's COPY of a query; a query of the user's runs read-only, and an error of it is the user's."""
        if query in QUERIES:
            return copy_reference(psql, target.conninfo, sql, timeout, env=target.env())
        try:
            return copy_reference(psql, target.conninfo, sql, timeout, read_only=True, env=target.env())
        except CopyFailed as e:
            raise UserError(f"--query {query}: psql COPY of it on {target.server.name}: {e.detail}; give a query "
                            "that only reads (tables t50k, t10m of the database iftest) and returns rows") from None

    def _client_versions(self, env: StudyEnv, targets: dict[tuple[str, str, str], Target]) -> dict[str, str]:
        """Every client once (select 1): its version, and a failure now rather than in every case."""
        first: dict[str, Case] = {}   # each client's first case, one with TLS if it has one (verified now)
        for case in self.cases(env.options):
            if case["interface"] not in first or case.get("tls") == tls.ON != first[case["interface"]].get("tls"):
                first[case["interface"]] = case
        versions = {}
        jvm = shlex.split(env.options.params["jvm_options"])
        for iface, case in first.items():
            target = targets[pooled.target_key(case)]
            try:
                versions[iface] = run_native_client(iface, case_conninfo(env, target, case), "select 1", timeout=120,
                                                    jvm_options=jvm, env=target.env()).output["version"]
            except CaseError as e:
                raise UserError(f"--interface: the {iface} client does not work here: {e}") from None
        return versions

    # -- one measurement --------------------------------------------------------------------
    def watched(self, env: StudyEnv, case: Case) -> list[Watched]:
        role = REMOTE_ROLE if case["transport"] == "remote" else LOCAL_ROLE
        return [env.state.servers[role].watched(role, DB)]

    def before_measure(self, env: StudyEnv, case: Case) -> None:
        if evidence_on(env.options):
            env.state.pooler_counters = pooler_evidence.snapshot(pooled.poolers_of(env, case))

    def evidence_metrics(self, env: StudyEnv, case: Case, metrics, evidence: dict) -> dict:
        """The counters of the case's PgBouncer since before_measure(), when it crosses one."""
        if not evidence_on(env.options):
            return {}
        return pooler_evidence.collect(pooled.poolers_of(env, case), env.state.pooler_counters, evidence)

    def measure(self, env: StudyEnv, case: Case) -> dict:
        p, st = env.options.params, env.state
        iface = case["interface"]
        query, strategy = split_sqlstrat(case["sqlstrat"])
        printfrac, dest = case["output"].split(":")
        iterations = p["iterations"] if query == "sql001" else 1
        mode = f"cursor:{case['fetch']}" if case["method"] == "cursor" else case["method"]
        out = st.outfile if dest == "file" else "/dev/null"
        written = None
        target = st.targets[pooled.target_key(case)]
        # with TLS in the run, every case's connections are checked (a pooler's: both legs)
        with_tls = st.servers[REMOTE_ROLE if case["transport"] == "remote" else LOCAL_ROLE].tls
        log_offset = tls.log_offset(target.server.logfile) if with_tls else None
        try:
            run = run_native_client(iface, case_conninfo(env, target, case), st.queries[query], mode=mode,
                                    keep=strategy == "once",
                                    iterations=iterations, print_rows=printfrac == "p-all", dest=out,
                                    timeout=p["timeout"], jvm_options=st.jvm_options,
                                    env=target.env(guc.session(env, case)))
            if dest == "file":
                written = os.path.getsize(out)
        finally:
            if dest == "file":
                Path(out).unlink(missing_ok=True)
        o = run.output
        expected = st.reference[query].repeated(iterations)
        got = (o["rows"], o["bytes"], o["checksum"])
        if got != expected:
            raise CaseError(f"checksum mismatch: {iface} {mode} over {case['transport']} returned rows {got[0]}, "
                            f"bytes {got[1]}, checksum {got[2]} for {query} x {iterations}; psql COPY gives rows "
                            f"{expected[0]}, bytes {expected[1]}, checksum {expected[2]}")
        if written is not None and written != (o["bytes"] if printfrac == "p-all" else 0):
            raise CaseError(f"{iface} {mode} wrote {written} bytes to its file, not the {o['bytes']} it read")
        total_s = o["total_s"]
        negotiated = {} if log_offset is None else _negotiated(env, target.server, log_offset, case, iface)
        return {
            **process_figures(run), **client_times(o), "startup_ms": max(0.0, run.wall_s - total_s) * 1000,
            "rows": o["rows"], "bytes": o["bytes"], "iterations": o["iterations"], "checksum": o["checksum"],
            "rows_per_s": o["rows"] / total_s if total_s > 0 else None,
            "mb_per_s": o["bytes"] / 1e6 / total_s if total_s > 0 else None,
            "ms_per_iteration": total_s * 1000 / iterations,
            **(iteration_percentiles(o["iteration_us"]) if iterations > 1 else {}),
            "mode": mode, "version": o["version"], **negotiated,
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


def case_conninfo(env: StudyEnv, target: Target, case: Case) -> str:
    """The target's conninfo with the case's TLS options (servers/tls.py), over TCP to a managed server
    with TLS; as it is otherwise (a unix socket, a user server's DSN, a run without TLS)."""
    if target.server.tls is None or case["transport"] == "unix":
        return target.conninfo
    return tls.conninfo(target.conninfo, case.get("tls", tls.OFF), env.servers.root_cert)


def _negotiated(env: StudyEnv, server: Server, log_offset: int, case: Case, iface: str) -> dict[str, str]:
    """The TLS the client's connections negotiated, as the server logged them, and through a pooler its
    both legs' (the pooler's log, the server's pg_stat_ssl); CaseError when one of them is not the case's
    (the hop must be what the case says)."""
    case_tls = case.get("tls", tls.OFF)
    try:
        through = pooled.poolers_of(env, case).get(pooler_evidence.CLIENT_PREFIX)
        if through is not None:
            pooler, alias = through
            return pooler.legs(log_offset, alias, case_tls)
        seen = tls.connections_seen(server.logfile, log_offset, server.dbname(DB))
        return {"tls": tls.check_seen(seen, case_tls, f"the {iface} client")}
    except (OSError, ValueError, psycopg.Error) as e:
        raise CaseError(f"tls {case_tls}: {e}") from None


def _check_remote(remote: user.UserDsn, options: StudyOptions) -> None:
    """The remote role is rmt:tcp: a TCP DSN, reachable through an emulated link (on 127.0.0.1)."""
    if remote.over_socket:
        raise UserError("--server remote: its DSN names a unix socket, and the remote transport (rmt:tcp) is TCP; "
                        "give the server's host name or address")
    if links_requested(options) and remote.params.get("sslmode") == "verify-full":
        raise UserError("--latency/--bandwidth: an emulated link reaches your remote server at 127.0.0.1, a name "
                        "its certificate does not hold, so sslmode=verify-full fails there; give sslmode=verify-ca "
                        "in its DSN (the certificate still checked), or leave the link out")


def _remote_fact(remote: Server | None) -> str:
    if remote is None:
        return "none"
    if not remote.managed:
        return "your server (a database of ours there) with the same data"
    placed = getattr(remote, "network", None)   # a placed server's (servers/remote.py): its host
    return "a second managed server with the same data" + (
        f", in network namespace {remote.netns['netns']} (veth)" if remote.netns else
        f", on {placed} over SSH (--place)" if placed else ", on loopback")
