"""Shared test helpers: a private workspace per test session, and the CLI as a user runs it."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import itertools
import json
import os
import re
import secrets
import statistics
import struct
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


# -- side by side (make test: pytest-xdist, --dist loadscope --no-loadscope-reorder) -------------------
# The integration modules that take longest (wall seconds of each module on a worker in a whole make
# test, issue 43), handed out first in this order: the one handed out last must be short, or it
# decides the end. A module of a minute or more belongs here, in its place.
# Measured on 2026-11-28 (make test at load 5-10, 1,847 s): robustness 383 s, place 379, interfaces
# 336, clients 195, pooler_hops 194, place_link 176, user_servers 168, file_fdw_tpch 128, ...
LONGEST_FIRST = ("test_robustness.py", "test_place.py", "test_interfaces.py", "test_clients.py", "test_pooler_hops.py",
                 "test_place_link.py", "test_user_servers.py", "test_file_fdw_tpch.py", "test_fdw_overhead.py",
                 "test_user_servers_interfaces.py", "test_pgbouncer.py", "test_user_servers_sampling.py",
                 "test_fdw_knobs.py", "test_remote_sampling.py", "test_user_servers_citus.py", "test_place_tpch.py",
                 "test_html_report.py", "test_set.py", "test_tls.py", "test_secrets.py", "test_roof.py", "test_keeper.py",
                 "test_until_ci.py", "test_evidence_runs.py", "test_file_fdw_tpch_citus.py", "test_plan_history.py",
                 "test_interfaces_fidelity.py", "test_file_fdw_tpch_columnar.py", "test_disk_full.py", "test_links.py",
                 "test_user_queries.py", "test_user_servers_lan.py", "test_ssh_config.py", "test_user_servers_tpch.py",
                 "test_hosts.py")


class SuiteStop:
    """How a make test stops on SIGTERM (a CI timeout, `kill` of its process group) or Ctrl-C: as
    Ctrl-C does, its fixtures torn down (their servers, namespaces with an sshd, mounts, stopped
    runs), which Python's default for SIGTERM, an immediate exit, skips. In the controller and in
    each xdist worker (both read this file).

    A worker, or a pytest without workers, raises KeyboardInterrupt at the first signal and ignores
    the next ones: they would cut the teardown the first began. xdist's controller, once its workers
    run, passes the first on to them as SIGTERM and goes on taking their reports until each has torn
    down and finished: stopped at once, it asks their gateways to exit, and execnet (2.1) then
    interrupts a worker 5 s later and ends it 10 s after that, whatever its teardown is doing. A
    second signal stops the controller at once."""

    def __init__(self, config: pytest.Config):
        self.config, self.workers_run, self.received = config, False, 0
        self.controller = not hasattr(config, "workerinput") and getattr(config.option, "dist", "no") != "no"

    def __call__(self, signum, frame):
        self.received += 1
        if self.controller and self.workers_run and self.received == 1:
            # xdist then ends the session, interrupted, even if a worker still starting dies of it
            # (it would start another in its place; 3.8's DSession, the controller's loop)
            if (dsession := self.config.pluginmanager.getplugin("dsession")) is not None:
                dsession.shouldstop = f"stopped by signal {signum}"
            for pid in children_of(os.getpid()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        elif self.controller or self.received == 1:
            raise KeyboardInterrupt(f"stopped by signal {signum}")


def children_of(parent: int) -> list[int]:
    """The live processes whose parent is `parent` (an xdist controller's: its workers), from each of its
    threads' /proc/PID/task/TID/children: a few reads, where a scan of every process's costs hundreds."""
    found = []
    for children in Path(f"/proc/{parent}/task").glob("*/children"):
        with contextlib.suppress(OSError):   # gone meanwhile
            found += [int(pid) for pid in children.read_text().split()]
    return found


SUITE_STOP = pytest.StashKey[SuiteStop]()
SWEPT = pytest.StashKey[list]()


@pytest.hookimpl(tryfirst=True)   # before pytest's tmp_path factory reads the base folder
def pytest_configure(config):
    config.stash[SUITE_STOP] = stop = SuiteStop(config)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    if not hasattr(config, "workerinput"):   # the workers, started later, inherit it; xdist gives
        from pgpathbench.workspace import TEMPLATES_VAR   # each a base folder inside this one
        os.environ[TEMPLATES_VAR] = str(session_templates())
        config.stash[SWEPT] = sweep_stale(workspace_base())
        if config.option.basetemp is None and workspace_base().parent == SHM:
            config.option.basetemp = str(session_tmp())


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    """The controller's loop is xdist's taking of its workers' reports (workers run their own)."""
    stop = session.config.stash[SUITE_STOP]
    stop.workers_run = True
    try:
        return (yield)
    finally:
        stop.workers_run = False


def pytest_collection_modifyitems(config, items):
    """Integration modules first (the longest of them first), unit and CLI tests last. xdist
    (loadscope) hands each module to one worker whole, so that its module-scoped fixtures (a whole
    run, a server and its data) are made once, in this order, the next when a worker is nearly idle:
    the many short modules then fill the workers' last minutes instead of a long run. (--dist
    loadgroup cannot group by fixture here: xdist 3.8 marks a group in Item._nodeid, which pytest 9.2
    no longer reads.)"""
    def rank(item) -> tuple[bool, int]:
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
        longest = LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)
        return "/integration/" not in f"/{item.nodeid}", longest
    items.sort(key=rank)


