"""Nothing breaks: concurrent runs in one workspace, SIGKILLs at several points of a linked run,
a managed server killed mid-run or in initdb, `clean` beside a live run, failed measurements.
Real servers; tolerances fit a loaded 2-core machine (no timing targets)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import (STATE_ONLY_RATE, assert_user_error, children_of, close_workspace, netns_of_run,
                      our_processes, pgpathbench, pgpathbench_main, report_json, spawn_pgpathbench, started_cluster,
                      workspace_base)
from pgpathbench.procs import cmdline
from pgpathbench.servers.cluster import socket_dir
from pgpathbench.store import keeper
from pgpathbench.workspace import GATE

# What is asserted is each run's state, not its figures: measured at a fixed rate.
SMALL = ["run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local,fdw_local",
         "--clients", "1", *STATE_ONLY_RATE, "--repeat", "2", "--duration", "1"]
LINKED = ["run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local,fdw_external",
          "--clients", "1", *STATE_ONLY_RATE, "--repeat", "2", "--duration", "1", "--latency", "0,1ms"]


@pytest.fixture
def ws():
    """A workspace of its own: `latest` is this test's run, `runs` lists only its runs."""
    root = workspace_base() / f"robust-{os.getpid()}-{secrets.token_hex(2)}"
    yield root
    close_workspace(root)


def runs(ws: Path) -> list[dict]:
    res = pgpathbench_main("runs", "--format", "json", workspace=ws)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def read_until(proc: subprocess.Popen, predicate, timeout: float = 300) -> list[str]:
    """stderr lines of a spawned run up to the first one that satisfies predicate."""
    deadline, lines = time.monotonic() + timeout, []
    while True:
        assert time.monotonic() < deadline, "run made no progress:\n" + "".join(lines)
        line = proc.stderr.readline()
        assert line, f"run ended early ({proc.wait()}):\n" + "".join(lines)
        lines.append(line)
        if predicate(line):
            return lines


def measured(n: int):
    return lambda line: line.startswith(f"[{n}/")


def wait_gone(ws: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while our_processes(ws) and time.monotonic() < deadline:   # children die with their parent
        time.sleep(0.2)
    assert our_processes(ws) == []


def assert_nothing_left(ws: Path, run_id: str) -> None:
    assert our_processes(ws) == []
    assert not (ws / "servers").exists() or list((ws / "servers").iterdir()) == [], "servers/ must be empty"
    network = ws / "network.json"
    assert not network.exists() or run_id not in network.read_text()
    assert netns_of_run(run_id) == []


def shared_memory_of(postmaster: int) -> list[str]:
    """What a running postmaster holds that outlives a SIGKILL of it: its System V segment (by
    creator pid) and the dynamic shared memory segments it maps (/dev/shm/PostgreSQL.*)."""
    sysv = [f"shmid {line.split()[1]}" for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
            if line.split()[4] == str(postmaster)]
    maps = Path(f"/proc/{postmaster}/maps").read_text().splitlines()
    return sysv + sorted({line.split()[-1] for line in maps if "/dev/shm/PostgreSQL." in line})


def still_there(held: list[str]) -> list[str]:
    shmids = {f"shmid {line.split()[1]}" for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]}
    return [h for h in held if h in shmids or Path(h).exists()]


def complete(ws: Path, run_id: str, pairs: int) -> dict:
    rep = report_json(ws, run_id)
    keys = [(m["case_id"], m["round"]) for m in rep["measurements"]]
    assert len(keys) == len(set(keys)) == pairs, keys
    assert all(m["ok"] for m in rep["measurements"]), [m["error"] for m in rep["measurements"]]
    assert rep["run"]["status"] == "finished"
    return rep


