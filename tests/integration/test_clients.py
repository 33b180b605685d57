"""The native clients (seed 003) against a real managed server: every client, every mode it has,
over the unix socket and TCP, connecting once and per iteration, printing or not, to /dev/null
and to a file. Every run must return the same rows, bytes and checksum as psql's COPY of the
same query, and a file destination must hold exactly COPY's text (clients/CONTRACT.md). The
checksum does not depend on the order of the rows, but on every byte of each; the sessions
take PGOPTIONS (synchronize_seqscans=off in the studies), the JDBC client too. Over TCP every client
reads the server's password from PGPASSFILE (Cluster.client_env), as in the studies: no conninfo here
holds one.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import REPO, contract_checksum
from pgpathbench.tools.clients import bucket, bucket_width, iteration_percentiles, session_env
from pgpathbench.procs import OsUser
from pgpathbench.servers.binaries import resolve
from pgpathbench.servers.cluster import Cluster, free_port
from pgpathbench.tools.psql_copy import copy_reference

pytestmark = pytest.mark.integration

TOOLS = REPO / ".tools" / "clients"
KEYS = ["client", "version", "mode", "iterations", "rows", "bytes", "checksum", "connect_s", "exec_s",
        "fetch_s", "total_s", "iteration_us"]
# The module's 65 or so JVMs compile only with C1 and collect serially: what they return is the
# same, their CPU 0.8 s instead of 1.4 s each (measured on t2k); no figure here is a JVM's speed.
TEST_JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
# client -> (command, modes, transports). cursor:333 leaves a short last batch of 2000 rows.
CLIENTS = {
    "libpq": ([str(TOOLS / "pgpb_libpq")], ["normal", "single-row", "copy"], ["unix", "tcp"]),
    "odbc": ([str(TOOLS / "pgpb_odbc")], ["normal", "cursor:333"], ["unix", "tcp"]),
    "jdbc": (["java", *TEST_JVM, "-jar", str(TOOLS / "pgpb-jdbc.jar")], ["normal", "cursor:333", "copy"], ["tcp"]),
    "psycopg": ([str(TOOLS / "pgpb_psycopg")], ["normal", "cursor:333", "copy"], ["unix", "tcp"]),
}
UNSUPPORTED = {"libpq": "cursor:5", "odbc": "copy", "jdbc": "single-row", "psycopg": "single-row"}
SPECIAL_ID = 1000
PASSFILE_ENV: dict[str, str] = {}   # PGPASSFILE of the module's server (the fixture sets it): every run's
QUERIES = {  # name -> (SQL, iterations)
    "one": (f"select * from t2k where id = {SPECIAL_ID}", 20),
    "all": ("select * from t2k;", 2),  # the trailing ';' is the clients' to strip
}
PRINTING = [("0", "null"), ("1", "null"), ("1", "file")]


@pytest.fixture(scope="module")
def built():
    """scripts/build-clients, as on a fresh machine (a second call only checks timestamps)."""
    res = subprocess.run([str(REPO / "scripts" / "build-clients")], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    for name in ("pgpb_libpq", "pgpb_odbc", "pgpb-jdbc.jar", "pgpb_psycopg", "libpgpb_rowhash.so"):
        assert (TOOLS / name).is_file(), name


@pytest.fixture(scope="module")
def server(workspace_root):
    """t2k: seed 003's t50k shape (id + nine 99-character text columns), 2000 rows; row 1000
    holds what COPY must escape (tab, newline, CR, backslash, \\b \\f \\v), a literal \\N, an empty
    string beside a NULL, another control byte and non-ASCII characters (2, 3 and 4 bytes)."""
    c = Cluster("clients", workspace_root / "clients", resolve(15), OsUser.for_servers())
    c.start()
    PASSFILE_ENV.update(PGPASSFILE=str(c.passfile))
    cols = ", ".join(f"'{i}' || repeat('{'abc'[(i - 1) % 3]}', 98)" for i in range(1, 10))
    c.execute(
        "postgres",
        "CREATE TABLE t2k (id int PRIMARY KEY, " + ", ".join(f"x{i} text" for i in range(1, 10)) + ")",
        f"INSERT INTO t2k SELECT id, {cols} FROM generate_series(1, {SPECIAL_ID - 1}) AS t(id)",
        # PostgreSQL's E'' strings have no \v: the vertical tab is \x0b
        f"INSERT INTO t2k VALUES ({SPECIAL_ID}, NULL, E'a\\tb', E'back\\\\slash', E'new\\nline', "
        "E'cr\\r bs\\b ff\\f vt\\x0b', 'café € 😀', '', E'ctl\\x01\\x1f', E'\\\\N')",
        f"INSERT INTO t2k SELECT id, {cols} FROM generate_series({SPECIAL_ID + 1}, 2000) AS t(id)",
    )
    yield c
    c.remove()


def psql_copy(server: Cluster, sql: str) -> bytes:
    """psql's COPY (sql) TO STDOUT output, byte for byte."""
    return subprocess.run([str(server.bins.path("psql")), "-X", "-q", "-d", server.conninfo(), "-c",
                           f"COPY ({sql.rstrip(';')}) TO STDOUT"],
                          capture_output=True, env={**os.environ, "PGCLIENTENCODING": "UTF8"}, check=True).stdout