# -- where the suite's workspaces go ----------------------------------------------------------------
# A tmpfs when it has room: on these machines' ext4 (a virtio disk mounted with discard) the suite
# waited on the disk for its servers' fsyncs, initdb and the templates' copies. Two runs each of
# tests/integration/test_set.py, interleaved, two suites beside: on disk 155-159 s, the process
# tree's CPU 56-58 s; on /dev/shm 99-108 s and 47-48 s. TEST_WORKSPACES=disk keeps them on disk.
SHM, SHM_ROOM = Path("/dev/shm"), 8 << 30


@functools.cache
def workspace_base() -> Path:
    """The folder of the suite's workspaces: one of this checkout's own on /dev/shm (a suite in
    another clone has another) when it has SHM_ROOM free, else the repository's .workspace. Never
    /tmp/pytest-of-*: that is 0700, and servers run as another user."""
    if os.environ.get("TEST_WORKSPACES") != "disk" and SHM.is_dir() and shutil.disk_usage(SHM).free >= SHM_ROOM:
        base = SHM / f"pgpathbench-tests-{hashlib.sha1(str(REPO).encode()).hexdigest()[:10]}"
        base.mkdir(mode=0o711, exist_ok=True)
        found = os.lstat(base)   # /dev/shm is everyone's: a folder another user made there is not ours
        if stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid() and not found.st_mode & 0o022:
            return base
    return REPO / ".workspace"


def pytest_report_header(config):
    swept = config.stash.get(SWEPT, [])
    return f"workspaces: {workspace_base()}" + (f" (removed what killed sessions left: {', '.join(swept)})" if swept else "")


# A session's clusters are copied from templates of its own (PGPATHBENCH_TEMPLATES, servers/template.py),
# made once for the session instead of once in each test's workspace: 169 initdb a suite before,
# about 0.4 s of CPU each here (initdb and its postgres children).
def session_templates() -> Path:
    """The session's templates, in the suite's folder (a make check beside a make test of the same
    clone has its own)."""
    return workspace_base() / f"templates-{os.getpid()}"