def test_two_runs_at_once_share_the_workspace(ws):
    first = spawn_pgpathbench(*SMALL, workspace=ws)
    time.sleep(1)
    second = spawn_pgpathbench(*SMALL, workspace=ws)
    during = []
    while first.poll() is None or second.poll() is None:   # readers while both write
        for args in (["runs", "--format", "json"], ["report", "--format", "json"]):
            res = pgpathbench(*args, workspace=ws)
            during.append(res)
            assert res.returncode in (0, 2) and "Traceback" not in res.stderr, res.stderr
        if len(during) >= 6:
            break
    outs = [p.communicate(timeout=600) for p in (first, second)]
    for proc, (_out, err) in zip((first, second), outs):
        assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert sum(r.returncode == 0 for r in during) >= len(during) - 1, "reports and runs lists work during runs"
    stored = runs(ws)
    assert len(stored) == 2 and {r["status"] for r in stored} == {"finished"}
    for r in stored:
        assert r["measurements"] == 4 and r["errors"] == 0
        complete(ws, r["run_id"], 4)
        assert_nothing_left(ws, r["run_id"])


@pytest.mark.parametrize("kill_point", ["preparing", "measuring", "after the last measurement"])
def test_sigkill_of_a_linked_run_then_resume_without_clean(ws, kill_point):
    proc = spawn_pgpathbench(*LINKED, workspace=ws)
    if kill_point == "preparing":
        read_until(proc, lambda line: "servers up" in line)
    elif kill_point == "measuring":
        read_until(proc, measured(2))
    else:
        # At once: the last round's probe of the 1 ms link takes 100 round trips (>= 100 ms), and the
        # teardown follows it; a sleep here could let the run finish first (servers stop in ~0.1 s).
        read_until(proc, measured(6))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_gone(ws)
    killed = runs(ws)[-1]
    assert killed["status"] == "killed"
    # what the resume must remove by itself
    assert (ws / "servers" / killed["run_id"]).is_dir()
    assert killed["run_id"] in (ws / "network.json").read_text() if os.geteuid() == 0 else True
    res = pgpathbench("run", "--resume", "latest", workspace=ws)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    complete(ws, killed["run_id"], 6)
    assert_nothing_left(ws, killed["run_id"])
    left = [p for d in {tempfile.gettempdir(), "/dev/shm"} for p in Path(d).glob(f"pgpathbench-*-{proc.pid}-*")]
    assert left == [], "the resume removes the scratch files of the killed run"


def test_a_server_killed_mid_measurement_stops_the_run_and_resume_fills_the_hole(ws):
    proc = spawn_pgpathbench(*SMALL[:-4], "--repeat", "3", "--duration", "2", workspace=ws)
    # The run's id from its first line, and the server's pid, before the measurement to interrupt
    # begins: asking `runs` then takes a second or more on a busy machine, which let that
    # measurement end before the kill (the death was then found between rounds, no measurement failed).
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{4})", "".join(read_until(proc, measured(1)))).group(1)
    pid = int((ws / "servers" / run_id / "pg15_source" / "data" / "postmaster.pid").read_text().split()[0])
    read_until(proc, measured(3))   # round 2's first: its second follows at once, no probe between
    time.sleep(0.5)   # into that measurement (2 s of pgbench)
    held = shared_memory_of(pid)
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert any(h.startswith("shmid") for h in held) and any(h.startswith("/dev/shm/") for h in held), held
    assert still_there(held) == [], "the run frees what the killed server left, before removing its data"
    assert proc.returncode == 1, err[-3000:]
    said = [line for line in err.splitlines() if line.startswith("pgpathbench:")]
    assert len(said) == 1 and "server pg15_source (killed by SIGKILL) died" in said[0], err[-3000:]
    assert f"'pgpathbench run --resume {run_id}'" in said[0] and "Traceback" not in err
    wait_gone(ws)
    stopped = report_json(ws, run_id)
    assert stopped["run"]["status"] == "failed"
    failed = [m for m in stopped["measurements"] if not m["ok"]]
    assert len(failed) == 1 and "died during the measurement" in failed[0]["error"], failed

    res = pgpathbench("run", "--resume", run_id, workspace=ws)
    assert res.returncode == 0, res.stderr[-3000:]
    rep = complete(ws, run_id, 6)
    for m in failed:   # measured again; the failure is kept
        again = next(x for x in rep["measurements"] if (x["case_id"], x["round"]) == (m["case_id"], m["round"]))
        assert again["attempts"] == 2 and "died" in again["previous_errors"][0]["error"]
    assert_nothing_left(ws, run_id)


