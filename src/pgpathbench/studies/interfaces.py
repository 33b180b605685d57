"""interfaces (seed 003, Joe Conway's "Postgres Interface Performance"): client interfaces and
their fetch methods, over each transport, connecting per query or once, printing or not.

As the seed built it: one command-line client per interface, in its native language, with the
same structure and command line (clients/CONTRACT.md: pgpb_libpq in C, pgpb_odbc in C over
unixODBC and psqlODBC, pgpb-jdbc.jar in Java over pgjdbc; and, beyond the seed, pgpb_psycopg
in Python over psycopg 3), run once per measurement against the seed's tables t50k (50k rows of
id + nine 99-character texts) and t10m (10M rows of id + nine texts of 14-57 characters),
generated in the server with generate_series. The driver tables are dimensions:

  interfaces            --interface  libpq, odbc, jdbc, psycopg
  alternateclientcopy   --method     normal (acc-n), single-row / cursor:N (acc-a), copy (acc-y)
  conninfos             --transport  unix (lcl:ipc), tcp (lcl:tcp), remote (rmt:tcp), --latency
  sqlstratiter          --sqlstrat   sql001 (1 row by id, x --iterations), sql50k, sql10m;
                                     each (connect per query, -k 0) or once (-k 1)
  printfracdest         --output     p-none:null, p-all:null, p-all:file

Exclusions as in the seed: pgjdbc has no unix sockets; each interface has only its own methods
(libpq: normal, single-row, copy; ODBC: normal, cursor; JDBC and psycopg: normal, cursor, copy).
The seed's "remote" was another machine on its LAN; here it is a second managed server (`remote`,
the same data), on its own network stack when we are root (a namespace behind a veth), reached
over TCP directly ("0ms") or through an emulated link per --latency. The local server (`local`)
serves the unix socket and loopback TCP. Both paths' round trips are probed every round.

Every measurement is one run of a client, as the seed's driver function ran one command: its
`duration` is the command's wall time, process start included (the JVM's, the interpreter's);
what the seed could not show is kept beside it: the client's own connect, execute and fetch
times, its CPU (user, system) and peak resident set from the kernel (os.wait4), rows/s and MB/s.
Every client's rows, bytes and checksum (the sum of the FNV-1a of COPY's text of every row: row
order does not matter) must equal psql's COPY of the same query, computed once before the first
round: a client that returns other data fails the measurement, loudly. Every session of ours
reads the tables with synchronize_seqscans off (clients.session_env).

The analysis is the seed's, in SQL (store/schema.sql: the driver tables as views over each
run's cases, testcases, testresults, vtestresults, ifmeth_cat_results, loccomm_cat_results and
their summaries); the report computes the same figures (checked equal by the tests) and prints
them beside the published ones.
"""

from __future__ import annotations

import os
import shlex
import signal
import statistics
import subprocess
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .. import validate
from ..clients import CLIENTS, RowChecksum, repeated_checksum, require_clients, run_native_client, session_env
from ..errors import CaseError, UserError
from ..matrix import Case, Dimension, Parameter, Preset, cross
from ..procs import die_with_parent
from ..references import (INTERFACES_CANDIDATE_RANKING, INTERFACES_LOCATION_RANKING, INTERFACES_LOCCOMM_DURATION,
                          INTERFACES_SOURCE, INTERFACES_STRATEGY_AVG_DURATION, INTERFACES_TESTCASE_DURATION)
from ..report import Table
from ..stats import normalise, ratio_summary, summarise
from .base import (BANDWIDTH, DIRECT, LATENCY, PG, StudyEnv, StudyOptions, latencies_with_direct, measured_rtt,
                   pg_link_name)

DB = "iftest"                       # the seed's database
INTERFACES = ("libpq", "odbc", "jdbc", "psycopg")
SEED_IFNAME = {"libpq": "libpq", "odbc": "ODBC", "jdbc": "JDBC", "psycopg": "psycopg"}
METHODS = ("normal", "single-row", "cursor", "copy")
METHODS_OF = {"libpq": ("normal", "single-row", "copy"), "odbc": ("normal", "cursor"),
              "jdbc": ("normal", "cursor", "copy"), "psycopg": ("normal", "cursor", "copy")}
ACCDESC = {"normal": "acc-n", "single-row": "acc-a", "cursor": "acc-a", "copy": "acc-y"}
STREAMING = ("single-row", "cursor", "copy")     # methods that need not hold the whole result
TRANSPORTS = ("unix", "tcp", "remote")
QUERIES = {"sql001": "select * from t50k where id = 4242", "sql50k": "select * from t50k",
           "sql10m": "select * from t10m"}
QUERY_ORDER = tuple(QUERIES)
STRATEGIES = {"each": "0", "once": "1"}          # -> the client's -k (and the seed's connstrat)
SQLSTRATS = ("sql001:each", "sql50k:each", "sql10m:each", "sql001:once", "sql50k:once", "sql10m:once")
OUTPUTS = ("p-none:null", "p-all:null", "p-all:file")   # the seed's printfracdest
SEED_ID = 4242                      # sql001 reads this row, as the seed did
SEED_NUMITER = {"sql001": "50k", "sql50k": "001", "sql10m": "001"}
# The seed's load tables: nine text columns after id, digit i then a letter of a/b/c, these widths.
T50K_WIDTHS = (99,) * 9
T10M_WIDTHS = (14, 57, 15, 15, 57, 15, 15, 57, 15)
DEFAULT_JVM_OPTIONS = "-XX:+UseSerialGC -Xms32m -XX:MaxRAMPercentage=70"
PREFERRED_OUTPUT = "p-all:file"     # what the seed's summaries show


def seed_literal(i: int, width: int) -> str:
    """Column x{i} of the seed's tables: '1aaaa...', '2bbbb...', '3cccc...', '4aaaa...' of this width."""
    return str(i) + "abc"[(i - 1) % 3] * (width - 1)


