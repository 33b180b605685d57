"""interfaces (seed 003) against real managed servers: the seed's matrix at a small size through the
real CLI, with the results in a database of the test's own (one the earlier version left its seed
003 views in: they are dropped).

Asserts what the issue's "How it will be checked" says: every client's checksum agrees for every
query, the report ranks the candidates, connecting per query is far slower than connecting once
for the 1-row x N case, and JDBC's normal mode holds far more memory on the largest result than its
cursor mode; and that the seed's analysis (report.py, in Python) covers the run's cases with the
figures an independent computation from the exported measurements gives.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from collections import defaultdict

import psycopg
import pytest

from conftest import REPO, cpu_bound_ms, medians_by_case, pgpathbench, pgpathbench_main, rounds_by_case
from pgpathbench.procs import OsUser
from pgpathbench.servers.binaries import resolve
from pgpathbench.servers.cluster import Cluster
from pgpathbench.servers.network import find_toxiproxy
from pgpathbench.datasets.seed003 import row_bytes
from pgpathbench.results.model import RunResult
from pgpathbench.studies.interfaces.report import location_ranking, normalised, seed_groups
from pgpathbench.studies.interfaces.spec import DEFAULT_JVM_OPTIONS

pytestmark = pytest.mark.integration

# The study's JVM options with C1 only (as tests/integration/test_clients.py's): the 48 JVMs' CPU
# 0.8 s instead of 1.4 s each, JDBC 46% of the run's measuring time before; asserted here are
# JDBC's memory, checksums and connections, and its place among the slowest, which C1 keeps.
TEST_JVM = f"{DEFAULT_JVM_OPTIONS} -XX:TieredStopAtLevel=1"
# The earlier quick matrix (120 cases: every candidate over every transport, sql001 x 20 each and once,
# sql50k and sql10m once) in 2 rounds: the figures asserted here need no more, and the suite stays short
# (sql001 x 50 took 122.5 s of CPU for the run, x 20 99.7 s).
ROUNDS = 2
ITERATIONS = 20
NUMITER = "020"                     # ITERATIONS as the seed writes it
MATRIX = ["--sqlstrat", "sql001:each,sql001:once,sql50k:once,sql10m:once", "--output", "p-all:file",
          "--iterations", str(ITERATIONS), "--t50k-rows", "5000", "--t10m-rows", "150000",
          "--each-transports", "unix,tcp,remote",
          "--each-methods", "normal,single-row,cursor,copy", f"--jvm-options={TEST_JVM}"]
# What the earlier version's results database held for seed 003 (as SQL): this version drops it.
SEED003_SQL = ("interfaces", "conninfos", "alternateclientcopy", "sqlstratiter", "printfracdest", "testcases",
               "testresults", "vtestresults", "ifmeth_cat_results", "loccomm_cat_results", "ifmeth_cat_summary",
               "loccomm_cat_summary", "testcase_avg_duration", "seed003_ifname", "seed003_accdesc",
               "seed003_conndesc", "seed003_numiter")
CANDIDATES = {"libpq:acc-n", "libpq:acc-a", "libpq:acc-y", "ODBC:acc-n", "ODBC:acc-a", "JDBC:acc-n", "JDBC:acc-a",
              "JDBC:acc-y", "psycopg:acc-n", "psycopg:acc-a", "psycopg:acc-y"}


@pytest.fixture(scope="module")
def results_db(workspace_root):
    """A database of the test's own for the results (--results-dsn), queried directly below."""
    c = Cluster("interfaces-results", workspace_root / "interfaces-results", resolve(15), OsUser.for_servers())
    c.start()
    dsn = c.conninfo("postgres", transport="tcp") + f" passfile={c.passfile}"   # no password on a command line
    with psycopg.connect(dsn, autocommit=True) as conn:      # a few of the earlier version's objects
        conn.execute("CREATE SCHEMA pgpathbench")
        conn.execute("CREATE FUNCTION pgpathbench.seed003_numiter(n bigint) RETURNS text LANGUAGE sql IMMUTABLE "
                     "AS $$ SELECT n::text $$")
        conn.execute("CREATE VIEW pgpathbench.testresults AS SELECT pgpathbench.seed003_numiter(1) AS numiter")
        conn.execute("CREATE VIEW pgpathbench.vtestresults AS SELECT * FROM pgpathbench.testresults")
    yield dsn
    c.remove()


