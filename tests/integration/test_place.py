"""Managed servers on other hosts (issue 47, `--place`): namespace hosts of tests/hosts.py.

A server made over the run's SSH connection (servers/remote.py) runs in its host's network
namespace, as the login user (or, with a root login, as an account made for it and removed
after), listens on the host's address, admits this machine, and reports the host's facts in its
fingerprint; removing the run's directory there leaves nothing of ours; after a killed run, the
host's ledger is what `clean` (host_ledger.py) removes, and a host it cannot reach is said.

Then `run fdw-overhead --place source=a --place external=b` (narrowed: ro, fdw_external, 1 s
rounds), as a non-root login and as root: it measures; each postmaster in its host's network
namespace; bytes crossed both veths; both hosts' facts in the fingerprint; the probes in the
export; no password in any command line (one pid namespace: the hosts' processes are seen here);
nothing left after the run, after SIGTERM, after SIGKILL + clean; a host whose sshd is killed
mid-run stops the run in one line naming it, and --resume works once it is back. Interfaces'
remote and remote-sampling's source (seed 004's "from a different machine") on one host.
(test_place_bundles: a major a host lacks, shipped there.)
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pgpathbench.procs import pid_alive
from pgpathbench.servers import remote
from pgpathbench.servers.host_ledger import HostLedger
from pgpathbench.servers.hosts import Hosts, HostSpec, SshSettings
from pgpathbench.servers.network import available_link_kinds
from pgpathbench.servers.remote import HostWorkspace, RemoteCluster

from conftest import cmdlines, pgpathbench, placed_passwords, report_json, spawn_pgpathbench
from hosts import LOGIN, SshHosts
from test_fdw_overhead import wait_for_measurements

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with SshHosts(tmp_path_factory.mktemp("hosts"), ("a", "b")) as made:
        yield made


def opened(host, user: str, ws: Path) -> Hosts:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "known_hosts").write_text(host.known_hosts_line + "\n")
    specs = {"a": HostSpec("a", host.url(user))}
    return Hosts(specs, SshSettings(ws, host.identity))


def ours_on(host) -> list[Path]:
    return host.ours()


def gone(pid: int, wait_s: float = 10) -> bool:
    """Whether the process has ended (a zombie not yet reaped by its new parent counts)."""
    deadline = time.monotonic() + wait_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def accounts(host) -> str:
    return (host.dir / "etc" / "passwd").read_text()


def postmaster_of(host, cluster: RemoteCluster) -> int:
    data = cluster.dir + "/data/postmaster.pid"
    sub, rest = ("home", data.removeprefix("/home/")) if data.startswith("/home/") else \
        ("varlib", data.removeprefix("/var/lib/"))
    return int((host.dir / sub / rest).read_text().split()[0])


@pytest.mark.parametrize("user", [LOGIN, "root"])
def test_a_server_on_a_host_runs_there_and_leaves_nothing(hosts, workspace_root, user):
    host, ws = hosts["a"], workspace_root / f"place-{user}"
    ledger = HostLedger(ws)
    with opened(host, user, ws) as conns:
        place = HostWorkspace(conns["a"], "run-place-1", ledger)
        cluster = RemoteCluster("pg15_source", place, 15, ws / "servers" / "run-place-1")
        cluster.start(ws)
        try:
            assert ledger.entries("run-place-1")[0]["host"] == "a"   # recorded here before anything there
            with cluster.connect() as conn:
                addr, who = conn.execute("SELECT host(inet_server_addr()), current_user").fetchone()
            assert (addr, who) == (host.address, "pgpathbench")
            pid = postmaster_of(host, cluster)
            assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{host.lan.netns}").st_ino
            uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
            assert uid != 0
            expected = "pgpathbench" if user == "root" else LOGIN
            assert f"\n{expected}:x:{uid}:" in "\n" + accounts(host)
            assert "pgpathbench:" in accounts(host) if user == "root" else "pgpathbench:" not in accounts(host)
            facts = cluster.fingerprint()
            assert (facts["host"]["host"], facts["host"]["machine_id"]) == (host.hostname,
                                                                                       host.machine_id)
            assert "the host's own /usr/lib/postgresql/15/bin" in facts["binaries"]
            assert oct(cluster.passfile.stat().st_mode & 0o777) == "0o600"   # the password here: 0600 only
            assert not [p for p in host.files("/home") + host.files("/var/lib") if p.name == "pw"]
        finally:
            cluster.remove()
            said = place.remove()
    assert any("removed" in line for line in said)
    assert gone(pid)
    assert not ours_on(host) and "pgpathbench:" not in accounts(host)
    assert ledger.entries() == []


def test_clean_after_a_killed_run_removes_what_the_hosts_ledger_lists(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "place-killed"
    ledger = HostLedger(ws)
    with opened(host, "root", ws) as conns:   # its connection closed, its server left: as after a SIGKILL
        cluster = RemoteCluster("pg15_external", HostWorkspace(conns["a"], "run-killed", ledger), 15, ws / "s")
        cluster.start(ws)
        pid = postmaster_of(host, cluster)
    assert Path(f"/proc/{pid}").exists() and ours_on(host)
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 0 and f"host a: stopped {pid}" in res.stdout, res.stdout + res.stderr
    assert gone(pid)
    assert not ours_on(host) and "pgpathbench:" not in accounts(host)
    assert ledger.entries() == []


def test_clean_says_which_host_it_could_not_reach(hosts, workspace_root):
    ws = workspace_root / "place-unreached"
    ledger = HostLedger(ws)
    ws.mkdir(parents=True)
    (ws / "known_hosts").write_text(hosts["a"].known_hosts_line + "\n")
    with opened(hosts["a"], LOGIN, ws) as conns:
        conns["a"].spec = HostSpec("a", f"ssh://{LOGIN}@{hosts['a'].address}:2")   # a port nobody listens on
        ledger.add("run-gone", conns["a"], "/home/nobody/x")
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 1 and res.stderr.startswith(
        f"pgpathbench: clean: host a (ssh://{LOGIN}@{hosts['a'].address}:2): could not reach it"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert ledger.entries("run-gone")   # kept for a later clean


def test_no_password_on_any_command_line(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "place-secret"
    seen: list[str] = []
    with opened(host, LOGIN, ws) as conns:
        place = HostWorkspace(conns["a"], "run-secret", HostLedger(ws))
        cluster = RemoteCluster("pg15_source", place, 15, ws / "s")
        cluster.start(ws)
        try:
            seen = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
            assert cluster.password and not [line for line in seen if cluster.password in line]
        finally:
            cluster.remove()
            place.remove()


# A socket bound to the host's address, never listening: what a connection from there (even in TIME_WAIT)
# leaves on its port, where a listener's bind fails (SO_REUSEADDR or not).
HOLD = ("import socket, sys, time; s = socket.socket(); s.bind((sys.argv[1], 0)); "
        "print(s.getsockname()[1], flush=True); time.sleep(600)")


def test_a_port_taken_on_one_of_the_hosts_addresses_is_not_kept(hosts, workspace_root, monkeypatch):
    """PostgreSQL binds what it can of listen_addresses and only warns of the rest: a server the run would
    reach at a refusing address is stopped there and started on another port."""
    host, ws = hosts["a"], workspace_root / "place-taken"
    holder = subprocess.Popen(["ip", "netns", "exec", host.lan.netns, sys.executable, "-c", HOLD, host.address],
                              stdout=subprocess.PIPE, text=True)
    try:
        taken = int(holder.stdout.readline())
        ports = iter([taken])
        monkeypatch.setattr(remote, "random", SimpleNamespace(randint=lambda a, b: next(ports, random.randint(a, b))))
        with opened(host, LOGIN, ws) as conns:
            place = HostWorkspace(conns["a"], "run-taken", HostLedger(ws))
            cluster = RemoteCluster("pg15_source", place, 15, ws / "s")
            cluster.start(ws)
            try:
                assert cluster.port != taken
                with cluster.connect() as conn:
                    assert conn.execute("SELECT host(inet_server_addr())").fetchone()[0] == host.address
            finally:
                cluster.remove()
                place.remove()
    finally:
        holder.kill()
        holder.wait()
    assert not ours_on(host)


# fdw-overhead narrowed to the FDW hop between two hosts: 2 rounds of 1 s.
RUN = ("run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "fdw_external", "--repeat", "2")


def place_args(hosts, user: str) -> tuple[str, ...]:
    return (*RUN, "--host", f"a={hosts['a'].url(user)}", "--host", f"b={hosts['b'].url(user)}",
            "--ssh-identity", str(hosts["a"].identity), "--place", "source=a", "--place", "external=b")


def known(hosts, ws: Path) -> Path:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "known_hosts").write_text("".join(h.known_hosts_line + "\n" for h in hosts.hosts.values()))
    return ws


def watch(proc: subprocess.Popen, hosts, ws: Path, placed: dict[str, str] | None = None
          ) -> tuple[str, str, list[str], dict[str, set[int]], set[str]]:
    """The run to its end, sampling every command line (here and on the hosts: one pid namespace), the
    network namespace of each placed postmaster (placed: host -> role; source on a, external on b
    unless given) and the passwords of the run's password files here."""
    placed = placed or {"a": "source", "b": "external"}
    seen, netns, passwords = [], {name: set() for name in placed}, set()
    # our hosts' mount namespaces (their sshd's): other tests' namespace hosts run pg15_source too
    mounts = {os.stat(f"/proc/{sshd_pids(h)[0]}/ns/mnt").st_ino for h in hosts.hosts.values()}
    while proc.poll() is None:
        passwords |= placed_passwords(ws)
        runs = [p.name for p in ws.glob("servers/*")]   # this run's id: its directory there is runs/ID
        for pid, cmd in cmdlines().items():
            if "pgpathbench.cli" in cmd:
                continue
            seen.append(cmd)
            for name, role in placed.items():   # not another run's (the machine is shared)
                if " -D " in cmd and any(f"/runs/{run}/pg15_{role}/data" in cmd for run in runs):
                    with contextlib.suppress(OSError):
                        if os.stat(f"/proc/{pid}/ns/mnt").st_ino in mounts:
                            netns[name].add(os.stat(f"/proc/{pid}/ns/net").st_ino)
        time.sleep(0.1)
    out, err = proc.communicate()
    return out, err, seen, netns, passwords