@pytest.fixture(scope="module")
def reference(server):
    """psql's COPY (query) TO STDOUT output, byte for byte, per query."""
    ref = {name: psql_copy(server, sql) for name, (sql, _) in QUERIES.items()}
    assert ref["all"].count(b"\n") == 2000 and ref["one"].count(b"\n") == 1
    assert ref["one"] == ref["all"].split(b"\n")[SPECIAL_ID - 1] + b"\n"
    # the escapes COPY made, which every client must reproduce
    assert b"\\N\ta\\tb\tback\\\\slash\tnew\\nline\tcr\\r bs\\b ff\\f vt\\v\tcaf\xc3\xa9" in ref["one"]
    assert ref["one"].endswith(b"\t\tctl\x01\x1f\t\\\\N\n")
    return ref


def run(client: str, *args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """The client with args, in env (os.environ) plus the server's PGPASSFILE."""
    return subprocess.run(CLIENTS[client][0] + list(args), capture_output=True, text=True, timeout=timeout,
                          env={**(os.environ if env is None else env), **PASSFILE_ENV})


@pytest.fixture(scope="module")
def results(built, server, tmp_path_factory):
    """Every client x mode x transport x query x -k x (-p, -o): JSON, and the file's bytes.
    Two runs at a time (2 cores): each run's own figures are compared only with themselves."""
    out_dir = tmp_path_factory.mktemp("client-output")
    keys = [(client, mode, transport, query, keep, printing, dest)
            for client, (_, modes, transports) in CLIENTS.items() for mode in modes for transport in transports
            for query in QUERIES for keep in ("0", "1") for printing, dest in PRINTING]

    def one(key):
        client, mode, transport, query, keep, printing, dest = key
        sql, n = QUERIES[query]
        path = out_dir / ("-".join(key).replace(":", "_") + ".out")
        res = run(client, "-c", server.conninfo(transport=transport), "-s", sql, "-k", keep, "-n", str(n),
                  "-p", printing, "-o", str(path) if dest == "file" else "/dev/null", "-m", mode)
        assert res.returncode == 0, (key, res.stderr)
        file_bytes = path.read_bytes() if dest == "file" else None
        path.unlink(missing_ok=True)
        return key, (json.loads(res.stdout, object_pairs_hook=list), res.stderr, file_bytes)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, keys))


def test_every_run_prints_one_json_object(results):
    assert len(results) == len(QUERIES) * 2 * len(PRINTING) * (6 + 4 + 3 + 6)
    for (client, mode, *_), (pairs, stderr, _) in results.items():
        assert [k for k, _ in pairs] == KEYS
        out = dict(pairs)
        assert out["client"] == client and out["mode"] == mode and stderr == ""
        assert isinstance(out["version"], str) and any(ch.isdigit() for ch in out["version"])
        assert len(out["checksum"]) == 16 and int(out["checksum"], 16) >= 0


def test_rows_bytes_and_checksum_agree_with_psql_copy(results, reference):
    for query, (_, n) in QUERIES.items():
        expected = {"iterations": n, "rows": n * reference[query].count(b"\n"),
                    "bytes": n * len(reference[query]), "checksum": contract_checksum(reference[query], n)}
        assert expected["bytes"] > 0
        for key, (pairs, _, _) in results.items():
            if key[3] == query:
                out = dict(pairs)
                assert {k: out[k] for k in expected} == expected, key


# -- the checksum: every row counts, their order does not ----------------------------------------
ORDERED = {"asc": "select * from t2k order by id", "desc": "select * from t2k order by id desc",
           "changed": "select * from t2k_changed order by id"}


