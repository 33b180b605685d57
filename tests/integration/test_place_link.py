"""The link to a placed server (issue 47): --latency's delay added on top of it, measured; its loss
mid-measurement bounded.

The benchmark client here to interfaces' remote on host b: the Toxiproxy here reaches b. fdw-overhead's
external on b to its source on a: the delay is added on b, by this machine's toxiproxy-server shipped
there (checksum checked), run as the servers' account on b's loopback, its API reached over SSH; the
path's round trips probed from b (dblink through that proxy). Each asserts that the 5 ms path's probed
round trip exceeds the same run's 0 ms one by 4 ms or more (a functional check of the delay); nothing of
ours is left on a host after the run, and after a SIGKILL `clean` stops the proxy there.

A network lost mid-measurement (host a's port of the LAN's bridge down, sshd and servers still up
there): the run ends within LOST_BOUND_S of it, far from the measurement's --duration and from the
FDW hop's own hang (139 s once), in one line naming the host, non-zero, nothing of it left here;
`--resume` with the link back measures the rest.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from pgpathbench.servers.host_ledger import HostLedger
from pgpathbench.servers.network import available_link_kinds, find_toxiproxy

from conftest import STATE_ONLY_RATE, cmdlines, pgpathbench, report_json, spawn_pgpathbench
from hosts import LOGIN, LOGIN_UID, SshHosts
from test_place import known, ours_on, place_args

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok") or find_toxiproxy() is None,
                                 reason="network namespaces need root and ip; links need toxiproxy-server")]

DELAY_MS, AT_LEAST_MS = 5, 4
LOST_DURATION_S, LOST_BOUND_S = 30, 20


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    with SshHosts(tmp_path_factory.mktemp("hosts"), ("a", "b")) as made:
        yield made


def proxies_on(host) -> dict[int, int]:
    """pid -> uid of each toxiproxy-server of a run of ours in the host's network namespace."""
    inside, found = set(host.pids()), {}
    for pid, cmd in cmdlines().items():
        if pid in inside and cmd.split()[:1] and cmd.split()[0].endswith("/toxiproxy-server") and "/runs/" in cmd:
            try:
                found[pid] = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
            except (OSError, IndexError):
                continue
    return found


def medians(exported: dict, link: str) -> list[float]:
    out = [p["rtt_median_ms"] for p in exported["link_probes"] if p["link"] == link]
    assert out, (link, sorted({p["link"] for p in exported["link_probes"]}))
    return out


def assert_delay_added(exported: dict, direct: str, delayed: str) -> float:
    """Every probe of the delayed path exceeds every probe of the direct one by AT_LEAST_MS: the least gap."""
    gap = min(medians(exported, delayed)) - max(medians(exported, direct))
    assert gap >= AT_LEAST_MS, (direct, medians(exported, direct), delayed, medians(exported, delayed))
    return gap


def test_fdw_overhead_latency_between_two_hosts_is_added_on_the_externals_host(hosts, workspace_root):
    ws = known(hosts, workspace_root / "latency-both")
    proc = spawn_pgpathbench(*place_args(hosts, LOGIN), "--latency", f"0ms,{DELAY_MS}ms", "--repeat", "1",
                             workspace=ws)
    seen: dict[str, dict[int, int]] = {"a": {}, "b": {}}
    while proc.poll() is None:
        for name in seen:
            seen[name].update(proxies_on(hosts[name]))
        time.sleep(0.2)
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    assert not seen["a"] and seen["b"] and set(seen["b"].values()) == {LOGIN_UID}, seen   # on b, as its servers
    exported = report_json(ws)
    ok = [m for m in exported["measurements"] if m["ok"]]
    assert {m["dims"]["latency"] for m in ok} == {"0ms", f"{DELAY_MS}ms"}, exported["measurements"]
    gap = assert_delay_added(exported, "pg15_source_0ms", f"pg15_source_{DELAY_MS}ms")
    assert_delay_added(exported, "pg15_source_0ms+fdw_scan", f"pg15_source_{DELAY_MS}ms+fdw_scan")
    paths = exported["run"]["environment"]["sessions"][0]["paths"]
    kind = paths[f"pg15_source_{DELAY_MS}ms"]["kind"]
    assert kind.startswith("proxy (on host b, to host a; toxiproxy-server sha256 "), kind
    assert paths["pg15_source_0ms"]["kind"] == "direct (on host b, to host a)"
    print(f"5 ms path probed from b: at least {gap:.2f} ms above the 0 ms one")
    assert not proxies_on(hosts["b"]) and not ours_on(hosts["a"]) and not ours_on(hosts["b"])