@pytest.fixture(scope="module")
def quick(results_db, workspace_root):
    build = subprocess.run([str(REPO / "scripts" / "build-clients")], capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, build.stderr[-3000:]
    t0 = time.monotonic()
    res = pgpathbench("run", "interfaces", "--preset", "quick", *MATRIX, "--repeat", str(ROUNDS), "--results-dsn",
                      results_db, workspace=workspace_root, timeout=1200)
    elapsed = time.monotonic() - t0
    assert res.returncode == 0, res.stderr[-3000:]
    rep = pgpathbench_main("report", "latest", "--format", "json", "--results-dsn", results_db, workspace=workspace_root)
    assert rep.returncode == 0, rep.stderr
    print(f"\ninterfaces quick ({ROUNDS} rounds): {elapsed:.0f} s")
    return res, json.loads(rep.stdout), elapsed


def test_every_case_is_measured_with_consistent_figures(quick):
    _, rep, _ = quick
    ms = rep["measurements"]
    assert len(ms) == 120 * ROUNDS
    assert all(m["ok"] for m in ms), [(m["case_id"], m["error"]) for m in ms if not m["ok"]][:5]
    for m in ms:
        mt, d = m["metrics"], m["dims"]
        assert mt["connect_ms"] + mt["exec_ms"] + mt["fetch_ms"] <= mt["total_ms"] + 4e-3 <= mt["duration_ms"] + 4e-3
        assert mt["cpu_user_ms"] + mt["cpu_sys_ms"] > 0 and 1 < mt["peak_rss_mib"] < 2000
        assert mt["iterations"] == (ITERATIONS if d["sqlstrat"].startswith("sql001") else 1)
        assert mt["mode"] == {"cursor": "cursor:1000"}.get(d["method"], d["method"])
    assert not [m for m in ms if m["dims"]["interface"] == "jdbc" and m["dims"]["transport"] == "unix"]


def test_loops_carry_their_iterations_distribution_and_the_servers_evidence(quick):
    """Issue 13: the 1-row loops' percentiles come from each client's histogram of its iterations;
    every measurement carries what its server did (the case's database, its backends' waits)."""
    _, rep, _ = quick
    for m in rep["measurements"]:
        mt, d = m["metrics"], m["dims"]
        if d["sqlstrat"].startswith("sql001"):
            p = [mt[f"latency_{q}_ms"] for q in ("p50", "p90", "p95", "p99", "max")]
            assert p == sorted(p) and p[0] > 0, (m["case_id"], p)
            # an iteration is its exec and fetch (and its connect when connecting per query): their mean
            # over the ITERATIONS lies below the slowest one (whole µs each, rounding allowed)
            per = mt["exec_ms"] + mt["fetch_ms"] + (mt["connect_ms"] if ":each:" in m["case_id"] else 0)
            assert per / mt["iterations"] <= mt["latency_max_ms"] + 0.01, (m["case_id"], per, mt["latency_max_ms"])
        else:
            assert "latency_p50_ms" not in mt
        role = "remote" if d["transport"] == "remote" else "local"
        server = m["evidence"]["servers"][role]
        db = server["database"]
        assert db["xact_commit"] >= 1 and db["tup_returned"] + db["tup_fetched"] >= mt["rows"], m["case_id"]
        assert server["cpu_window_ms"] >= m["duration_s"] * 1000, m["case_id"]
        assert 0 <= server["cpu_ms"]["user"] + server["cpu_ms"]["system"] <= cpu_bound_ms(server), m["case_id"]


def test_every_clients_checksum_agrees_for_every_query(quick):
    _, rep, _ = quick
    session = rep["run"]["environment"]["sessions"][-1]
    ref = session["setup"]["15"]["interfaces"]["reference"]
    # The reference (psql COPY) is the seed's tables' text: computed here from their definition.
    assert ref["sql001"]["rows"] == 1 and ref["sql001"]["bytes"] == 4 + 9 * 99 + 10
    assert (ref["sql50k"]["rows"], ref["sql50k"]["bytes"]) == (5000, row_bytes("t50k", 5000))
    assert (ref["sql10m"]["rows"], ref["sql10m"]["bytes"]) == (150_000, row_bytes("t10m", 150_000))
    seen = defaultdict(set)
    for m in rep["measurements"]:
        query, mt = m["dims"]["sqlstrat"].split(":")[0], m["metrics"]
        n = mt["iterations"]
        assert (mt["rows"], mt["bytes"]) == (ref[query]["rows"] * n, ref[query]["bytes"] * n), m["case_id"]
        if n == 1:
            assert mt["checksum"] == ref[query]["checksum"], m["case_id"]
        seen[query].add(mt["checksum"])
        seen[(query, "clients")].add(m["dims"]["interface"])
    for query in ("sql001", "sql50k", "sql10m"):
        assert len(seen[query]) == 1, (query, seen[query])          # every client, mode, transport: one checksum
        assert seen[(query, "clients")] == {"libpq", "odbc", "jdbc", "psycopg"}
    assert {k for k in session["tools"] if k.endswith(" client")} == \
        {"libpq client", "odbc client", "jdbc client", "psycopg client"}


def ranking_rows(stdout: str, title: str) -> list[list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 4:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def by_hand(measurements: list[dict], testcase_dims: tuple[str, ...], candidate_dims: tuple[str, ...]):
    """The seed's normalisation computed here from the exported measurements, independently of the
    report: per case the mean duration (s) over its rounds, (x - min) / (max - min) among the cases of
    a testcase (rounded to 5 places, 0 when flat), then per candidate the mean (to 3 places).
    -> ({case_id: (testcase, nml_dur, rounds)}, {candidate: avg_nml_dur})"""
    durations, dims = defaultdict(list), {}
    for m in measurements:
        durations[m["case_id"]].append(m["metrics"]["duration_ms"] / 1000)
        dims[m["case_id"]] = m["dims"]
    mean = {case: statistics.fmean(v) for case, v in durations.items()}
    testcase = {case: tuple(d[k] for k in testcase_dims) for case, d in dims.items()}
    nml = {}
    for case, x in mean.items():
        peers = [mean[c] for c in mean if testcase[c] == testcase[case]]
        nml[case] = (testcase[case], round((x - min(peers)) / (max(peers) - min(peers)), 5) if max(peers) > min(peers)
                     else 0.0, len(durations[case]))
    per_candidate = defaultdict(list)
    for case, (_, value, _) in nml.items():
        per_candidate[tuple(dims[case][k] for k in candidate_dims)].append(value)
    return nml, {cand: round(statistics.fmean(v), 3) for cand, v in per_candidate.items()}


IFMETH_TESTCASE = ("sqlstrat", "transport", "latency", "output", "pg")      # the candidates of one testcase
SEED_LABEL = {"libpq": "libpq", "odbc": "ODBC", "jdbc": "JDBC", "psycopg": "psycopg"}
ACC = {"normal": "acc-n", "single-row": "acc-a", "cursor": "acc-a", "copy": "acc-y"}


def test_report_ranks_candidates_as_the_seed_did(quick):
    res, rep, _ = quick
    rows = ranking_rows(res.stdout, "Interface/method: candidates ranked")
    # Rank, Candidate, Method, Testcases, avg_nml_dur, avg_nml_drng, Published rank, Published avg_nml_dur
    assert [int(r[0]) for r in rows] == list(range(1, 12))
    assert {r[1] for r in rows} == CANDIDATES
    nml = [float(r[4]) for r in rows]
    assert nml == sorted(nml) and nml[0] < 0.2 and nml[-1] > 0.6
    # libpq's methods lead, as in the seed; JDBC's normal mode is among the slowest, as in the seed
    assert rows[0][1].startswith("libpq:") and {"libpq:acc-n", "libpq:acc-a", "libpq:acc-y"} <= {r[1] for r in rows[:4]}
    assert "JDBC:acc-n" in {r[1] for r in rows[-4:]}
    # Published beside ours: the seed's avg_nml_dur for libpq:acc-a is 0.008
    assert next(r for r in rows if r[1] == "libpq:acc-a")[-1] == "0.0080"
    # ... and the seed's summary computed here from the exported measurements gives the same figures
    # (to the last of the 3 decimals: roundings), every candidate over ROUNDS rounds in each testcase
    cases, expected = by_hand(rep["measurements"], IFMETH_TESTCASE, ("interface", "method"))
    assert all(rounds == ROUNDS for _, _, rounds in cases.values())
    ours = {r[1]: float(r[4]) for r in rows}
    assert {f"{SEED_LABEL[i]}:{ACC[m]}" for i, m in expected} == set(ours)
    for (interface, method), avg_nml_dur in expected.items():
        assert abs(avg_nml_dur - ours[f"{SEED_LABEL[interface]}:{ACC[method]}"]) < 0.0011, (interface, method)
    locations = ranking_rows(res.stdout, "Location/transport ranked")
    assert {r[1] for r in locations} == {"lcl:ipc", "lcl:tcp", "rmt:tcp"}


def test_connect_per_query_is_far_slower_than_connect_once(quick):
    _, rep, _ = quick
    total = rounds_by_case(rep["measurements"], "total_ms")           # the client's own, without process start
    connect = rounds_by_case(rep["measurements"], "connect_ms")
    each_cases = [case for case in total if ":sql001:each:" in case]
    assert len(each_cases) == 30
    for case in each_cases:
        once = case.replace(":sql001:each:", ":sql001:once:")
        # The each case by its median, the once case by its quicker round: its one connection is one
        # sample a round, and one scheduling stall in two rounds undid the claim beside another suite
        # (psycopg over the socket, 50 connections 378 ms against one at 94 ms, a median of two).
        each_total, once_total = statistics.median(total[case]), min(total[once])
        each_connect, once_connect = statistics.median(connect[case]), min(connect[once])
        c_client = case.startswith(("libpq:", "odbc:"))
        # On the client's own clock, without the process's start: on the seed's (the command's wall
        # time) a busy machine's scheduling delay can match the once case's few ms (libpq each/once
        # 2.86x seen with two suites side by side); bench/connect_per_query.py checks that ratio
        # idle. For JDBC and psycopg their per-query work narrows it with the machine's load (1.43x
        # seen with two suites side by side): their cost is the connections' own, asserted below.
        if c_client:
            assert each_total / once_total > 5, (case, each_total, once_total)
        # ITERATIONS connections instead of 1: each further one costs a server process and its
        # authentication (JDBC's first one also loads the driver's classes, so only the others are compared)
        assert (each_connect - once_connect) / (ITERATIONS - 1) > 1.0, (case, each_connect, once_connect)   # ms
        if not case.startswith("jdbc:"):
            # ITERATIONS connections against 1 (9.7x seen for 50 with three test suites on two cores)
            assert each_connect > 5 * once_connect, (case, each_connect, once_connect)


def test_jdbc_normal_holds_far_more_memory_than_its_cursor_on_the_largest_result(quick):
    res, rep, _ = quick
    rss = medians_by_case(rep["measurements"], "peak_rss_mib")
    for transport in ("tcp", "remote"):
        normal = rss[f"jdbc:normal:-:{transport}:sql10m:once:p-all:file:0ms:15"]
        cursor = rss[f"jdbc:cursor:1000:{transport}:sql10m:once:p-all:file:0ms:15"]
        assert normal > 2 * cursor, (transport, normal, cursor)
        # libpq's normal mode holds the whole PGresult; its single-row mode a row
        assert rss[f"libpq:normal:-:{transport}:sql10m:once:p-all:file:0ms:15"] > \
            4 * rss[f"libpq:single-row:-:{transport}:sql10m:once:p-all:file:0ms:15"]
    assert "Peak memory of the normal method over the streaming ones" in res.stdout
    row = next(line for line in res.stdout.splitlines() if "JDBC" in line and "normal / cursor" in line)
    assert float(row.split("normal / cursor")[1].split()[2]) > 2


def test_the_seeds_analysis_covers_the_runs_cases(quick):
    """report.py's groups and normalised durations (the seed's testresults, ifmeth_cat_results and
    loccomm_cat_results) against the run's cases and a computation from the exported measurements."""
    _, rep, _ = quick
    result = RunResult.from_export(rep).study
    groups = seed_groups(result)
    assert len(groups) == 120 and {g.case.case_id for g in groups} == {m["case_id"] for m in rep["measurements"]}
    assert sum(g.grpsz for g in groups) == 120 * ROUNDS and all(g.grpsz == ROUNDS for g in groups)
    # the seed's driver tables, as this run's cases fill them
    assert len({g.key.interface for g in groups}) == 4
    assert len({(g.key.interface, g.location) for g in groups}) == 3 + 3 + 2 + 3          # conninfos
    assert {g.candidate for g in groups} == CANDIDATES                                       # alternateclientcopy
    assert {(g.key.query, g.key.strategy, g.numiter) for g in groups} == \
        {("sql001", "each", NUMITER), ("sql001", "once", NUMITER), ("sql50k", "once", "001"), ("sql10m", "once", "001")}
    assert {g.key.output for g in groups} == {"p-all:file"}                                 # printfracdest
    jdbc = next(g for g in groups if g.case.case_id == "jdbc:normal:-:tcp:sql001:each:p-all:file:0ms:15")
    assert (jdbc.candidate, jdbc.location, jdbc.ifmeth_testcase) == ("JDBC:acc-n", "lcl:tcp",
                                                                      f"sql001:{NUMITER}:lcl:tcp:0:p-all:file")
    # ifmeth_cat_results: each case's nml_dur as computed here from the measurements
    cases, _ = by_hand(rep["measurements"], IFMETH_TESTCASE, ("interface", "method"))
    ifmeth = normalised(groups, "ifmeth_testcase")
    assert len(ifmeth) == 120 and all(0 <= nd <= 1 for _, nd, _ in ifmeth)
    for g, nd, _ in ifmeth:
        assert abs(nd - cases[g.case.case_id][1]) < 1e-5, g.case.case_id
    per_testcase = defaultdict(list)
    for g, nd, _ in ifmeth:
        per_testcase[g.ifmeth_testcase].append(nd)
    assert len(per_testcase) == 12 and all(min(v) == 0 and max(v) == 1 for v in per_testcase.values())
    # loccomm_cat_results: the transports of each interface/method testcase
    loccomm, by_location = by_hand(rep["measurements"], ("interface", "method", "sqlstrat", "output", "pg"),
                                   ("transport",))
    assert len(normalised(groups, "loccomm_testcase")) == len(loccomm) == 120
    ranked = {r.candidate: r.avg_nml_dur for r in location_ranking(groups)["15"]}
    assert ranked.keys() == {"lcl:ipc", "lcl:tcp", "rmt:tcp"}
    for transport, location in (("unix", "lcl:ipc"), ("tcp", "lcl:tcp"), ("remote", "rmt:tcp")):
        assert abs(ranked[location] - by_location[(transport,)]) < 0.0011, location
    # the seed's strategy summary: connecting per query costs more than connecting once. By how much on
    # the seed's clock (process start included) is a timing claim for an idle machine: 1.99x beside
    # another suite (load 9 on 2 cores) at 20 iterations; bench/connect_per_query.py checks it per case.
    avg = {tc: statistics.fmean(g.duration for g in groups if g.ifmeth_testcase == tc) for tc in per_testcase}
    assert avg[f"sql001:{NUMITER}:lcl:tcp:0:p-all:file"] > avg[f"sql001:{NUMITER}:lcl:tcp:1:p-all:file"]


def test_the_earlier_versions_seed_003_sql_is_dropped(quick, results_db):
    """Results databases of the earlier version held seed 003's analysis as views and functions: the
    schema drops them (and keeps the generic views)."""
    with psycopg.connect(results_db) as conn:
        names = {r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'pgpathbench' UNION SELECT p.proname FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'pgpathbench'")}
    assert not names & set(SEED003_SQL), names & set(SEED003_SQL)
    assert {"metric_value", "case_summary", "link_rtt", "fdw_overhead_summary", "fdw_overhead_ratio"} <= names


def test_report_prints_the_seeds_summaries_and_what_it_could_not_show(quick):
    res, _, _ = quick
    out = res.stdout
    for title in ("Interface/method: candidates ranked", "Location/transport ranked",
                  "Query/connect strategy: average duration per testcase", "Connect per query vs connect once",
                  "Per testcase: candidates by average duration", "Per interface/method: duration by location",
                  "Where the time goes: connect, execute, fetch", "Client CPU and peak memory per method",
                  "Every client returns the same data"):
        assert title in out, title
    assert "Failed measurements" not in out
    # the seed's published per-testcase figure beside ours (libpq normal, 1 row x 50k, unix socket, once)
    row = next(line for line in out.splitlines() if line.strip().startswith(f"sql001:{NUMITER}:lcl:ipc:1:p-all:file")
               and "libpq:acc-n" in line)
    assert row.split()[-1] == "7.721"


@pytest.mark.skipif(find_toxiproxy() is None, reason="toxiproxy-server not built (scripts/install-toxiproxy)")
def test_remote_link_adds_its_latency_to_every_query(workspace_root):
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--interface", "libpq", "--method", "normal",
                      "--transport", "remote", "--sqlstrat", "sql001:once", "--output", "p-none:null",
                      "--latency", "0,3ms", "--iterations", "20", "--repeat", "1", workspace=workspace_root)
    assert res.returncode == 0, res.stderr[-3000:]
    rep = json.loads(pgpathbench_main("report", "latest", "--format", "json", workspace=workspace_root).stdout)
    # the median iteration (the client's histogram): a busy machine inflates a mean, hardly a median
    per_query = {m["dims"]["latency"]: m["metrics"]["latency_p50_ms"] for m in rep["measurements"]}
    assert set(per_query) == {"0ms", "3ms"}
    # one round trip of 3 ms per query: a floor no load can lower (load inflates both sides, and
    # the unlinked one most, so their difference is not asserted)
    assert per_query["3ms"] >= 3.0 and per_query["0ms"] < per_query["3ms"], per_query
    assert "rmt+3ms:tcp" in res.stdout and "3ms link, " in res.stdout