@pytest.mark.parametrize("user", [LOGIN, "root"])
def test_fdw_overhead_with_source_and_external_on_two_hosts(hosts, workspace_root, user):
    ws = known(hosts, workspace_root / f"place-run-{user}")
    before = {n: hosts.lan.counters(n) for n in hosts.hosts}
    out, err, seen, netns, passwords = watch(spawn_pgpathbench(*place_args(hosts, user), workspace=ws), hosts, ws)
    after = {n: hosts.lan.counters(n) for n in hosts.hosts}
    assert "measurements failed" not in err and "runs on host a" in err and "runs on host b" in err, err
    exported = report_json(ws)
    ok = [m for m in exported["measurements"] if m["ok"]]
    assert len(ok) == 2 and all(m["metrics"]["tps"] > 0 for m in ok)
    for m in ok:   # each placed server's CPU, read on its host over SSH (evidence/host_cpu.py)
        for role in ("source", "external"):
            server = m["evidence"]["servers"][role]
            assert sum(server["cpu_ms"].values()) > 0 and set(server["cpu_read_ms"]) == {"before", "after"}, \
                (role, server.keys(), m["evidence"]["missing"])
    servers = exported["run"]["environment"]["sessions"][0]["servers"]
    for name, role in (("a", "source"), ("b", "external")):
        host, fingerprint = hosts[name], servers[f"pg15_{role}"]
        assert (fingerprint["host"]["host"], fingerprint["host"]["machine_id"]) == \
            (host.hostname, host.machine_id)   # each host's own, read there
        assert fingerprint["placed"]["os_user"] == ("pgpathbench" if user == "root" else LOGIN)
        crossed = sum(after[name][k] - before[name][k] for k in ("rx_bytes", "tx_bytes"))
        assert crossed > 1_000_000, (name, crossed)   # scale 1's load, the FDW hop and the clients
        assert netns[name] == {os.stat(f"/run/netns/{host.lan.netns}").st_ino}, netns
    probes = {p["link"] for p in exported["link_probes"] if p["rtt_median_ms"] > 0}
    assert {"pg15_source_0ms", "pg15_source_0ms+fdw_scan", "pg15_external@b"} <= probes, probes
    assert len(passwords) == 2 and not [c for c in seen for p in passwords if p in c]
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"])
    assert "pgpathbench:" not in accounts(hosts["a"]) + accounts(hosts["b"])