def table_sql(name: str, rows: int) -> list[str]:
    """CREATE and INSERT ... generate_series of one of the seed's tables (t50k has its primary key:
    sql001's 1-row lookups took ~0.15 ms each in the seed, an index scan, not a scan of 50k rows)."""
    widths = T50K_WIDTHS if name == "t50k" else T10M_WIDTHS
    key = " PRIMARY KEY" if name == "t50k" else ""
    cols = ", ".join(f"x{i} text" for i in range(1, 10))
    values = ", ".join(f"'{seed_literal(i, w)}'" for i, w in enumerate(widths, 1))
    return [f"DROP TABLE IF EXISTS {name}",
            f"CREATE TABLE {name} (id int{key}, {cols})",
            f"INSERT INTO {name} SELECT id, {values} FROM generate_series(1, {rows}) AS t(id)",
            f"VACUUM (FREEZE, ANALYZE) {name}"]


def row_bytes(name: str, rows: int) -> int:
    """COPY text bytes of a seed table: digits of every id, the nine texts, ten separators per row."""
    digits = sum((min(rows, 10 ** d - 1) - 10 ** (d - 1) + 1) * d for d in range(1, len(str(rows)) + 1))
    return digits + rows * (sum(T50K_WIDTHS if name == "t50k" else T10M_WIDTHS) + 10)


def numiter_text(n: int) -> str:
    """The seed's way of writing a count: 1 -> '001', 50000 -> '50k', 10000000 -> '10m'."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:03d}" if n < 1000 else str(n)


def conndesc(transport: str, latency: str = DIRECT) -> str:
    """The seed's conninfos key: lcl:ipc, lcl:tcp, rmt:tcp; an emulated link is rmt+5ms:tcp."""
    if transport == "unix":
        return "lcl:ipc"
    if transport == "tcp":
        return "lcl:tcp"
    return "rmt:tcp" if latency == DIRECT else f"rmt+{latency}:tcp"


def split_sqlstrat(value: str) -> tuple[str, str]:
    query, strategy = value.split(":")
    return query, strategy


def parse_rows(minimum: int):
    def parse(v: str) -> int:
        return validate.rows(v, minimum)
    return parse


def parse_positive(what: str):
    def parse(v: str) -> int:
        return validate.whole(v, 1, None, what)
    return parse


def parse_jvm_options(v: str) -> str:
    opts = validate.shell_words(v)
    if any(not o.startswith("-") or o in ("-jar", "-cp", "-classpath") for o in opts):
        raise ValueError(f"'{v}': give JVM options only (each starting with '-', no -jar or -cp)")
    return " ".join(opts)


@dataclass(frozen=True)
class Reference:
    """What psql's COPY (SQL) TO STDOUT prints for one query: every client must return the same."""
    rows: int
    bytes: int
    checksum: str               # the contract's checksum of one iteration's rows

    def repeated(self, iterations: int) -> tuple[int, int, str]:
        """Rows, bytes and checksum of the query run `iterations` times (the checksum sums row hashes)."""
        return (self.rows * iterations, self.bytes * iterations,
                f"{repeated_checksum(int(self.checksum, 16), iterations):016x}")

    def brief(self) -> str:
        return f"rows {self.rows}, bytes {self.bytes}, checksum {self.checksum}"