@pytest.fixture(scope="module")
def ordered(built, server):
    """Every client x mode (over TCP, which every client has) reading t2k in both orders, and
    t2k_changed: t2k with one byte of one value changed. -> (JSON, psql COPY reference) per query."""
    server.execute("postgres", "CREATE TABLE t2k_changed AS SELECT * FROM t2k",
                   "UPDATE t2k_changed SET x3 = 'Z' || substr(x3, 2) WHERE id = 1999")
    refs = {name: copy_reference(server.bins.path("psql"), server.conninfo(), sql) for name, sql in ORDERED.items()}
    keys = [(client, mode, name) for client, (_, modes, _) in CLIENTS.items() for mode in modes for name in ORDERED]

    def one(key):
        client, mode, name = key
        res = run(client, "-c", server.conninfo(transport="tcp"), "-s", ORDERED[name], "-m", mode)
        assert res.returncode == 0, (key, res.stderr)
        return key, json.loads(res.stdout)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, keys)), refs


def test_checksum_ignores_row_order_and_equals_psql_copy(ordered, server, reference):
    outputs, refs = ordered
    asc, desc = psql_copy(server, ORDERED["asc"]), psql_copy(server, ORDERED["desc"])
    assert asc != desc and sorted(asc.split(b"\n")) == sorted(desc.split(b"\n"))   # the same rows, reordered
    # the Python side's reference (clients.RowChecksum over psql's COPY) is the definition's, in either order
    assert refs["asc"].checksum == refs["desc"].checksum == contract_checksum(asc) == contract_checksum(desc) \
        == contract_checksum(reference["all"])
    for client, (_, modes, _) in CLIENTS.items():
        for mode in modes:
            got = {name: (o["rows"], o["bytes"], o["checksum"]) for (c, m, name), o in outputs.items()
                   if (c, m) == (client, mode)}
            assert got["asc"] == got["desc"] == (refs["asc"].rows, refs["asc"].bytes, refs["asc"].checksum), \
                (client, mode)


def test_checksum_changes_with_one_byte_of_one_row(ordered):
    outputs, refs = ordered
    assert refs["changed"].bytes == refs["asc"].bytes and refs["changed"].checksum != refs["asc"].checksum
    for (client, mode, name), o in outputs.items():
        if name == "changed":
            assert (o["rows"], o["bytes"], o["checksum"]) == \
                (refs["changed"].rows, refs["changed"].bytes, refs["changed"].checksum), (client, mode)


# -- the checksum reads 8 bytes at a time: values short and long, escapes on word boundaries ------
# rows of 1 to 18 bytes and more; then a value twice, so that the row's words straddle fields
EDGE_SQL = {"v": "select v from tedge order by id", "v-id-v": "select v, id, v from tedge order by id"}


@pytest.fixture(scope="module")
def edges(built, server, tmp_path_factory):
    """Every client x mode (over TCP), printing to a file and not, reading tedge: values of 0 to 17
    bytes, a NULL, and escapes (tab, backslash, newline), a 2-byte character and a literal \\N placed
    on each side of the first and second 8-byte words of a value. -> (outputs, psql's COPY text)."""
    values = [f"repeat('a', {n})" for n in range(18)] + ["NULL", "repeat('x', 7) || 'é' || 'y'"]
    values += [f"repeat('x', {k}) || {esc} || 'y'" for k in range(5, 10)
               for esc in (r"E'\t'", r"E'\\'", r"E'\n'", r"'\N'")]
    values += [r"repeat('z', 7) || E'\t' || repeat('z', 7) || E'\\' || repeat('z', 7) || E'\r\n' || 'zz'"]
    server.execute("postgres", "CREATE TABLE tedge (id int PRIMARY KEY, v text)",
                   "INSERT INTO tedge VALUES " + ", ".join(f"({i}, {v})" for i, v in enumerate(values)))
    out_dir = tmp_path_factory.mktemp("edges")
    keys = [(client, mode, printing, query) for client, (_, modes, _) in CLIENTS.items() for mode in modes
            for printing in ("0", "1") for query in EDGE_SQL]

    def one(key):
        path = out_dir / "-".join(key).replace(":", "_")
        res = run(key[0], "-c", server.conninfo(transport="tcp"), "-s", EDGE_SQL[key[3]], "-m", key[1], "-n", "2",
                  "-p", key[2], "-o", str(path))
        assert res.returncode == 0, (key, res.stderr)
        return key, (json.loads(res.stdout), path.read_bytes())

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, keys)), {query: psql_copy(server, sql) for query, sql in EDGE_SQL.items()}