def wait_for_placed_servers(proc: subprocess.Popen, hosts, timeout: float = 120) -> None:
    """Until both placed servers run (a postmaster.opts each: a postmaster's, which initdb's
    single-user postgres, with a postmaster.pid of its own, never writes), or the run ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if len([p for h in hosts.hosts.values() for p in ours_on(h) if p.name == "postmaster.opts"]) == 2:
            return
        time.sleep(0.1)
    raise AssertionError(f"no placed servers: {proc.poll()}")


def test_sigterm_removes_what_the_run_put_on_its_hosts(hosts, workspace_root):
    """SIGTERM while b's initdb runs, held stopped (source's server runs on a by then): the ssh under
    it is cut, the script lives on there, and what the run removes must not race it (a pair of suites
    left an empty server directory on b, from an initdb that outlived the run's rm -rf)."""
    ws = known(hosts, workspace_root / "place-term")
    proc = spawn_pgpathbench(*place_args(hosts, "root"), "--repeat", "30", workspace=ws)
    deadline = time.monotonic() + 120
    while not (initdb := [pid for pid, c in cmdlines().items() if c.split(" ", 1)[0].endswith("/initdb")
                          and "/pg15_external/" in c and pid in hosts["b"].pids()]):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    os.kill(initdb[0], signal.SIGSTOP)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 143, err
    assert gone(initdb[0]) and re.search(rf"host b: killed [\d ]*\b{initdb[0]}\b", err), err
    left = [str(p) for p in ours_on(hosts["a"]) + ours_on(hosts["b"])]
    assert not left, (err, left)
    assert "pgpathbench:" not in accounts(hosts["a"]) + accounts(hosts["b"])
    # the killed initdb's postgres ended on its own (killed, its shared memory stayed: a pair of suites)
    assert not hosts["a"].shared_memory() + hosts["b"].shared_memory(), err
    assert HostLedger(ws).entries() == []


def test_sigkill_then_clean_reaches_both_hosts_and_resume_recreates(hosts, workspace_root):
    ws = known(hosts, workspace_root / "place-kill")
    proc = spawn_pgpathbench(*place_args(hosts, LOGIN), workspace=ws)   # killed before its data is made
    wait_for_placed_servers(proc, hosts)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert ours_on(hosts["a"]) and ours_on(hosts["b"])   # a killed run cannot remove them itself
    assert {e["host"] for e in HostLedger(ws).entries()} == {"a", "b"}
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "host a: removed" in res.stdout and "host b: removed" in res.stdout
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"]) and HostLedger(ws).entries() == []
    res = pgpathbench("run", "--resume", "latest", workspace=ws, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "pg15_source runs on host a" in res.stderr
    assert len([m for m in report_json(ws)["measurements"] if m["ok"]]) == 2
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"])


def sshd_pids(host) -> list[int]:
    return [pid for pid, cmd in cmdlines().items() if cmd.startswith("sshd") or cmd.startswith("/usr/sbin/sshd")
            if pid in host.pids()]


def test_a_host_lost_mid_run_fails_it_naming_the_host_and_resume_works_when_it_is_back(hosts, workspace_root):
    ws = known(hosts, workspace_root / "place-lost")
    host = hosts["a"]
    proc = spawn_pgpathbench(*place_args(hosts, LOGIN), "--repeat", "3", workspace=ws)
    wait_for_measurements(proc, 1)   # measuring
    postmaster = postmaster_pid_on(host)
    for pid in sshd_pids(host):   # its sshd and every session of it: the run's connection too
        os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    stopped = [line for line in err.splitlines() if line.startswith("pgpathbench: ")]
    assert len(stopped) == 1 and "server pg15_source (host a (" in stopped[0] and " lost: " in stopped[0], err
    assert HostLedger(ws).entries() and ours_on(host)   # left there: the host did not answer
    # back: its sshd again, in its namespaces (entered through the server left running there)
    subprocess.run(["nsenter", "-t", str(postmaster), "-m", "-u", "-n", "/usr/sbin/sshd", "-f",
                    "/etc/ssh/sshd_config", "-E", "/etc/ssh/sshd.log"], check=True)
    res = pgpathbench("run", "--resume", "latest", workspace=ws, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "pg15_source runs on host a" in res.stderr
    assert len([m for m in report_json(ws)["measurements"] if m["ok"]]) == 3
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"]) and HostLedger(ws).entries() == []


def test_a_placed_server_stopped_mid_run_ends_it_quoting_its_log_there(hosts, workspace_root):
    """Its host answers, its postmaster is gone (a fast shutdown by someone else): the run stops at the
    failed measurement or the probes after it, naming the server and its log's last line, read there
    before the run's directory goes; a resume measures the rest."""
    ws = known(hosts, workspace_root / "place-gone")
    proc = spawn_pgpathbench(*place_args(hosts, LOGIN), "--repeat", "3", workspace=ws)
    wait_for_measurements(proc, 1)   # measuring
    os.kill(postmaster_pid_on(hosts["b"]), signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    stopped = [line for line in err.splitlines() if line.startswith("pgpathbench: ")]
    assert len(stopped) == 1 and stopped[0].startswith(
        "pgpathbench: server pg15_external (gone from host b; its log's last line: ") and \
        "LOG:  database system is shut down) died " in stopped[0], err   # during or after a round
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"]) and HostLedger(ws).entries() == []
    res = pgpathbench("run", "--resume", "latest", workspace=ws, timeout=300)
    assert res.returncode == 0, res.stderr
    assert len([m for m in report_json(ws)["measurements"] if m["ok"]]) == 3


def postmaster_pid_on(host) -> int:
    (pid_file,) = [p for p in ours_on(host) if p.name == "postmaster.pid"]
    return int(pid_file.read_text().split()[0])


def test_interfaces_with_remote_on_a_host(hosts, workspace_root):
    ws = known(hosts, workspace_root / "place-interfaces")
    host = hosts["b"]
    before = hosts.lan.counters("b")
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--transport", "remote", "--interface",
                      "libpq,psycopg", "--repeat", "2", "--host", f"b={host.url()}", "--ssh-identity",
                      str(host.identity), "--place", "remote=b", workspace=ws)
    assert res.returncode == 0, res.stderr
    crossed = sum(hosts.lan.counters("b")[k] - before[k] for k in ("rx_bytes", "tx_bytes"))
    exported = report_json(ws)
    ok = [m for m in exported["measurements"] if m["ok"]]
    assert ok and len(ok) == len(exported["measurements"])
    fingerprint = exported["run"]["environment"]["sessions"][0]["servers"]["pg15_remote"]
    assert (fingerprint["host"]["host"], fingerprint["host"]["machine_id"]) == (host.hostname, host.machine_id)
    assert crossed > sum(m["metrics"].get("bytes", 0) for m in ok) > 0   # the rows crossed its veth
    assert "pg15_remote_0ms" in {p["link"] for p in exported["link_probes"]}
    assert not ours_on(host)


@pytest.mark.parametrize("placed", [{"b": "source"}, {"a": "source", "b": "external"}], ids=["source", "both"])
def test_remote_sampling_placed(hosts, workspace_root, placed):
    """Seed 004's sampling from a different machine: the source (its table) on b and the FDW client
    here, or both roles on hosts of their own."""
    ws = known(hosts, workspace_root / f"place-sampling-{len(placed)}")
    before = {n: hosts.lan.counters(n) for n in placed}
    proc = spawn_pgpathbench("run", "remote-sampling", "--preset", "quick", "--test", "sampling", "--rows", "100k",
                             "--method", "full,system", "--fraction", "0.1", "--pg", "15", "--repeat", "2",
                             *(a for n in placed for a in ("--host", f"{n}={hosts[n].url()}")), "--ssh-identity",
                             str(hosts["b"].identity), *(a for n, r in placed.items() for a in ("--place", f"{r}={n}")),
                             workspace=ws)
    _, err, _, netns, _ = watch(proc, hosts, ws, placed)
    assert proc.returncode == 0 and "runs on host b" in err, err
    exported = report_json(ws)
    ok = [m for m in exported["measurements"] if m["ok"]]
    assert ok and len(ok) == len(exported["measurements"])
    assert {m["dims"]["access"] for m in ok} == {"direct", "fdw"}
    source = [m["evidence"]["servers"]["source"] for m in ok]   # its CPU, read on its host over SSH
    assert all(set(s["cpu_read_ms"]) == {"before", "after"} for s in source), ok[0]["evidence"]["missing"]
    assert sum(sum(s["cpu_ms"].values()) for s in source) > 0   # 100k rows sent by `full` take ticks
    pad = 5 * 32   # each row's pad, repeat(md5(i::text), 5): the least a row puts on the link
    servers = exported["run"]["environment"]["sessions"][0]["servers"]
    for name, role in placed.items():
        host, fingerprint = hosts[name], servers[f"pg15_{role}"]
        crossed = sum(hosts.lan.counters(name)[k] - before[name][k] for k in ("rx_bytes", "tx_bytes"))
        assert crossed > pad * sum(m["metrics"]["rows_transferred"] for m in ok) > 0, (name, crossed)
        assert netns[name] == {os.stat(f"/run/netns/{host.lan.netns}").st_ino}, netns
        assert (fingerprint["host"]["host"], fingerprint["host"]["machine_id"]) == (host.hostname, host.machine_id)
        assert fingerprint["placed"]["os_user"] == LOGIN
    probes = {p["link"] for p in exported["link_probes"] if p["rtt_median_ms"] > 0}
    # the FDW hop and the client paths
    assert {"pg15_source_0ms", *(f"pg15_{r}@{n}" for n, r in placed.items())} <= probes, probes
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"])