def copy_reference(psql: Path, conninfo: str, sql: str, timeout: float = 3600) -> Reference:
    """psql -c 'COPY (sql) TO STDOUT', streamed and hashed here (never held whole)."""
    proc = subprocess.Popen([str(psql), "-X", "-q", "-d", conninfo, "-c", f"COPY ({sql}) TO STDOUT"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=session_env(),
                            preexec_fn=die_with_parent(signal.SIGKILL), start_new_session=True)
    checksum, rows, size = RowChecksum(), 0, 0
    deadline = time.monotonic() + timeout
    try:
        while chunk := proc.stdout.read1(1 << 20):
            checksum.update(chunk)
            rows += chunk.count(b"\n")
            size += len(chunk)
            if time.monotonic() > deadline:
                raise RuntimeError(f"psql COPY of '{sql}' took more than {timeout:g} s")
        err = proc.stderr.read().decode(errors="replace").strip()
        if proc.wait() != 0:
            raise RuntimeError(f"psql COPY of '{sql}' failed: {err}")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return Reference(rows, size, f"{checksum.value:016x}")


class Interfaces:
    name = "interfaces"
    title = "client interfaces and fetch methods (libpq, ODBC, JDBC, psycopg) by transport and strategy"
    seeds = ("003",)
    required_tools = ("initdb", "postgres", "psql")
    primary_metric = "duration_s"        # the seed's duration: the client command's wall time
    higher_is_better = False
    dimensions = {
        "interface": Dimension("interface", "client interface (seed 003's interfaces; psycopg is beyond the seed)",
                               INTERFACES),
        "method": Dimension("method", "fetch method (seed's alternateclientcopy): normal = acc-n; single-row "
                            "(libpq) or cursor (ODBC, JDBC, psycopg; --fetch rows per fetch) = acc-a; copy = acc-y",
                            METHODS),
        "transport": Dimension("transport", "seed's conninfos: unix = lcl:ipc (unix socket), tcp = lcl:tcp "
                               "(loopback), remote = rmt:tcp (a second server over TCP, through --latency links)",
                               TRANSPORTS),
        "sqlstrat": Dimension("sqlstrat", "seed's sqlstratiter: query (sql001 = 1 row by id, --iterations times; "
                              "sql50k = all of t50k; sql10m = all of t10m) and connection strategy (each = "
                              "connect per query, once = connect once)", SQLSTRATS),
        "output": Dimension("output", "seed's printfracdest: p-none:null (fetch, do not print), p-all:null "
                            "(print every row to /dev/null), p-all:file (print every row to a file)", OUTPUTS),
        "latency": LATENCY,
        "pg": PG,
    }
    parameters = {
        "iterations": Parameter("iterations", "how many times sql001 runs per measurement (seed: 50k)",
                                parse_rows(1)),
        "t50k_rows": Parameter("t50k_rows", f"rows of t50k (seed: 50k; at least {SEED_ID}, the row sql001 reads)",
                               parse_rows(SEED_ID)),
        "t10m_rows": Parameter("t10m_rows", "rows of t10m (seed: 10M)", parse_rows(1)),
        "fetch": Parameter("fetch", "rows per fetch of the cursor method", parse_positive("rows"), 1000),
        "jvm_options": Parameter("jvm_options", "JVM options of the JDBC client, as --jvm-options='...' (default: "
                                 "the serial collector, one thread as the client is, and a small initial heap, so "
                                 "that its resident set follows what the driver holds)", parse_jvm_options,
                                 DEFAULT_JVM_OPTIONS),
        "timeout": Parameter("timeout", "seconds one client run may take before it is killed",
                             parse_positive("seconds"), 3600),
        "bandwidth": BANDWIDTH,
    }
    presets = {
        "quick": Preset("quick", "sql001 x 50, t50k 5k rows, t10m 150k rows; connect each only for sql001; "
                        "p-all:file; 3 rounds (tests)", 3,
                        {"iterations": 50, "t50k_rows": 5000, "t10m_rows": 150_000},
                        {"sqlstrat": ("sql001:each", "sql001:once", "sql50k:once", "sql10m:once"),
                         "output": ("p-all:file",)}),
        "standard": Preset("standard", "sql001 x 1000, t50k 50k rows, t10m 1M rows; p-all:file; 3 rounds "
                           "(about half an hour)", 3,
                           {"iterations": 1000, "t50k_rows": 50_000, "t10m_rows": 1_000_000},
                           {"output": ("p-all:file",)}),
        "paper": Preset("paper", "the seed: sql001 x 50k, t50k 50k rows, t10m 10M rows, every output; "
                        "9 rounds (the seed's group size)", 9,
                        {"iterations": 50_000, "t50k_rows": 50_000, "t10m_rows": 10_000_000}),
    }
    default_dims = {"interface": INTERFACES, "method": METHODS, "transport": TRANSPORTS, "sqlstrat": SQLSTRATS,
                    "output": OUTPUTS, "latency": (DIRECT,), "pg": ("15",)}

    # -- the matrix -------------------------------------------------------------------------
    def cases(self, options: StudyOptions) -> list[Case]:
        require_clients(options.dims["interface"])
        requested = options.dims["latency"]
        dims = {**options.dims, "latency": latencies_with_direct(requested)}
        cases = cross(self.name, self.dimensions, dims, lambda d: excluded(d, requested))
        if not cases:
            raise UserError("no cases left after exclusions: each interface has only its own methods (libpq: "
                            "normal,single-row,copy; odbc: normal,cursor; jdbc, psycopg: normal,cursor,copy) and "
                            "jdbc has no unix socket; widen --interface, --method or --transport")
        return cases

    # -- servers and data -------------------------------------------------------------------
    def prepare(self, env: StudyEnv) -> None:
        opts, p = env.options, env.options.params
        transports = opts.dims["transport"]
        t0 = time.monotonic()
        local = env.servers.cluster("local") if {"unix", "tcp"} & set(transports) else None
        # The seed's other machine: a second server, on its own network stack when we can make one.
        remote = env.servers.cluster("remote", remote=True, bandwidth_kbit=p.get("bandwidth")) \
            if "remote" in transports else None
        servers = [c for c in (local, remote) if c is not None]
        env.log(f"servers up in {time.monotonic() - t0:.1f} s")

        t0 = time.monotonic()
        sizes = {"t50k": p["t50k_rows"], "t10m": p["t10m_rows"]}
        tables = sorted({"t10m" if split_sqlstrat(s)[0] == "sql10m" else "t50k" for s in opts.dims["sqlstrat"]})
        self._check_disk(env, sizes, tables, len(servers))

        def load(cluster) -> None:
            cluster.create_database(DB)
            with cluster.connect(DB) as conn:
                for t in tables:
                    for statement in table_sql(t, sizes[t]):
                        conn.execute(statement)
                    conn.execute("SET synchronize_seqscans = off")    # as every session of ours (session_env)
                    conn.execute(f"SELECT count(*) FROM {t}")     # read once: the cache is warm for round 1

        with ThreadPoolExecutor(max_workers=len(servers)) as pool:
            list(pool.map(load, servers))
        env.log(f"tables {', '.join(f'{t} ({sizes[t]:,} rows)' for t in tables)} loaded in "
                f"{time.monotonic() - t0:.1f} s on {len(servers)} server(s)")

        conninfo: dict[tuple[str, str], str] = {}
        if local is not None:
            conninfo[("unix", DIRECT)] = local.conninfo(DB, "unix")
            conninfo[("tcp", DIRECT)] = local.conninfo(DB, "tcp")
            env.servers.link(f"local_{DIRECT}", local)      # lcl:tcp's round trip, probed every round
        if remote is not None:
            for latency in opts.dims["latency"]:
                link = env.servers.link(f"remote_{latency}", remote, int(latency[:-2]), p.get("bandwidth"))
                conninfo[("remote", latency)] = link.conninfo(remote.conninfo(DB, "tcp"))

        # The reference: psql's COPY of every query, on every server (their data must be the same).
        t0 = time.monotonic()
        psql = env.bins.path("psql")
        reference: dict[str, Reference] = {}
        for query in sorted({split_sqlstrat(s)[0] for s in opts.dims["sqlstrat"]}, key=QUERY_ORDER.index):
            refs = [copy_reference(psql, c.conninfo(DB), QUERIES[query], p["timeout"]) for c in servers]
            if any(r != refs[0] for r in refs):
                raise UserError(f"{query}: the servers' tables differ (psql COPY): " + "; ".join(
                    f"{c.name} {r.brief()}" for c, r in zip(servers, refs)))
            reference[query] = refs[0]
        env.log(f"reference checksums (psql COPY) in {time.monotonic() - t0:.1f} s")

        # Every client once (select 1): its version, and a failure now rather than in every case.
        versions = {}
        jvm = shlex.split(p["jvm_options"])
        paths = {}
        for case in self.cases(opts):
            paths.setdefault(case["interface"], (case["transport"], case["latency"]))
        for iface, path in paths.items():
            try:
                versions[iface] = run_native_client(iface, conninfo[path], "select 1", timeout=120,
                                                    jvm_options=jvm).output["version"]
            except CaseError as e:
                raise UserError(f"--interface: the {iface} client does not work here: {e}") from None

        out_dir = env.servers.root
        out_dir.mkdir(parents=True, exist_ok=True)
        env.state.update(conninfo=conninfo, reference=reference, jvm_options=jvm,
                         outfile=str(out_dir / f"iftest-{env.bins.major}.out"))
        env.fingerprint[f"interfaces_pg{env.bins.major}"] = {
            "database": DB, "tables": {t: {"rows": sizes[t], "copy_bytes": row_bytes(t, sizes[t])} for t in tables},
            "queries": {q: QUERIES[q] for q in reference},
            "iterations_sql001": p["iterations"],
            "reference": {q: {"rows": r.rows, "bytes": r.bytes, "checksum": r.checksum}
                          for q, r in reference.items()},
            "clients": versions, "jvm_options": p["jvm_options"], "cursor_fetch": p["fetch"],
            "conninfo": {f"{t}_{lat}": _mask(ci) for (t, lat), ci in conninfo.items()},
            "outfile": env.state["outfile"],
            "remote": "a second managed server with the same data" + (
                f", in network namespace {remote.netns['netns']} (veth)" if remote is not None and remote.netns
                else ", on loopback" if remote is not None else ""),
            "duration": "wall time of the client command (os.wait4), process start included, as the seed's",
        }

    @staticmethod
    def _check_disk(env: StudyEnv, sizes: dict, tables: list[str], servers: int) -> None:
        # heap about 1.25x the COPY text, plus WAL, plus the p-all:file output of the largest result
        need = sum(row_bytes(t, sizes[t]) for t in tables) * 2.5 * servers + \
            max(row_bytes(t, sizes[t]) for t in tables)
        free = env.servers.workspace.free_bytes()
        if need > free:
            raise UserError(f"--t10m-rows: the tables need about {need / 1e9:.1f} GB free in the workspace, "
                            f"{free / 1e9:.1f} GB are; use smaller --t10m-rows or another --workspace")

    # -- one measurement --------------------------------------------------------------------
    def measure(self, env: StudyEnv, case: Case) -> dict:
        p, st = env.options.params, env.state
        iface, method = case["interface"], case["method"]
        query, strategy = split_sqlstrat(case["sqlstrat"])
        printfrac, dest = case["output"].split(":")
        iterations = p["iterations"] if query == "sql001" else 1
        mode = f"cursor:{p['fetch']}" if method == "cursor" else method
        out = st["outfile"] if dest == "file" else "/dev/null"
        written = None
        try:
            run = run_native_client(iface, st["conninfo"][(case["transport"], case["latency"])], QUERIES[query],
                                    mode=mode, keep=strategy == "once", iterations=iterations,
                                    print_rows=printfrac == "p-all", dest=out, timeout=p["timeout"],
                                    jvm_options=st["jvm_options"])
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
        total = o["total_s"]
        return {
            "duration_s": run.wall_s,
            "connect_s": o["connect_s"], "exec_s": o["exec_s"], "fetch_s": o["fetch_s"], "total_s": total,
            "startup_s": max(0.0, run.wall_s - total),
            "cpu_user_s": run.user_s, "cpu_sys_s": run.sys_s, "cpu_s": run.user_s + run.sys_s,
            "peak_rss_mib": run.peak_rss_kib / 1024,
            "rows": o["rows"], "bytes": o["bytes"], "iterations": o["iterations"], "checksum": o["checksum"],
            "rows_per_s": o["rows"] / total if total > 0 else None,
            "mb_per_s": o["bytes"] / 1e6 / total if total > 0 else None,
            "ms_per_iteration": total * 1000 / iterations,
            "mode": mode, "version": o["version"],
        }

    # -- the report -------------------------------------------------------------------------
    def report(self, run: dict, measurements: list[dict], probes: list[dict]) -> list[Table]:
        recs = records(self.name, measurements)
        tables: list[Table] = []
        if recs:
            multi_pg = len({r.pg for r in recs}) > 1
            groups = seed_groups(recs)
            tables += [self._candidate_table(groups, multi_pg), self._location_table(groups, multi_pg, probes),
                       self._strategy_table(groups, multi_pg), self._connect_ratio_table(recs, multi_pg),
                       self._testcase_table(groups, recs, multi_pg), self._loccomm_table(groups, multi_pg),
                       self._time_table(recs, multi_pg), self._resources_table(recs, multi_pg)]
            memory = self._memory_ratio_table(recs, multi_pg)
            if memory is not None:
                tables.append(memory)
        checks = self._checksum_table(run, measurements)
        if checks is not None:
            tables.append(checks)
        failed = [m for m in measurements if m["study"] == self.name and not m["ok"]]
        if failed:
            tables.append(Table("Failed measurements", ["Case", "Round", "Error"],
                                [[m["case_id"], m["round"], m["error"]] for m in failed], align_left=3))
        return [t for t in tables if t is not None]

    @staticmethod
    def _candidate_table(groups, multi_pg: bool) -> Table:
        rows = []
        for pg, ranking in sorted(candidate_ranking(groups).items(), key=lambda kv: int(kv[0])):
            for rank, (cand, grpsz, nml_dur, nml_drng, n) in enumerate(ranking, 1):
                pub = INTERFACES_CANDIDATE_RANKING.get(cand)
                pub_rank = list(INTERFACES_CANDIDATE_RANKING).index(cand) + 1 if pub else None
                rows.append(_pg(multi_pg, pg) + [rank, cand, _method_of(cand), n, grpsz, nml_dur, nml_drng,
                                                 pub_rank, pub[1] if pub else None, pub[2] if pub else None])
        return Table("Interface/method: candidates ranked by average normalised duration (seed's "
                     "ifmeth_cat_results summary)",
                     _pg_col(multi_pg) + ["Rank", "Candidate", "Method", "Testcases", "avg_grpsz", "avg_nml_dur",
                                          "avg_nml_drng", "Published rank", "Published avg_nml_dur",
                                          "Published avg_nml_drng"], rows,
                     ["nml_dur: (duration - fastest) / (slowest - fastest) among the candidates of each testcase "
                      "(query, iterations, location, transport, strategy, print, destination); 0 = always the "
                      "fastest. nml_drng: the same for each candidate's range (max - min) over its rounds.",
                      f"Published: {INTERFACES_SOURCE}. acc-n normal, acc-a single-row (libpq) or cursor, "
                      "acc-y COPY."], align_left=3 + multi_pg)

    @staticmethod
    def _location_table(groups, multi_pg: bool, probes: list[dict]) -> Table:
        rtt = measured_rtt(probes)
        rows = []
        for pg, ranking in sorted(location_ranking(groups).items(), key=lambda kv: int(kv[0])):
            for rank, (cand, grpsz, nml_dur, nml_drng, n) in enumerate(ranking, 1):
                pub = INTERFACES_LOCATION_RANKING.get(cand)
                rows.append(_pg(multi_pg, pg) + [rank, cand, _path_text(cand, pg, rtt), n, grpsz, nml_dur, nml_drng,
                                                 pub[1] if pub else None, pub[2] if pub else None])
        return Table("Location/transport ranked by average normalised duration (seed's loccomm_cat_results "
                     "summary)",
                     _pg_col(multi_pg) + ["Rank", "Candidate", "Path (measured RTT)", "Testcases", "avg_grpsz",
                                          "avg_nml_dur", "avg_nml_drng", "Published avg_nml_dur",
                                          "Published avg_nml_drng"], rows,
                     ["Normalised among the transports of each interface/method testcase. lcl:ipc: unix socket; "
                      "lcl:tcp: loopback TCP; rmt:tcp: the remote server over TCP (the seed's: another machine on "
                      "its LAN; here a second server on its own network stack, rmt+Nms: behind an emulated link)."],
                     align_left=3 + multi_pg)

    @staticmethod
    def _strategy_table(groups, multi_pg: bool) -> Table:
        by: dict[tuple[str, str], list[Group]] = defaultdict(list)
        for g in groups:
            by[(g.pg, g.ifmeth_testcase)].append(g)
        avg = {k: statistics.fmean(g.duration for g in gs) for k, gs in by.items()}
        rows = [_pg(multi_pg, pg) + [testcase, len(by[(pg, testcase)]), round(avg[(pg, testcase)], 3),
                                     INTERFACES_STRATEGY_AVG_DURATION.get(seed_testcase_key(by[(pg, testcase)][0].key))]
                for pg, testcase in sorted(by, key=lambda k: (int(k[0]), avg[k]))]
        return Table("Query/connect strategy: average duration per testcase (seed's summary)",
                     _pg_col(multi_pg) + ["Testcase", "Candidates", "avg_dur s", "Published avg_dur s"], rows,
                     ["avg_dur: the mean over the candidates of each candidate's average duration (s), ordered by it, "
                      "as the seed's query. Testcase = query:iterations:location:transport:strategy (0 = connect per "
                      "query, 1 = once):print:destination. Published: the seed's testcase of the same shape, at its "
                      "sizes (sql001 x 50k)."], align_left=1 + multi_pg)

    @staticmethod
    def _connect_ratio_table(recs, multi_pg: bool) -> Table | None:
        series = _series(recs, "duration_s")
        rows, medians = [], []
        for k, values in sorted(series.items(), key=lambda kv: _key_order(kv[0])):
            once = series.get(k._replace(strategy="once"))
            if k.strategy != "each" or not once:
                continue
            r = ratio_summary(values, once)
            if r is None:
                continue
            medians.append(r.median)
            rows.append(_pg(multi_pg, k.pg) + [f"{k.query}:{conndesc(k.transport, k.latency)}:{k.output}",
                                               f"{SEED_IFNAME[k.interface]}:{k.method}",
                                               statistics.median(values.values()), statistics.median(once.values()),
                                               r.median, r.ci_text, r.verdict(1.0)])
        if not rows:
            return None
        return Table("Connect per query vs connect once: duration ratio per candidate",
                     _pg_col(multi_pg) + ["Testcase", "Client:method", "Each s (median)", "Once s (median)",
                                          "Ratio each/once", "95% CI", "Differs from 1"], rows,
                     [f"Median over the {len(rows)} candidate/testcase pairs: {statistics.median(medians):.1f}x. "
                      "Ratios of durations paired by round (measured in the same round)."], align_left=2 + multi_pg)

    @staticmethod
    def _loccomm_table(groups, multi_pg: bool) -> Table | None:
        """The seed's last slide: each candidate's duration by location/transport (loccomm_cat_results)."""
        rows = []
        for g in sorted(groups, key=lambda g: (_testcase_order(g.key)[:3], INTERFACES.index(g.key.interface),
                                               METHODS.index(g.key.method), g.duration)):
            if g.key.strategy != "once":
                continue
            rows.append(_pg(multi_pg, g.pg) + [g.loccomm_testcase, g.location, round(g.duration, 5),
                                               INTERFACES_LOCCOMM_DURATION.get((seed_loccomm_key(g.key), g.location))])
        if not rows:
            return None
        return Table("Per interface/method: duration by location/transport, connect once (seed's "
                     "loccomm_cat_results)",
                     _pg_col(multi_pg) + ["Testcase", "Candidate", "Duration s (avg)", "Published s"], rows,
                     ["Testcase = interface:method:query:iterations:strategy:print:destination. Published: the "
                      "seed's acc-n sql50k rows (its last slide), at its sizes."], align_left=2 + multi_pg)

    @staticmethod
    def _testcase_table(groups, recs, multi_pg: bool) -> Table:
        series = _series(recs, "duration_s")
        by_key = {k: v for k, v in series.items()}
        rows = []
        for g in sorted(groups, key=lambda g: (_testcase_order(g.key), g.duration)):
            s = summarise(list(by_key[g.key].values()))
            rows.append(_pg(multi_pg, g.pg) + [g.ifmeth_testcase, g.candidate, round(g.duration, 5), s.median,
                                               s.ci_text, s.n,
                                               INTERFACES_TESTCASE_DURATION.get((seed_testcase_key(g.key),
                                                                                 g.candidate))])
        return Table("Per testcase: candidates by average duration (the seed's per-testcase tables)",
                     _pg_col(multi_pg) + ["Testcase", "Candidate", "Duration s (avg)", "Median s", "95% CI", "n",
                                          "Published s"], rows,
                     ["Duration: the client command's wall time, process start included (JVM, interpreter), as the "
                      "seed's. Published: the seed's testcase of the same shape, at its sizes (sql001 x 50k, t50k "
                      "50k rows, t10m 10M rows): compare orders and ratios, not seconds, unless this run used them.",
                      "An interval followed by (NN%) covers only NN%: too few rounds for 95%."], align_left=2 + multi_pg)

    @staticmethod
    def _time_table(recs, multi_pg: bool) -> Table:
        metrics = ("connect_s", "exec_s", "fetch_s", "total_s", "startup_s", "duration_s", "rows_per_s", "mb_per_s")
        med = _medians(recs, metrics)
        output = _preferred_output(recs)
        rows = []
        for k in sorted(med, key=_key_order):
            if k.output != output:
                continue
            m = med[k]
            rows.append(_pg(multi_pg, k.pg) + [_testcase_of(k), f"{SEED_IFNAME[k.interface]}:{k.method}",
                                               *(m.get(x) for x in metrics)])
        return Table(f"Where the time goes: connect, execute, fetch (the client's clock) and process start, "
                     f"medians ({output})",
                     _pg_col(multi_pg) + ["Testcase", "Client:method", "Connect s", "Execute s", "Fetch s",
                                          "Client total s", "Process start+exit s", "Duration s", "Rows/s", "MB/s"],
                     rows,
                     ["Execute: from sending the query to the first result; where the driver receives the whole "
                      "result first (normal modes), the transfer is in Execute, so compare Execute + Fetch. "
                      "Process start+exit: the command's wall time minus the client's own total (JVM or interpreter "
                      "start). Rows/s and MB/s (10^6 bytes of COPY text) over the client's total."],
                     align_left=2 + multi_pg)

    @staticmethod
    def _resources_table(recs, multi_pg: bool) -> Table:
        metrics = ("peak_rss_mib", "cpu_user_s", "cpu_sys_s", "cpu_s", "bytes")
        med = _medians(recs, metrics)
        spread = _summaries(recs, "peak_rss_mib")
        output = _preferred_output(recs)
        transport = _shared_transport(recs)
        rows = []
        for k in sorted(med, key=_key_order):
            if k.output != output or k.transport != transport or k.strategy != "once":
                continue
            m = med[k]
            mb = (m.get("bytes") or 0) / 1e6
            rows.append(_pg(multi_pg, k.pg) + [_testcase_of(k), f"{SEED_IFNAME[k.interface]}:{k.method}",
                                               m.get("peak_rss_mib"), spread[k].ci_text, m.get("cpu_user_s"),
                                               m.get("cpu_sys_s"),
                                               m["cpu_s"] * 1000 / mb if mb >= 1 and m.get("cpu_s") else None])
        return Table(f"Client CPU and peak memory per method, connect once over {conndesc(transport)} ({output})",
                     _pg_col(multi_pg) + ["Testcase", "Client:method", "Peak RSS MiB", "95% CI", "CPU user s",
                                          "CPU sys s", "CPU ms per MB"], rows,
                     ["From the kernel's accounting of the client process (os.wait4): peak resident set and CPU "
                      "time, every thread included. Normal methods hold the whole result in the client; streaming "
                      "ones (single-row, cursor, COPY) hold a row or a batch: that is why they exist."],
                     align_left=2 + multi_pg)

    @staticmethod
    def _memory_ratio_table(recs, multi_pg: bool) -> Table | None:
        series = _series(recs, "peak_rss_mib")
        largest = max((k.query for k in series), key=QUERY_ORDER.index, default=None)
        rows = []
        for k, values in sorted(series.items(), key=lambda kv: _key_order(kv[0])):
            if k.query != largest or k.method != "normal" or k.strategy != "once":
                continue
            for other in STREAMING:
                s = series.get(k._replace(method=other))
                r = ratio_summary(values, s) if s else None
                if r is None:
                    continue
                rows.append(_pg(multi_pg, k.pg) + [conndesc(k.transport, k.latency), k.output,
                                                   SEED_IFNAME[k.interface], f"normal / {other}",
                                                   statistics.median(values.values()), statistics.median(s.values()),
                                                   r.median, r.ci_text, r.verdict(1.0)])
        if not rows:
            return None
        return Table(f"Peak memory of the normal method over the streaming ones, largest result ({largest}, "
                     "connect once)",
                     _pg_col(multi_pg) + ["Transport", "Output", "Client", "Ratio of", "Normal MiB", "Streaming MiB",
                                          "Ratio (median)", "95% CI", "Differs from 1"], rows,
                     ["Ratio of peak resident sets paired by round."], align_left=4 + multi_pg)

    @staticmethod
    def _checksum_table(run: dict, measurements: list[dict]) -> Table | None:
        sessions = (run.get("environment") or {}).get("sessions") or [{}]
        ours = [m for m in measurements if m["study"] == "interfaces"]
        if not ours:
            return None
        rows = []
        for pg in sorted({m["dims"]["pg"] for m in ours}, key=int):
            ref = (sessions[-1].get(f"interfaces_pg{pg}") or {}).get("reference", {})
            for query in QUERY_ORDER:
                ms = [m for m in ours if m["dims"]["pg"] == pg and split_sqlstrat(m["dims"]["sqlstrat"])[0] == query]
                if not ms:
                    continue
                agree = [m for m in ms if m["ok"]]
                mismatch = [m for m in ms if not m["ok"] and (m["error"] or "").startswith("checksum mismatch")]
                clients = sorted({m["dims"]["interface"] for m in agree}, key=INTERFACES.index)
                r = ref.get(query, {})
                rows.append([pg, query, QUERIES[query], r.get("rows"), r.get("bytes"), r.get("checksum"),
                             f"{len(agree)}/{len(ms)}", len(mismatch), ", ".join(clients)])
        return Table("Every client returns the same data: rows, bytes and checksum against psql's COPY",
                     ["PG", "Query", "SQL", "Rows", "Bytes", "Checksum (1 iteration)", "Agree", "Mismatches",
                      "Clients that agree"], rows,
                     ["Reference: psql -c 'COPY (SQL) TO STDOUT', the sum of the FNV-1a 64 of its rows, once per run "
                      "and server; "
                      "each measurement must return exactly these rows, bytes and checksum (x iterations), or it "
                      "fails with 'checksum mismatch'."], align_left=3)

    # -- charts -----------------------------------------------------------------------------
    def plots(self, run: dict, measurements: list[dict], probes: list[dict]):
        from ..report import Plot, Point
        recs = records(self.name, measurements)
        if not recs:
            return []
        plots = []
        groups = seed_groups(recs)
        ranking = candidate_ranking(groups)
        multi = len(ranking) > 1
        series: dict[str, list] = {}
        for pg, rows in ranking.items():
            series[f"PG {pg}" if multi else "this run"] = [Point(c, d) for c, _, d, _, _ in rows]
        published = [Point(c, v[1]) for c, v in INTERFACES_CANDIDATE_RANKING.items()
                     if any(p.x == c for pts in series.values() for p in pts)]
        if published:
            series["published (seed 003)"] = published
        plots.append(Plot("Average normalised duration by candidate (0 = fastest in every testcase)",
                          "Candidate (interface:method)", "Average normalised duration", "bar", series))
        rss = _series(recs, "peak_rss_mib")
        largest = max((k.query for k in rss), key=QUERY_ORDER.index)
        transport = _shared_transport(recs)
        points: dict[str, list] = defaultdict(list)
        for k, values in sorted(rss.items(), key=lambda kv: _key_order(kv[0])):
            if k.query == largest and k.strategy == "once" and k.transport == transport:
                s = summarise(list(values.values()))
                points[k.method].append(Point(SEED_IFNAME[k.interface] + (f" · PG {k.pg}" if multi else ""),
                                              s.median, s.ci_low, s.ci_high))
        if points:
            plots.append(Plot(f"Client peak resident set on the largest result ({largest}, connect once, "
                              f"{conndesc(transport)})", "Client", "Peak RSS, MiB", "bar", dict(points),
                              notes=["Medians with the 95% CI of the median (order statistics)."]))
        return plots


def excluded(d: dict[str, str], requested_latencies) -> bool:
    """The seed's exclusions, and where links apply."""
    if d["method"] not in METHODS_OF[d["interface"]]:
        return True
    if d["transport"] == "unix" and not CLIENTS[d["interface"]].unix_socket:
        return True                  # pgjdbc has no unix sockets (the seed had no JDBC lcl:ipc)
    if d["transport"] == "remote":
        return d["latency"] not in requested_latencies
    return d["latency"] != DIRECT    # local paths never cross a link


def _mask(conninfo: str) -> str:
    return " ".join("password=***" if part.startswith("password=") else part for part in conninfo.split())


# -- the seed's analysis, in Python (the same as the SQL views in store/schema.sql) --------------
class Key(NamedTuple):
    """One case, by its dimensions."""
    pg: str
    interface: str
    method: str
    transport: str
    latency: str
    query: str
    strategy: str
    output: str


class Record(NamedTuple):
    key: Key
    pg: str
    iface: str          # seed labels (vtestresults' columns)
    loc: str
    comm: str
    sql: str
    connstrat: str
    numiter: str
    extra: str
    prnt: str
    dest: str
    iter: int
    duration: float
    metrics: dict


def records(study: str, measurements: list[dict]) -> list[Record]:
    """The stored measurements as the seed's vtestresults rows (ok ones only)."""
    out = []
    for m in measurements:
        if m["study"] != study or not m["ok"]:
            continue
        d, mt = m["dims"], m["metrics"]
        query, strategy = split_sqlstrat(d["sqlstrat"])
        key = Key(d["pg"], d["interface"], d["method"], d["transport"], d["latency"], query, strategy, d["output"])
        loc, comm = conndesc(d["transport"], d["latency"]).split(":")
        prnt, dest = d["output"].split(":")
        out.append(Record(key, d["pg"], SEED_IFNAME[d["interface"]], loc, comm, query, STRATEGIES[strategy],
                          numiter_text(int(mt["iterations"])), ACCDESC[d["method"]], prnt, dest, m["round"],
                          float(mt["duration_s"]), mt))
    return out


def seed_testcase(r: Record) -> str:
    """testresults' testcase: 'ODBC:lcl:ipc:sql001:0:50k:acc-n:p-all:null'."""
    return ":".join((r.iface, r.loc, r.comm, r.sql, r.connstrat, r.numiter, r.extra, r.prnt, r.dest))


@dataclass(frozen=True)
class Group:
    """One row of the seed's inner GROUP BY: a candidate in a testcase, over its rounds."""
    key: Key
    pg: str
    ifmeth_testcase: str      # sql:numiter:loc:comm:connstrat:prnt:dest
    candidate: str            # iface:extra
    loccomm_testcase: str     # iface:extra:sql:numiter:connstrat:prnt:dest
    location: str             # loc:comm
    grpsz: int
    duration: float           # average
    drange: float             # max - min


def seed_groups(recs: list[Record]) -> list[Group]:
    by: dict[tuple, list[Record]] = defaultdict(list)
    for r in recs:
        by[(r.pg, r.iface, r.loc, r.comm, r.connstrat, r.sql, r.numiter, r.extra, r.prnt, r.dest)].append(r)
    out = []
    for (pg, iface, loc, comm, connstrat, sql, numiter, extra, prnt, dest), rs in by.items():
        durations = [r.duration for r in rs]
        out.append(Group(rs[0].key, pg, ":".join((sql, numiter, loc, comm, connstrat, prnt, dest)),
                         f"{iface}:{extra}", ":".join((iface, extra, sql, numiter, connstrat, prnt, dest)),
                         f"{loc}:{comm}", len(rs), statistics.fmean(durations), max(durations) - min(durations)))
    return out


def normalised(groups: list[Group], partition: str) -> list[tuple[Group, float, float]]:
    """Each group with its nml_dur and nml_drng within its testcase (the seed's window w), rounded
    to 5 places as the seed's views round them; 0 where the testcase has a single value (flat)."""
    parts: dict[tuple, list[Group]] = defaultdict(list)
    for g in groups:
        parts[(g.pg, getattr(g, partition))].append(g)
    out = []
    for members in parts.values():
        d = [g.duration for g in members]
        r = [g.drange for g in members]
        for g in members:
            out.append((g, round(normalise(g.duration, min(d), max(d)), 5),
                        round(normalise(g.drange, min(r), max(r)), 5)))
    return out


def _ranking(groups: list[Group], partition: str, candidate: str) -> dict[str, list[tuple]]:
    """Per pg: (candidate, avg_grpsz, avg_nml_dur, avg_nml_drng, testcases), ordered as the seed's
    summary (ORDER BY avg_nml_dur, avg_nml_drng, candidate)."""
    by: dict[tuple[str, str], list[tuple[Group, float, float]]] = defaultdict(list)
    for g, nd, nr in normalised(groups, partition):
        by[(g.pg, getattr(g, candidate))].append((g, nd, nr))
    out: dict[str, list[tuple]] = defaultdict(list)
    for (pg, cand), rows in by.items():
        out[pg].append((cand, round(statistics.fmean(g.grpsz for g, _, _ in rows), 1),
                        round(statistics.fmean(nd for _, nd, _ in rows), 3),
                        round(statistics.fmean(nr for _, _, nr in rows), 3), len(rows)))
    return {pg: sorted(rows, key=lambda r: (r[2], r[3], r[0])) for pg, rows in out.items()}


def candidate_ranking(groups: list[Group]) -> dict[str, list[tuple]]:
    """The seed's 'Results - Interface/Method Summarized'."""
    return _ranking(groups, "ifmeth_testcase", "candidate")


def location_ranking(groups: list[Group]) -> dict[str, list[tuple]]:
    """The seed's 'Results - Location/Transport Summarized'."""
    return _ranking(groups, "loccomm_testcase", "location")


def seed_testcase_key(key: Key) -> str:
    """The seed's ifmeth testcase of the same shape, at the seed's iteration counts."""
    loc, comm = conndesc(key.transport, key.latency).split(":")
    prnt, dest = key.output.split(":")
    return ":".join((key.query, SEED_NUMITER[key.query], loc, comm, STRATEGIES[key.strategy], prnt, dest))


def seed_loccomm_key(key: Key) -> str:
    prnt, dest = key.output.split(":")
    return ":".join((SEED_IFNAME[key.interface], ACCDESC[key.method], key.query, SEED_NUMITER[key.query],
                     STRATEGIES[key.strategy], prnt, dest))


# -- report helpers -------------------------------------------------------------------------------
def _series(recs: list[Record], metric: str) -> dict[Key, dict[int, float]]:
    out: dict[Key, dict[int, float]] = defaultdict(dict)
    for r in recs:
        v = r.metrics.get(metric)
        if v is not None:
            out[r.key][r.iter] = float(v)
    return out


def _medians(recs: list[Record], metrics) -> dict[Key, dict[str, float]]:
    out: dict[Key, dict[str, float]] = {}
    for metric in metrics:
        for k, values in _series(recs, metric).items():
            out.setdefault(k, {})[metric] = statistics.median(values.values())
    return out


def _summaries(recs: list[Record], metric: str):
    return {k: summarise(list(v.values())) for k, v in _series(recs, metric).items()}


def _preferred_output(recs: list[Record]) -> str:
    present = {r.key.output for r in recs}
    return PREFERRED_OUTPUT if PREFERRED_OUTPUT in present else next(o for o in OUTPUTS if o in present)


def _shared_transport(recs: list[Record]) -> str:
    """lcl:tcp where every interface meets, else the first transport measured."""
    present = {r.key.transport for r in recs}
    return "tcp" if "tcp" in present else next(t for t in TRANSPORTS if t in present)


def _key_order(k: Key) -> tuple:
    return (int(k.pg), QUERY_ORDER.index(k.query), list(STRATEGIES).index(k.strategy), TRANSPORTS.index(k.transport),
            int(k.latency[:-2]), OUTPUTS.index(k.output), INTERFACES.index(k.interface), METHODS.index(k.method))


def _testcase_order(k: Key) -> tuple:
    return (int(k.pg), QUERY_ORDER.index(k.query), list(STRATEGIES).index(k.strategy), TRANSPORTS.index(k.transport),
            int(k.latency[:-2]), OUTPUTS.index(k.output))


def _testcase_of(k: Key) -> str:
    return f"{k.query}:{k.strategy}:{conndesc(k.transport, k.latency)}"


def _case_text(k: Key) -> str:
    return f"{SEED_IFNAME[k.interface]}:{k.method} {k.query} {conndesc(k.transport, k.latency)} {k.output}" + \
        (f" PG {k.pg}" if k.pg != "15" else "")


def _method_of(candidate: str) -> str:
    iface, acc = candidate.split(":")
    lower = {v: k for k, v in SEED_IFNAME.items()}[iface]
    return next((m for m in METHODS_OF[lower] if ACCDESC[m] == acc), acc)


def _path_text(candidate: str, pg: str, rtt: dict[str, float]) -> str:
    if candidate == "lcl:ipc":
        return "unix socket"
    if candidate == "lcl:tcp":
        name, where = f"local_{DIRECT}", "loopback"
    else:
        latency = candidate.split(":")[0][4:] or DIRECT
        name, where = f"remote_{latency}", "direct" if latency == DIRECT else f"{latency} link"
    measured = rtt.get(pg_link_name(pg, name))
    return f"{where}, {measured:.2f} ms" if measured is not None else where


def _pg(multi: bool, pg: str) -> list:
    return [pg] if multi else []


def _pg_col(multi: bool) -> list[str]:
    return ["PG"] if multi else []