def test_clean_after_a_sigkilled_run_removes_what_it_left_and_resume_completes(ws):
    """Server and tool both SIGKILLed (the tool first held still, so it cannot tear down): the
    server's shared memory outlives them, and `clean` frees it before removing its data; it
    removes the run's namespace and servers too (its lock is free); the run then resumes complete."""
    proc = spawn_pgpathbench(*LINKED, "--repeat", "1", workspace=ws)
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{4})", "".join(read_until(proc, measured(1)))).group(1)
    data = ws / "servers" / run_id / "pg15_source" / "data"
    pid = int((data / "postmaster.pid").read_text().split()[0])
    held = shared_memory_of(pid)
    proc.send_signal(signal.SIGSTOP)
    os.kill(pid, signal.SIGKILL)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_gone(ws)
    assert (data / "postmaster.pid").exists() and still_there(held) == held, "what clean has to free"
    assert run_id in (ws / "network.json").read_text() if os.geteuid() == 0 else True, "its namespace, too"
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 0, res.stderr
    said = " ".join(res.stdout.split())
    assert f"freed the shared memory of the crashed server {data.parent}" in said, res.stdout
    assert f"removed {ws / 'servers' / run_id}" in said and "in progress" not in said, res.stdout
    assert still_there(held) == [] and not data.exists()
    assert_nothing_left(ws, run_id)
    res = pgpathbench("run", "--resume", run_id, workspace=ws)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    complete(ws, run_id, 3)


def holds_flock(pid: int, path: Path) -> bool:
    """Whether process `pid` holds a flock on `path` (/proc/locks: pid and device:inode)."""
    try:
        inode = os.stat(path).st_ino
    except FileNotFoundError:
        return False
    return any(f[4] == str(pid) and f[5].endswith(f":{inode}")
               for f in (line.split() for line in Path("/proc/locks").read_text().splitlines()) if len(f) > 5)


def descendants(pid: int) -> list[int]:
    """The processes `pid` started, theirs, and so on, as they are now."""
    found, parents = [], [pid]
    while parents:
        kids = children_of(parents.pop())
        found += kids
        parents += kids
    return found