def test_checksum_of_rows_around_word_boundaries(edges):
    """Every client's rows, bytes and checksum are conftest's oracle's over psql's COPY text (the
    contract's definition, not the tool's code), and a printed file is that text."""
    outputs, copy_texts = edges
    assert set(range(1, 19)) <= {len(row) + 1 for row in copy_texts["v"].split(b"\n")[:-1]}
    assert copy_texts["v"].count(b"\\t") >= 5 and copy_texts["v"].count(b"\\\\") >= 5
    assert len(outputs) == 2 * len(EDGE_SQL) * sum(len(modes) for _, modes, _ in CLIENTS.values())
    for key, (out, file_bytes) in outputs.items():
        copy_text = copy_texts[key[3]]
        expected = (2 * copy_text.count(b"\n"), 2 * len(copy_text), contract_checksum(copy_text, 2))
        assert (out["rows"], out["bytes"], out["checksum"]) == expected, key
        assert file_bytes == (copy_text * 2 if key[2] == "1" else b""), key


# -- PGOPTIONS: how the studies turn synchronized scans off (clients.session_env) ---------------------
SETTING = "select current_setting('synchronize_seqscans')"


@pytest.mark.parametrize("client", list(CLIENTS))
def test_sessions_take_pgoptions(built, server, client, tmp_path):
    """PGOPTIONS reaches the session (pgjdbc ignores it: the JDBC client passes it as its options),
    and a conninfo's own options win over it, as in libpq."""
    conninfo = server.conninfo(transport="tcp")
    path = tmp_path / "setting.out"
    for env, extra, expected in ((None, "", b"on\n"), (session_env(), "", b"off\n"),
                                 (session_env(), " options='-c synchronize_seqscans=on'", b"on\n")):
        res = run(client, "-c", conninfo + extra, "-s", SETTING, "-p", "1", "-o", str(path), env=env)
        assert res.returncode == 0, res.stderr
        assert path.read_bytes() == expected, (env and env["PGOPTIONS"], extra)


def test_file_destination_holds_copy_text(results, reference):
    checked = 0
    for key, (_, _, file_bytes) in results.items():
        if key[6] == "file":
            query = key[3]
            assert file_bytes == reference[query] * QUERIES[query][1], key
            checked += 1
    assert checked == 2 * 2 * 19


def test_timings_add_up(results):
    for key, (pairs, _, _) in results.items():
        out = dict(pairs)
        assert min(out["connect_s"], out["exec_s"], out["fetch_s"]) >= 0 and out["connect_s"] > 0, key
        # connect, exec and fetch are disjoint parts of the whole (6 decimals each: rounding slack)
        assert out["connect_s"] + out["exec_s"] + out["fetch_s"] <= out["total_s"] + 4e-6, key


def test_iteration_histograms_are_consistent(results):
    """iteration_us (clients/CONTRACT.md "Iteration times"): one count per iteration, in valid
    buckets, min and max in the first and last; the iterations are disjoint parts of total_s (not
    connect_s with -k 1) and hold every exec_s (and connect_s with -k 0); the percentiles of the
    -n 20 loops are ordered."""
    loops = 0
    for key, (pairs, _, _) in results.items():
        out, keep = dict(pairs), key[4] == "1"
        assert [k for k, _ in out["iteration_us"]] == ["min", "max", "hist"], key
        h = dict(out["iteration_us"])
        lowers, counts = [lo for lo, _ in h["hist"]], [n for _, n in h["hist"]]
        assert sum(counts) == out["iterations"] and min(counts) >= 1, key
        assert lowers == sorted(set(lowers)) and all(bucket(lo) == lo for lo in lowers), key
        assert 0 < h["min"] <= h["max"] and bucket(h["min"]) == lowers[0] and bucket(h["max"]) == lowers[-1], key
        # whole µs, truncated (1 µs each at most, beside the 6 decimals of the seconds)
        slack_us = 4 + out["iterations"]
        at_least = sum(lo * n for lo, n in h["hist"])
        at_most = sum((lo + bucket_width(lo)) * n for lo, n in h["hist"])
        assert at_least <= (out["total_s"] - (out["connect_s"] if keep else 0)) * 1e6 + slack_us, key
        assert at_most + slack_us >= (out["exec_s"] + (0 if keep else out["connect_s"])) * 1e6, key
        if out["iterations"] == 20:
            p = iteration_percentiles(h)
            assert p["latency_p50_ms"] <= p["latency_p90_ms"] <= p["latency_p95_ms"] <= p["latency_p99_ms"] \
                <= p["latency_max_ms"] == h["max"] / 1000, key
            assert p["latency_p50_ms"] >= h["min"] / 1000, key
            loops += 1
    assert loops == len(results) // 2


