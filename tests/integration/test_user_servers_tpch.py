"""file-fdw-tpch with its tpch role on a server pgpathbench does not manage (--server tpch=DSN).

The user's server of tests/user_server.py (PostgreSQL 15, on 127.0.0.2, scram over TCP, the tool's
login a non-superuser with CREATEDB only, its password from the user's PGPASSFILE). The quick
preset's smallest scale, few rounds: the files generated here, loaded by COPY FROM STDIN into a
database of ours there, the regular storage of the single layout measured (foreign and the
partitioned layout left out, said), every answer checked as a managed run checks it (every side
and DuckDB); the server as found; no password anywhere. Named explicitly, what a user server cannot
run is refused before anything is written; the worker role stays managed only.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict

import pytest

from conftest import assert_user_error, pgpathbench, pgpathbench_main, report_json, run_watching_ps
from user_server import UserServer, assert_left_as_found, assert_no_secret, use_passfile

pytestmark = pytest.mark.integration

QUERIES = ("q1", "q3", "q5", "q6", "q10", "q12", "q14", "q19")
ROWS = {"q1": 4, "q3": 10, "q5": 5, "q6": 1, "q10": 20, "q12": 2, "q14": 1, "q19": 1}   # at any scale
ROUNDS = 3
QUICK = ["--preset", "quick", "--repeat", str(ROUNDS)]


@pytest.fixture(scope="module")
def server(workspace_root):
    with UserServer(workspace_root / "user-servers-tpch", "tpch", "127.0.0.2") as s:
        yield s


def test_tpch_on_a_user_server_measures_its_regular_side_and_leaves_it_as_found(server, workspace_root,
                                                                                 monkeypatch):
    ws = workspace_root / "ws-user-tpch"
    use_passfile(monkeypatch, workspace_root / "pgpass-tpch", server)
    before = {server.dsn(): server.known_objects()}
    server.mark_log()
    t0 = time.monotonic()
    res, cmdlines = run_watching_ps("run", "file-fdw-tpch", *QUICK, "--server", f"tpch={server.dsn()}", workspace=ws)
    print(f"\nfile-fdw-tpch on a user server: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "tpch is your server: the regular storage of the single layout only (foreign: file_fdw reads " \
           "files on the server's own disk" in res.stderr

    run = report_json(ws)
    ms = run["measurements"]
    assert all(m["ok"] for m in ms), [(m["case_id"], m["error"]) for m in ms if not m["ok"]][:5]
    assert Counter(m["case_id"] for m in ms) == {f"{q}:regular:single:15": ROUNDS for q in QUERIES}
    digests = defaultdict(set)
    for m in ms:
        mt = m["metrics"]
        assert mt["duration_ms"] > 0 and mt["rows"] == ROWS[m["dims"]["queries"]], m["case_id"]
        digests[m["dims"]["queries"]].add(mt["answer"])
        assert m["evidence"]["missing"]["tpch.cpu_ms"] == "host processes not visible"
    assert all(len(v) == 1 for v in digests.values()), digests
    session = run["run"]["environment"]["sessions"][-1]
    fp = session["setup"]["15"]["file-fdw-tpch"]
    assert fp["storages"] == ["regular"] and fp["layouts"] == ["single"]
    assert fp["duckdb"]["checked"] is True      # the answers checked as a managed run's: DuckDB over the files
    for q, a in fp["answers"].items():
        assert a["duckdb"] == "agrees" and a["agreeing"] == ["regular/single"] and a["rows"] == ROWS[q], (q, a)
    assert fp["load"]["bytes"] > 0 and fp["settings"]["cluster"] == {}
    assert fp["settings"]["session"] == {"work_mem": "64MB", "jit": "off", "synchronous_commit": "off"}
    text = json.dumps(run)
    assert '"user_tpch"' in text
    probes = [p for p in run["link_probes"] if p["link"] == "pg15_tpch_0ms"]   # the real way there, every round
    assert len(probes) == 2 * ROUNDS and all(p["rtt_median_ms"] > 0 for p in probes)

    assert_left_as_found([server], before, ws)
    markdown = pgpathbench_main("report", "latest", "--format", "markdown", workspace=ws).stdout
    csv = pgpathbench_main("export", "latest", "--format", "csv", workspace=ws).stdout
    assert "single regular" in markdown and "single foreign" not in markdown
    assert "311.3" in markdown and "Published PostgreSQL foreign" in markdown   # the seed's seconds beside ours
    assert "Slowdown through file_fdw" not in markdown and "Answer checks" in markdown
    assert_no_secret([server.password()], {"stdout": res.stdout, "stderr": res.stderr, "json": text,
                                           "markdown": markdown, "csv": csv, "ps": "\n".join(cmdlines)})


@pytest.mark.parametrize("case", ["storage foreign", "layout partitioned", "layout scaleout", "worker",
                                  "coordinator foreign"])
def test_what_a_user_server_cannot_run_is_refused_with_nothing_written(server, workspace_root, case):
    ws = workspace_root / f"ws-user-tpch-bad-{case.replace(' ', '-')}"
    dsn = f"{server.dsn()} password={server.password()}"
    args, message = {
        "storage foreign": (["--server", f"tpch={dsn}", "--storage", "regular,foreign"],
                            "--storage foreign: your server in the tpch role (--server tpch) cannot run it: "
                            "file_fdw reads files on the server's own disk"),
        "layout partitioned": (["--server", f"tpch={dsn}", "--layout", "partitioned"],
                               "--layout partitioned: your server in the tpch role (--server tpch) cannot run it"),
        # the postgres_fdw layout, by the name runs stored before it had it
        "layout scaleout": (["--server", f"tpch={dsn}", "--layout", "single,scaleout"],
                            "--layout postgres_fdw: your server in the tpch role (--server tpch) cannot run it: its "
                            "workers are managed servers on this machine's loopback"),
        "worker": (["--server", f"worker={dsn}"], "--server worker: the worker role of file-fdw-tpch cannot be a "
                                                  "user server: its file_fdw partitions read files on the "
                                                  "server's own disk"),
        "coordinator foreign": (["--server", f"coordinator={dsn}", "--storage", "foreign"],
                                "--storage foreign: your Citus cluster (--server coordinator) cannot run it"),
    }[case]
    server.mark_log()
    res = pgpathbench("run", "file-fdw-tpch", *QUICK, *args, workspace=ws)
    assert_user_error(res, message, untouched=ws)
    assert server.password() not in res.stderr
    assert server.statements_log() == [] and server.ours() == []   # refused before connecting at all