def initdb_of(command: subprocess.Popen, under: Path, timeout: float = 120) -> int:
    """The pid of the first initdb that makes a cluster below `under`, or of the cp that copies one there
    from the template (servers/template.py), as soon as it runs: among the command's descendants, whose
    few command lines a poll reads well within the cp's 40 ms (the suite's workspaces are in /dev/shm).
    A poll over every process's (cmdlines(): 18 µs each idle, hundreds beside two suites at load 9 on 2
    cores) missed the cp there, or returned one already gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in descendants(command.pid):
            cmd = cmdline(pid)
            if cmd.split(" ", 1)[0].endswith(("/initdb", "cp")) and f" {under}/" in cmd:
                return pid
        time.sleep(0.001)
    raise AssertionError(f"no initdb below {under} within {timeout} s")


def reader_held_in(ws: Path) -> subprocess.Popen:
    """A `runs` stopped in the workspace, its share of the gate taken (its record alone is not enough:
    stopped between the two, `clean --all` would come first and it would wait, unnamed). It waits there
    for results.lock, held here, to join the results cluster: let go, beside two suites, it once read
    the store and ended between two polls of /proc/locks."""
    with open(ws / keeper.LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        reader, deadline = spawn_pgpathbench("runs", workspace=ws), time.monotonic() + 120
        while not holds_flock(reader.pid, ws / GATE):
            assert reader.poll() is None and time.monotonic() < deadline, "runs never entered the workspace"
            time.sleep(0.01)
        reader.send_signal(signal.SIGSTOP)
    return reader


def test_clean_beside_a_live_run_touches_nothing_of_it(ws):
    """`clean` while a run makes its first server (its initdb held still) and while it measures
    through its namespace and proxy; `clean --all` then, refused, naming the run and a `runs` that
    reads the store: the run ends complete. The run is held still while they work, so that they
    meet it alive whatever the machine's load. What it kept (--keep-servers) is then clean's;
    `clean --all --results-dsn` with a store of the user's drops neither that store nor the
    workspace's results cluster."""
    proc = spawn_pgpathbench(*LINKED, "--repeat", "1", "--keep-servers", workspace=ws)
    initdb = initdb_of(proc, ws / "servers")
    os.kill(initdb, signal.SIGSTOP)
    try:
        mid_initdb = pgpathbench("clean", workspace=ws)
        assert list(ws.glob("servers/*/pg15_*/password")), "the cluster initdb is making, still there"
    finally:
        os.kill(initdb, signal.SIGCONT)
    run_id = re.search(r"run (\d{8}-\d{6}-[0-9a-f]{4})", "".join(read_until(proc, measured(1)))).group(1)
    left = f"left run {run_id}: in progress (pid {proc.pid})"
    assert mid_initdb.returncode == 0 and left in mid_initdb.stdout, mid_initdb.stdout + mid_initdb.stderr
    proc.send_signal(signal.SIGSTOP)   # its servers, namespace and proxy up
    try:
        measuring = pgpathbench("clean", workspace=ws)
        reader = reader_held_in(ws)
        try:
            refused = pgpathbench("clean", "--all", workspace=ws)
        finally:
            reader.send_signal(signal.SIGCONT)
    finally:
        proc.send_signal(signal.SIGCONT)
    assert measuring.returncode == 0 and left in measuring.stdout and "removed" not in measuring.stdout, measuring.stdout
    assert_user_error(refused, f"run {run_id} (pid {proc.pid})")
    assert f"runs (pid {reader.pid})" in refused.stderr, refused.stderr
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert reader.wait(timeout=60) == 0

    kept = [d.parent for d in (ws / "servers" / run_id).glob("*/data")]
    assert kept and all(socket_dir(c).is_dir() for c in kept)
    with contextlib.contextmanager(started_cluster)("theirs", ws / "elsewhere") as theirs:
        theirs.create_database("their_store")
        dsn = theirs.conninfo("their_store")
        assert pgpathbench_main("runs", "--results-dsn", dsn, workspace=ws).returncode == 0   # made a store
        res = pgpathbench("clean", "--all", "--results-dsn", dsn, workspace=ws)
        assert res.returncode == 0, res.stderr
        assert f"removed {ws / 'servers' / run_id}" in " ".join(res.stdout.split()), res.stdout
        with theirs.connect("their_store") as conn:
            assert conn.execute("SELECT count(*) FROM pgpathbench.run").fetchone() == (0,)
    assert not any(socket_dir(c).exists() for c in kept), "a socket directory (in /tmp when the path is long) left"
    complete(ws, run_id, 3)   # whole: and the workspace's results cluster, not the store in question, kept
    assert_nothing_left(ws, run_id)