def test_interfaces_latency_to_a_placed_remote_is_added_here(hosts, workspace_root):
    ws = known(hosts, workspace_root / "latency-remote")
    host = hosts["b"]
    res = pgpathbench("run", "interfaces", "--preset", "quick", "--transport", "remote", "--interface", "libpq",
                      "--latency", f"0ms,{DELAY_MS}ms", "--repeat", "1", "--host", f"b={host.url()}",
                      "--ssh-identity", str(host.identity), "--place", "remote=b", workspace=ws)
    assert res.returncode == 0, res.stderr
    exported = report_json(ws)
    assert all(m["ok"] for m in exported["measurements"]) and exported["measurements"]
    assert_delay_added(exported, "pg15_remote_0ms", f"pg15_remote_{DELAY_MS}ms")
    assert exported["run"]["environment"]["sessions"][0]["paths"][f"pg15_remote_{DELAY_MS}ms"]["kind"] == \
        "proxy (host b)"
    assert not ours_on(host)


def test_sigkill_leaves_the_proxy_on_the_host_to_clean(hosts, workspace_root):
    ws = known(hosts, workspace_root / "latency-kill")
    proc = spawn_pgpathbench(*place_args(hosts, LOGIN), "--latency", f"{DELAY_MS}ms", "--repeat", "30",
                             workspace=ws)
    deadline = time.monotonic() + 120
    while not proxies_on(hosts["b"]) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    found = proxies_on(hosts["b"])
    assert found and set(found.values()) == {LOGIN_UID}, (found, proc.poll())
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proxies_on(hosts["b"]) == found   # a killed run cannot stop it itself
    res = pgpathbench("clean", workspace=ws)
    assert res.returncode == 0, res.stdout + res.stderr
    assert any(f"proxy {pid}" in res.stdout for pid in found), res.stdout
    assert not proxies_on(hosts["b"])
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"]) and HostLedger(ws).entries() == []


def ours_here(ws: Path, hosts) -> list[str]:
    """Processes here naming the run's workspace or a host's address (its CLI, servers, ssh, proxy,
    pgbench), not the hosts' own (one pid namespace), nor the results database's (kept between runs)."""
    theirs = {pid for h in hosts.hosts.values() for pid in h.pids()}
    return [cmd for pid, cmd in cmdlines().items() if pid not in theirs and "store.keeper" not in cmd
            and f"{ws}/results/" not in cmd
            and (str(ws) in cmd or any(f"{h.address} " in cmd for h in hosts.hosts.values()))]


def bridge_port(hosts, name: str, state: str) -> None:
    """Host `name`'s port of the LAN's bridge up or down: its cable, at the switch."""
    host = hosts[name].lan
    subprocess.run(["ip", "-n", host.netns.rsplit("-", 1)[0] + "-lan", "link", "set", f"{host.interface}p", state],
                   check=True)


def test_a_network_lost_mid_measurement_ends_the_run_naming_the_host_and_resume_measures_the_rest(
        hosts, workspace_root):
    ws = known(hosts, workspace_root / "link-lost")
    proc = spawn_pgpathbench(*place_args(hosts, LOGIN), "--repeat", "1", "--duration", str(LOST_DURATION_S),
                             *STATE_ONLY_RATE, workspace=ws)   # its closed loop: 39.0 s of CPU, this 14.0 s
    deadline = time.monotonic() + 120
    while not [c for c in ours_here(ws, hosts) if "pgbench" in c and f"-T {LOST_DURATION_S}" in c]:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    time.sleep(2)   # measuring, through the FDW hop from b to a
    bridge_port(hosts, "a", "down")
    try:
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=LOST_DURATION_S + 150)
        ended_s = time.monotonic() - t0
        left = ours_here(ws, hosts)
    finally:
        bridge_port(hosts, "a", "up")
    print(f"the run ended {ended_s:.1f} s after host a's link went down (measurement: {LOST_DURATION_S} s)")
    assert proc.returncode == 1, err
    assert ended_s < LOST_BOUND_S, (ended_s, err)
    stopped = [line for line in err.splitlines() if line.startswith("pgpathbench: ")]
    assert len(stopped) == 1 and "host a (" in stopped[0] and " lost" in stopped[0], err
    assert not left, left
    res = pgpathbench("run", "--resume", "latest", workspace=ws, timeout=300)
    assert res.returncode == 0, res.stderr
    (measured,) = report_json(ws)["measurements"]   # measured again: the failed attempt kept as its error
    assert measured["ok"] and measured["attempts"] == 2, measured
    assert "host a (" in measured["previous_errors"][0]["error"], measured["previous_errors"]
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"]) and HostLedger(ws).entries() == []