def sessions(server: Cluster, dbname: str) -> int:
    with server.connect() as conn:
        return conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (dbname,)).fetchone()[0]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_connecting_per_iteration_opens_a_session_per_iteration(built, server, client):
    """-k 0 connects before every iteration, -k 1 once: counted by the server (pg_stat_database's
    sessions of a database only this test uses), not inferred from timings, which JDBC's first
    connection (driver loading) dominates."""
    dbname = f"sessions_{client}"
    server.create_database(dbname)
    conninfo = server.conninfo(dbname, transport="tcp")
    for keep, n, expected in (("0", 7, 7), ("1", 7, 1)):
        before = sessions(server, dbname)
        res = run(client, "-c", conninfo, "-s", "select 1", "-k", keep, "-n", str(n))
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["connect_s"] > 0
        # a backend reports its session when it exits, just after the client has gone
        deadline = time.monotonic() + 30
        while sessions(server, dbname) - before < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert sessions(server, dbname) - before == expected, (client, keep)


def test_print_0_writes_nothing(built, server, tmp_path):
    for client in CLIENTS:
        path = tmp_path / f"{client}.out"
        res = run(client, "-c", server.conninfo(transport="tcp"), "-s", QUERIES["all"][0], "-p", "0", "-o", str(path))
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["rows"] == 2000 and path.read_bytes() == b""


@pytest.mark.parametrize("client", list(CLIENTS))
def test_usage_errors_exit_2(built, server, client, tmp_path):
    c = server.conninfo(transport="tcp")
    bad = [
        [],
        ["-c", c],
        ["-s", "select 1"],
        ["-c", c, "-s", "select 1", "-k", "2"],
        ["-c", c, "-s", "select 1", "-n", "0"],
        ["-c", c, "-s", "select 1", "-n", "many"],
        ["-c", c, "-s", "select 1", "-p", "yes"],
        ["-c", c, "-s", "select 1", "-m", "bogus"],
        ["-c", c, "-s", "select 1", "-m", UNSUPPORTED[client]],
        ["-c", c, "-s", "select 1", "-x", "1"],
        ["-c", c, "-s", "select 1", "extra"],
        ["-c", c, "-s", "select 1", "-o", str(tmp_path / "no" / "such" / "dir")],
        ["-c", "host='unterminated", "-s", "select 1"],
    ]
    if client != "libpq":
        bad.append(["-c", c, "-s", "select 1", "-m", "cursor:0"])
    for args in bad:
        res = run(client, *args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert res.stdout == "" and f"pgpb_{client}: " in res.stderr and "usage:" in res.stderr, (args, res.stderr)


def test_chunked_mode_needs_libpq_17(built, server):
    res = run("libpq", "-c", server.conninfo(), "-s", "select 1", "-m", "chunked:100")
    # Built against Debian's libpq 15 here; a libpq 17+ build would run the mode instead.
    assert res.returncode == 2 and "chunked needs libpq 17+" in res.stderr, res.stderr


def test_jdbc_refuses_unix_sockets(built, server):
    for conninfo in (server.conninfo(transport="unix"), f"port={server.port} dbname=postgres"):
        res = run("jdbc", "-c", conninfo, "-s", "select 1")
        assert res.returncode == 2 and "unix socket" in res.stderr, res.stderr


@pytest.mark.parametrize("client", list(CLIENTS))
def test_unreachable_server_exits_3(built, client):
    res = run(client, "-c", f"host=127.0.0.1 port={free_port()} user=nobody dbname=none connect_timeout=5",
              "-s", "select 1")
    assert res.returncode == 3, (res.stdout, res.stderr)
    assert res.stdout == "" and f"pgpb_{client}: connection failed" in res.stderr, res.stderr


@pytest.mark.parametrize("client", list(CLIENTS))
def test_server_error_exits_3(built, server, client):
    res = run(client, "-c", server.conninfo(transport="tcp"), "-s", "select * from no_such_table")
    assert res.returncode == 3, (res.stdout, res.stderr)
    assert res.stdout == "" and "no_such_table" in res.stderr, res.stderr