def session_tmp() -> Path:
    """pytest's tmp_path base for the session, in the suite's folder when that is on /dev/shm: the
    test hosts' /var/lib and /home are there, and on these machines' ext4 making a file costs about
    0.5 ms of system CPU (a host's initdb makes about 1,000, a bundle extracted there more):
    tests/integration/test_place.py took 85.2 and 87.8 s of CPU with it in /tmp, 65.0 and 64.9 s here
    (interleaved; bench/README.md)."""
    return workspace_base() / f"tmp-{os.getpid()}"


def pytest_unconfigure(config):
    """The session's templates and tmp_path base removed, and the suite's folder on /dev/shm when
    empty (the last session out; its workspaces are removed by their fixtures)."""
    if hasattr(config, "workerinput"):
        return
    shutil.rmtree(session_templates(), ignore_errors=True)
    shutil.rmtree(session_tmp(), ignore_errors=True)
    if workspace_base().parent == SHM:
        with contextlib.suppress(OSError):
            workspace_base().rmdir()


@pytest.fixture(scope="session")
def workspace_root():
    root = workspace_base() / f"test-{os.getpid()}-{secrets.token_hex(2)}"
    yield root
    close_workspace(root)


def close_workspace(root: Path, timeout: float = 120) -> None:
    """What tests left in a workspace removed: a pgpathbench process still in it (a test that failed
    half-way) stopped first by SIGTERM, so that it tears down what it made (`clean --all` refuses
    while one lives), then `clean --all`, then the directory."""
    from pgpathbench.procs import pid_alive
    from pgpathbench.workspace import Workspace
    # Only a record its process holds: a SIGKILLed run's stays, and its pid may be anyone's since (a
    # postgres backend of another suite's, whose command line names our database user).
    alive = list(Workspace(root, None).live()) if root.is_dir() else []
    for pid, sig in itertools.product(alive, (signal.SIGCONT, signal.SIGTERM)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while any(map(pid_alive, alive)) and time.monotonic() < deadline:
        time.sleep(0.2)
    subprocess.run([sys.executable, "-m", "pgpathbench.cli", "clean", "--all", "--workspace", str(root)],
                   capture_output=True)
    from pgpathbench.servers.cluster import socket_dir
    for results in root.glob("*/results"):   # a test's own workspace in this one: its results cluster's
        shutil.rmtree(socket_dir(results), ignore_errors=True)   # sockets in /tmp when its path is long
    shutil.rmtree(root, ignore_errors=True)


# What a session makes in the suite's folder names the process that made it (the controller's
# templates and tmp_path base, a worker's workspaces, a test's small disk), so that the next session
# can tell what one killed outright (SIGKILL, the OOM killer) left from what a live one uses.
SESSION_ENTRY = re.compile(r"(?:templates|tmp|test|robust|small-disk)-(\d+)(?:-.*)?")


def sweep_stale(base: Path) -> list[str]:
    """Remove the entries of the suite's folder whose session is gone, their workspaces closed and
    mounts unmounted first (close_workspaces_in). Returns their names."""
    from pgpathbench.procs import pid_alive
    swept = []
    for entry in sorted(base.iterdir()):
        found = SESSION_ENTRY.fullmatch(entry.name)
        if not found or pid_alive(int(found[1])):
            continue
        close_workspaces_in(entry)
        shutil.rmtree(entry, ignore_errors=True)
        swept.append(entry.name)
    return swept


def close_workspaces_in(folder: Path) -> None:
    """Every workspace under `folder` closed, deepest first (close_workspace: its servers stopped,
    on test hosts too), then every test LAN there (user_lan.Lan.stop: its hosts' sshd and servers
    ended, its namespaces deleted), then `folder` unmounted if it is a mount."""
    from user_lan import STATE, Lan
    for workspace in sorted({lock.parent for lock in folder.glob("**/workspace.lock")},
                            key=lambda path: len(path.parts), reverse=True):
        close_workspace(workspace)
    for state in folder.glob(f"**/{STATE}"):
        Lan.recorded(state.parent).stop()
    if os.path.ismount(folder):
        subprocess.run(["umount", str(folder)], check=False)


def started_cluster(name: str, root: Path, settings: dict | None = None, **kw):
    """A managed PostgreSQL 15 a test module uses on its own (yield it from a fixture), removed after;
    kw: Cluster's other fields (tcp_auth)."""
    from pgpathbench.procs import OsUser
    from pgpathbench.servers.binaries import resolve
    from pgpathbench.servers.cluster import Cluster
    c = Cluster(name, root / name, resolve(15), OsUser.for_servers(), settings or {}, **kw)
    c.start()
    try:
        yield c
    finally:
        c.remove()


# For fdw-overhead runs whose tests assert a run's state (stopped, resumed, cleaned, lost), not its
# figures: pgbench offered 100 transactions a second, not its closed loop (a run of 2 cases x 2 rounds
# x 1 s: 2.0 s of CPU against 5.8 s; bench/README.md).
STATE_ONLY_RATE = ("--rate", "100")


def pgpathbench(*args: str, workspace: Path | None = None, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    if workspace is not None:
        env["PGPATHBENCH_HOME"] = str(workspace)
    return subprocess.run([sys.executable, "-m", "pgpathbench.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, **kw)


def pgpathbench_main(*args: str, workspace: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI's main() called in this process, its stdout and stderr captured, as pgpathbench()
    gives them, and the workspace left as the process's exit leaves it: for the long tables of
    refused input and for the commands that only read a run (report, runs, export, compare),
    without a Python start-up each (about 1.4 s of CPU beside a suite). Each file of refused input
    keeps a few cases through pgpathbench(), the path a user takes; so do the tests of what a
    command's process shows (secrets) or leaves."""
    from pgpathbench import cli
    from pgpathbench.workspace import leave_all
    out, err = io.StringIO(), io.StringIO()
    env = {"COLUMNS": "200", **({"PGPATHBENCH_HOME": str(workspace)} if workspace is not None else {})}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as e:   # --help, --version: argparse exits
                code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    finally:
        leave_all()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return subprocess.CompletedProcess(["pgpathbench", *args], code, out.getvalue(), err.getvalue())


def spawn_pgpathbench(*args: str, workspace: Path, env: dict | None = None) -> subprocess.Popen:
    """The CLI started in `workspace`, with `env` exported on top of ours."""
    env = {**os.environ, **(env or {}), "PGPATHBENCH_HOME": str(workspace)}
    return subprocess.Popen([sys.executable, "-m", "pgpathbench.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def cmdlines() -> dict[int, str]:
    """pid -> command line of every live process (a server's backends show their user and database)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
    return found


def our_processes(root: Path) -> list[str]:
    """Command lines of live processes that belong to a workspace's runs (servers, pgbench): not its
    results cluster, which outlives a command by keeper.LINGER_S (tests/integration/test_keeper.py)."""
    return [f"{pid}: {cmd}" for pid, cmd in cmdlines().items()
            if str(root) in cmd and "pytest" not in cmd and "pgpathbench.cli" not in cmd
            and f"{root}/results/" not in cmd and "pgpathbench.store.keeper" not in cmd]


def namespaces() -> list[str]:
    """The names of this machine's network namespaces (`ip netns list`), whole: one name may begin another."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def netns_of_run(run_id: str) -> list[str]:
    """The network namespaces of this machine that a run made (servers/netns.py: pgpbK-TAG_ROLE)."""
    tag = run_id.rsplit("-", 1)[-1][:4]
    return [name for name in namespaces() if re.match(rf"pgpb\d+-{tag}_", name)]


def placed_passwords(ws: Path) -> set[str]:
    """The passwords in a run's password files of its placed servers (servers/*/*.pgpass), whole
    files only: the tool creates one, then writes its line, so a look in between finds it empty
    (an empty "password" is in every command line: a pair of suites saw it, stop 58); the run's end
    removes them."""
    found = set()
    for f in ws.glob("servers/*/*.pgpass"):
        with contextlib.suppress(OSError):
            text = f.read_text()
            if text.endswith("\n"):
                found.add(text.rsplit(":", 1)[-1].strip())
    return found


def run_watching_ps(*args: str, workspace: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The CLI run to its end, with every process's command line sampled meanwhile, but the CLI's
    own (a test may give it a DSN with a password, which the tool warns of)."""
    proc = spawn_pgpathbench(*args, workspace=workspace)
    seen = []
    while proc.poll() is None:
        seen += [c for c in cmdlines().values() if "pgpathbench.cli" not in c]
        time.sleep(0.2)
    out, err = proc.communicate()
    return subprocess.CompletedProcess(args, proc.returncode, out, err), seen


def assert_user_error(res: subprocess.CompletedProcess, message: str, untouched: Path | None = None) -> None:
    """A user mistake: exit 2, one line naming the option, no traceback, nothing on stdout, and
    (when given) the workspace never created."""
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pgpathbench: error: ") and message in lines[0], res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr
    if untouched is not None:
        assert not untouched.exists(), "a rejected command must not create the workspace"


MASK64 = (1 << 64) - 1


def contract_row_hash(row: bytes) -> int:
    """clients/CONTRACT.md's hash of one row (its bytes, its newline included), written out here from
    the contract's text: the oracle the clients and the tool are held to."""
    mult = 0x9E3779B97F4A7C15
    padded = row + bytes(-len(row) % 8)
    words = struct.unpack(f"<{len(padded) // 8}Q", padded)
    full, tail = (words, 0) if len(row) % 8 == 0 else (words[:-1], words[-1])
    h = 0xCBF29CE484222325
    for w in full:
        h = (h ^ w) * mult % 2**64
    k = ((h ^ tail) * mult % 2**64) ^ len(row)
    for m in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):     # murmur3's fmix64
        k = (k ^ k >> 33) * m % 2**64
    return k ^ k >> 33


def contract_checksum(copy_text: bytes, times: int = 1) -> str:
    """clients/CONTRACT.md's checksum of `times` reads of COPY text, from its definition: the sum mod
    2^64 of every row's hash (its bytes up to and including its newline)."""
    rows = [row + b"\n" for row in copy_text.split(b"\n")[:-1]]
    assert b"".join(rows) == copy_text, "whole rows only"
    return f"{times * sum(map(contract_row_hash, rows)) & MASK64:016x}"


def report_json(ws: Path, run: str = "latest", *extra: str) -> dict:
    """`pgpathbench report RUN --format json`, parsed."""
    res = pgpathbench_main("report", run, "--format", "json", *extra, workspace=ws)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def finished_run(*args: str, workspace: Path, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict]:
    """`pgpathbench ARGS` (a run), which must exit 0: its output and the report of the workspace's latest run."""
    res = pgpathbench(*args, workspace=workspace, timeout=timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    return res, report_json(workspace)


def rounds_by_case(measurements: list[dict], metric: str) -> dict[str, list[float]]:
    """case_id -> one metric's value in each of its rounds."""
    by: dict[str, list[float]] = {}
    for m in measurements:
        by.setdefault(m["case_id"], []).append(m["metrics"][metric])
    return by


def medians_by_case(measurements: list[dict], metric: str) -> dict[str, float]:
    """case_id -> the median of one metric over its rounds."""
    return {k: statistics.median(v) for k, v in rounds_by_case(measurements, metric).items()}


def cpu_bound_ms(server: dict) -> float:
    """The most CPU a server's evidence can count: every core over the window its ticks were
    counted in, plus whole-tick truncation (each field of the case's backend and of the sampler's
    can read up to one tick more than it ran)."""
    from pgpathbench.evidence.proc_cpu import ticks_to_ms
    return server["cpu_window_ms"] * os.cpu_count() + 4 * ticks_to_ms(1)
