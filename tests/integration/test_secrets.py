"""Secrets stay secret, and the user's environment does not reach the managed servers: no managed
server's password on any process's command line, nor in what the tool stores and shows; no
connection of the tool to its servers takes the user's libpq or driver variables; no managed
server listens anywhere but where its run's topology chose.

A command line is world-readable (/proc/PID/cmdline, ps). The tool gives a client the password of a
managed server through a 0600 password file named by PGPASSFILE (Cluster.client_env; the route per
client: clients/CONTRACT.md, "Passwords"). Checked here with real servers and real clients: each
client connects over TCP with PGPASSFILE alone; and while real runs go (interfaces, every client
over every transport; fdw-overhead through postgres_fdw and an emulated link, with a --set that
restarts the servers), with a hostile libpq and driver environment exported (HOSTILE: each of
those variables, were it applied, would fail the run), /proc/*/cmdline is read every 20 ms for the
run's passwords (its servers' password files, read as they appear) and for "password=", and every
postmaster's listening sockets are read from /proc (its own network namespace's tables).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, pgpathbench, spawn_pgpathbench, started_cluster
from pgpathbench.tools.clients import CLIENTS, session_env

pytestmark = pytest.mark.integration

INTERFACES = ("libpq", "odbc", "jdbc", "psycopg")
SCAN_S = 0.02
# Exported for the runs: every one would fail a connection, a client or a result were it applied.
HOSTILE = {"PGPASSWORD": "x", "PGPASSFILE": "/nonexistent", "PGHOST": "/nonexistent", "PGHOSTADDR": "192.0.2.1",
           "PGPORT": "1", "PGDATABASE": "nosuch", "PGUSER": "nobody", "PGSSLMODE": "require",
           "PGGSSENCMODE": "require", "PGSERVICE": "nosuch", "PGSERVICEFILE": "/nonexistent",
           "PGOPTIONS": "-c statement_timeout=1 -c default_transaction_read_only=on",
           "PGTARGETSESSIONATTRS": "standby", "PGREQUIREAUTH": "gss", "PGDATESTYLE": "German",
           "PGCLIENTENCODING": "SQL_ASCII", "PGCONNECT_TIMEOUT": "1", "PGAPPNAME": "hostile",
           "ODBCSYSINI": "/nonexistent", "ODBCINI": "/nonexistent", "JAVA_TOOL_OPTIONS": "-Xmx1m",
           "_JAVA_OPTIONS": "-Xmx1m", "JDK_JAVA_OPTIONS": "-Xmx1m"}


@pytest.fixture(scope="module")
def built():
    res = subprocess.run([str(REPO / "scripts" / "build-clients")], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.fixture(scope="module")
def server(workspace_root):
    yield from started_cluster("secrets", workspace_root)


def _connect(client: str, conninfo: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*CLIENTS[client].command(), "-c", conninfo, "-s", "select 1"], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("client", INTERFACES)
def test_each_client_reads_the_password_from_pgpassfile(built, server, client, tmp_path):
    """The route per client (CONTRACT.md): PGPASSFILE alone works for all four; PGPASSWORD alone for
    every libpq-based one (psqlODBC connects through libpq), not for pgjdbc; neither fails (exit 3).
    HOME points nowhere: no ~/.pgpass helps."""
    conninfo = server.conninfo(transport="tcp")
    assert "password" not in conninfo
    passfile = server.passfile
    assert passfile.stat().st_mode & 0o777 == 0o600
    assert passfile.read_text() == f"*:*:*:pgpathbench:{server.password}\n"
    base = {k: v for k, v in session_env().items() if k not in ("PGPASSWORD", "PGPASSFILE")}
    base["HOME"] = str(tmp_path)
    res = _connect(client, conninfo, server.client_env(base))
    assert res.returncode == 0, res.stderr
    res = _connect(client, conninfo, base)
    assert res.returncode == 3, res.stderr
    res = _connect(client, conninfo, {**base, "PGPASSWORD": server.password})
    assert res.returncode == (3 if client == "jdbc" else 0), res.stderr


def test_client_env_names_the_file_and_drops_pgpassword(server):
    env = server.client_env({"PATH": "/bin", "PGPASSWORD": "x"})
    assert env == {"PATH": "/bin", "PGPASSFILE": str(server.passfile)}


class CmdlineWatch(threading.Thread):
    """Reads every process's command line every SCAN_S seconds, looking for the run's passwords (the
    password files under the workspace, read as they appear) anywhere, and for 'password=' in the
    run's processes (its descendants: other sessions on the machine are not ours to judge)."""

    def __init__(self, workspace: Path):
        super().__init__(daemon=True)
        self.workspace, self.stop, self.scans, self.root_pid = workspace, threading.Event(), 0, None
        self.passwords: set[str] = set()
        self.seen: list[str] = []
        self.listening: set[tuple[str, str]] = set()   # ("tcp", address) or ("unix", directory, its mode)

    def _read_passwords(self) -> None:
        for path in (*self.workspace.glob("servers/*/*/password"), *self.workspace.glob("*/password")):
            try:
                if secret := path.read_text().strip():
                    self.passwords.add(secret)
            except OSError:
                pass

    def run(self) -> None:
        while not self.stop.is_set():
            self._read_passwords()
            cmdlines, parents = {}, {}
            for proc in Path("/proc").glob("[0-9]*"):
                try:
                    cmdlines[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                        errors="replace")
                    parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
            for pid, text in cmdlines.items():
                if any(p in text for p in self.passwords) or ("password=" in text and self._ours(pid, parents)):
                    self.seen.append(f"{pid}: {text[:300]}")
                if re.match(r"\S*/postgres -D " + re.escape(str(self.workspace)), text):
                    self.listening |= listening(pid)
            self.scans += 1
            time.sleep(SCAN_S)

    def _ours(self, pid: int, parents: dict[int, int]) -> bool:
        while pid > 1:
            if pid == self.root_pid:
                return True
            pid = parents.get(pid, 0)
        return False