def test_initdb_killed_is_one_line_naming_the_cause(ws):
    """initdb SIGKILLed (by the OOM killer, or by the `clean` of an older version): of the results
    cluster, the command says so in one line, and the next one makes the cluster whole; of a run's
    server, the run stops in one line that says how to resume it."""
    own = {"PGPATHBENCH_TEMPLATES": str(ws / "templates")}   # not the session's: this initdb is the workspace's first
    reader = spawn_pgpathbench("runs", workspace=ws, env=own)
    os.kill(initdb_of(reader, ws / "templates"), signal.SIGKILL)   # the results cluster's
    _, err = reader.communicate(timeout=120)
    assert reader.returncode == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("pgpathbench: the results cluster did not start: initdb of results failed: killed by "
                          "SIGKILL, by the kernel's OOM killer"), err
    proc = spawn_pgpathbench(*SMALL, workspace=ws, env=own)   # its results cluster made whole, or it could not start
    os.kill(initdb_of(proc, ws / "servers"), signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    run_id = runs(ws)[-1]["run_id"]
    said = [line for line in err.splitlines() if line.startswith("pgpathbench:")]
    assert proc.returncode == 1 and len(said) == 1 and "Traceback" not in err, err[-3000:]
    assert re.search(r"initdb of pg15_\w+ failed: killed by SIGKILL", said[0]), said
    assert f"'pgpathbench run --resume {run_id}'" in said[0], said
    assert runs(ws)[-1]["status"] == "failed"
    assert_nothing_left(ws, run_id)


def test_failed_measurements_are_counted_exit_1_and_measured_again_on_resume(ws):
    # 150 pgbench clients on a server of 100 connections: every measurement fails, quickly.
    args = ["run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local",
            "--clients", "150", "--repeat", "2", "--duration", "1"]
    res = pgpathbench(*args, workspace=ws)
    assert res.returncode == 1, res.stderr[-3000:]
    run_id = runs(ws)[-1]["run_id"]
    last = res.stderr.strip().splitlines()[-1]
    assert last == (f"pgpathbench: 2 of 2 measurements failed; 'pgpathbench report {run_id}' lists them, "
                    f"'pgpathbench run --resume {run_id}' measures them again")
    listed = runs(ws)[-1]
    assert listed["status"] == "finished" and listed["errors"] == 2
    again = pgpathbench("run", "--resume", run_id, workspace=ws)
    assert again.returncode == 1 and "measuring 2 failed measurements again" in again.stderr
    ms = report_json(ws, run_id)["measurements"]
    assert len(ms) == 2 and all(m["attempts"] == 2 and len(m["previous_errors"]) == 1 for m in ms)
    assert_nothing_left(ws, run_id)


def test_a_link_changed_by_someone_else_voids_the_round_and_resume_measures_it_again(ws):
    proc = spawn_pgpathbench(*LINKED, workspace=ws)
    read_until(proc, measured(1))
    run_id = runs(ws)[-1]["run_id"]
    pid = int((ws / "servers" / run_id / "toxiproxy.pid").read_text())
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    api = f"http://127.0.0.1:{int(args[args.index(b'-port') + 1])}"
    # What any local user can do: take the latency off the 1 ms link.
    req = urllib.request.Request(f"{api}/proxies/pg15_source_1ms/toxics/latency_downstream", method="POST",
                                 data=json.dumps({"attributes": {"latency": 0, "jitter": 0}}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=5).read()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    said = [line for line in err.splitlines() if line.startswith("pgpathbench:")]
    # The change lands during round 1 (that round is voided), or under load after its closing check:
    # then the next round's opening check stops the run before it measures anything.
    found = re.search(r"emulated link changed by someone else (after|before) round (\d)", said[0]) \
        if len(said) == 1 else None
    assert found, err[-3000:]
    assert "toxics of pg15_source_1ms were changed" in said[0] and "Traceback" not in err
    when, seen = found.group(1), int(found.group(2))
    measured_before = report_json(ws, run_id)["measurements"]
    voided = [m for m in measured_before if not m["ok"]]
    if when == "after":
        assert voided and all(m["round"] == seen and "link changed" in m["error"] for m in voided)
    else:
        assert not voided and not [m for m in measured_before if m["round"] >= seen]
    assert all(m["ok"] for m in measured_before if m["round"] < seen)
    wait_gone(ws)
    res = pgpathbench("run", "--resume", run_id, workspace=ws)
    assert res.returncode == 0, res.stderr[-3000:]
    rep = complete(ws, run_id, 6)
    assert all(m["attempts"] == (2 if when == "after" else 1) for m in rep["measurements"] if m["round"] == seen)
    assert_nothing_left(ws, run_id)


def test_the_next_run_removes_what_a_killed_run_left(ws):
    """A killed run's servers' data (tens of GB at the paper presets) does not wait for its resume."""
    proc = spawn_pgpathbench(*LINKED, workspace=ws)
    read_until(proc, measured(2))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_gone(ws)
    killed = runs(ws)[-1]
    assert killed["status"] == "killed" and (ws / "servers" / killed["run_id"]).is_dir()
    res = pgpathbench(*SMALL, workspace=ws)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert re.search(rf"removed what killed run {killed['run_id']} left \(\d+\.\d GB\): ", res.stderr), res.stderr
    assert_nothing_left(ws, killed["run_id"])
    res = pgpathbench("run", "--resume", killed["run_id"], workspace=ws)   # still resumable
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    complete(ws, killed["run_id"], 6)