def listening(pid: int) -> set[tuple[str, str]]:
    """The listening sockets of a process, from its network namespace's tables in /proc: ("tcp",
    "ADDRESS") and ("unix", "DIRECTORY MODE")."""
    try:
        inodes = {os.readlink(fd)[8:-1] for fd in Path(f"/proc/{pid}/fd").iterdir()
                  if os.readlink(fd).startswith("socket:[")}
        tables = {name: Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:] for name in ("tcp", "tcp6", "unix")}
    except OSError:
        return set()
    found = set()
    for name in ("tcp", "tcp6"):
        for line in tables[name]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:   # LISTEN
                hexaddr = fields[1].split(":")[0]
                packed = b"".join(bytes.fromhex(hexaddr[i:i + 8])[::-1] for i in range(0, len(hexaddr), 8))
                found.add(("tcp", str(ipaddress.ip_address(packed))))
    for line in tables["unix"]:
        fields = line.split()
        if len(fields) == 8 and fields[6] in inodes:
            directory = os.path.dirname(fields[7])
            with contextlib.suppress(OSError):
                found.add(("unix", f"{directory} {stat.S_IMODE(os.stat(directory).st_mode):o}"))
    return found


def assert_listening_only_where_chosen(watch: CmdlineWatch, stderr: str) -> None:
    """Loopback, the addresses of the run's network namespaces (its log names them), and private socket
    directories of the workspace: nothing else, whatever --set said."""
    namespaces = set(re.findall(r"sits in network namespace \S+ at (\S+) ", stderr))
    tcp = {a for kind, a in watch.listening if kind == "tcp"}
    unix = {a for kind, a in watch.listening if kind == "unix"}
    assert "127.0.0.1" in tcp and tcp <= {"127.0.0.1", *namespaces}, (tcp, namespaces)
    assert namespaces <= tcp and (namespaces or os.geteuid() != 0), (tcp, namespaces)
    assert unix and all(d.endswith(" 700") and (d.startswith(str(watch.workspace)) or d.startswith("/tmp/pgpb-"))
                        for d in unix), unix


def _assert_environment_left_out(workspace: Path) -> None:
    """Every measurement ok; the fingerprint names the variables left out (never their values)."""
    run = json.loads(pgpathbench("report", "latest", "--format", "json", workspace=workspace).stdout)
    assert run["measurements"] and all(m["error"] is None for m in run["measurements"])
    (session,) = run["run"]["environment"]["sessions"]
    assert set(HOSTILE) <= set(session["machine"]["environment_ignored"])
    assert "/nonexistent" not in json.dumps(run["run"]["environment"])


def _watched_run(workspace: Path, *args: str, timeout: float = 900) -> tuple[subprocess.Popen, str, CmdlineWatch]:
    watch = CmdlineWatch(workspace)
    watch.start()
    proc = spawn_pgpathbench("run", *args, workspace=workspace, env=HOSTILE)
    watch.root_pid = proc.pid
    try:
        _, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        watch.stop.set()
        watch.join()
    return proc, stderr, watch


def _assert_nowhere(workspace: Path, passwords: set[str]) -> None:
    """Neither the passwords nor 'password=' in the report (json, terminal) or the export."""
    for args in (("report", "latest", "--format", "json"), ("report", "latest"),
                 ("export", "latest", "--format", "csv")):
        res = pgpathbench(*args, workspace=workspace)
        assert res.returncode == 0, (args, res.stderr[-2000:])
        text = res.stdout + res.stderr
        assert text.strip(), args
        assert "password=" not in text and not any(p in text for p in passwords), args


@pytest.fixture(scope="module")
def secrets_root(workspace_root):
    return workspace_root / "secrets-runs"


def test_interfaces_run_shows_no_password_and_ignores_a_hostile_environment(built, secrets_root):
    """Every client over every transport (remote: in a network namespace when we are root)."""
    proc, stderr, watch = _watched_run(
        secrets_root, "interfaces", "--preset", "quick", "--interface", ",".join(INTERFACES),
        "--method", "normal", "--sqlstrat", "sql001:once,sql001:each", "--output", "p-none:null",
        "--iterations", "5", "--t50k-rows", "5000", "--t10m-rows", "50000", "--repeat", "1")
    assert proc.returncode == 0, stderr[-3000:]
    assert watch.passwords and watch.scans > 50, (watch.passwords, watch.scans)
    assert watch.seen == []
    _assert_nowhere(secrets_root, watch.passwords)
    _assert_environment_left_out(secrets_root)
    assert_listening_only_where_chosen(watch, stderr)


def test_fdw_overhead_run_shows_no_password_and_ignores_a_hostile_environment(secrets_root):
    """Its password is in the foreign server's user mapping, inside PostgreSQL: never on a command line
    nor in the export. Through an emulated link (the source on its own network stack when we are root),
    with a --set that restarts every server."""
    proc, stderr, watch = _watched_run(secrets_root, "fdw-overhead", "--preset", "quick", "--target", "fdw_external",
                                       "--workload", "ro", "--repeat", "1", "--latency", "1ms",
                                       "--set", "shared_buffers=32MB")
    assert proc.returncode == 0, stderr[-3000:]
    assert watch.passwords and watch.scans > 20, (watch.passwords, watch.scans)
    assert watch.seen == []
    assert "restart 1 for --set shared_buffers=32MB" in stderr
    _assert_nowhere(secrets_root, watch.passwords)
    _assert_environment_left_out(secrets_root)
    assert_listening_only_where_chosen(watch, stderr)
