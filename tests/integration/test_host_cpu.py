"""A server's process-group CPU read on its host over SSH (evidence/host_cpu.py), on a namespace
host of tests/hosts.py logged into as the non-root user.

The host shares this machine's PID namespace, so what a reading over SSH says can be checked
against proc_cpu reading /proc here at the same moments. The group: a sh named "bu sy) (x" (a
comm with spaces and parentheses) whose children come and go, each burning CPU; then a real
PostgreSQL 15 started there by the login, whose evidence collected() reads over the connection.
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import cpu_bound_ms
from pgpathbench.evidence import Watched, collected, host_cpu
from pgpathbench.evidence.proc_cpu import CLK_TCK, group_ticks, read_stat, ticks_to_ms
from pgpathbench.servers import binaries
from pgpathbench.servers.hosts import Hosts, SshSettings, parse_hosts
from pgpathbench.servers.network import available_link_kinds

from host_postgres import HostPostgres
from hosts import SshHosts

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")]

COMM = "bu sy) (x"
SLACK = 3   # ticks: each side's reading of a group whose children come and go, a few ticks apart
# Children of 20,000 shell additions each (tens of ms of CPU), a pause between them.
BURN = f"""cd
ln -sf /bin/sh '{COMM}'
nohup './{COMM}' -c 'while :; do (i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done); sleep 0.02; done' \
  </dev/null >/dev/null 2>&1 &
echo $!
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """(the namespace host, an open connection to it as the non-root login, this machine's address
    on the host's LAN)."""
    root = tmp_path_factory.mktemp("hostcpu")
    with SshHosts(root / "hosts", ("a",)) as made:
        h = made["a"]
        ws = root / "ws"
        ws.mkdir()
        (ws / "known_hosts").write_text(h.known_hosts_line + "\n")
        specs = parse_hosts([f"a={h.url()}"])
        with Hosts(specs, SshSettings.checked(ws, str(h.identity), (), specs)) as hosts:
            yield h, hosts["a"], made.lan.root_address


@pytest.fixture(scope="module")
def burner(host):
    h, conn, _ = host
    pid = int(conn.output(BURN, "starting the burner"))
    try:
        assert pid in h.pids(), "it runs on the host"
        time.sleep(0.3)
        yield pid
    finally:
        conn.run(f"kill {pid}")


def test_a_reading_over_ssh_agrees_with_proc_here(host, burner):
    _, conn, _ = host
    assert host_cpu.clk_tck(conn) == CLK_TCK      # the same kernel: the host's own getconf says so too
    with open(f"/proc/{burner}/stat") as f:
        assert f.read().startswith(f"{burner} ({COMM}) ")
    for _ in range(5):
        before = group_ticks(burner)
        there = host_cpu.group_ticks(conn, burner)
        after = group_ticks(burner)
        for i in (0, 1):
            assert before[i] - SLACK <= there[i] <= after[i] + SLACK, (before, there, after)
        assert sum(there) > 0


def test_a_busy_second_counts_over_ssh(host, burner):
    _, conn, _ = host
    first = host_cpu.group_ticks(conn, burner)
    time.sleep(1)
    second = host_cpu.group_ticks(conn, burner)
    assert second[0] - first[0] > 0 and second[1] >= first[1]


def test_a_process_that_is_gone_raises_process_lookup_error(host):
    _, conn, _ = host
    gone = int(conn.output("sh -c 'echo $$'\n", "a short process"))   # exited and reaped there
    with pytest.raises(ProcessLookupError, match=f"process {gone} not visible"):
        host_cpu.group_ticks(conn, gone)


def test_collected_reads_a_placed_servers_cpu_over_ssh(host, workspace_root, tmp_path):
    h, conn, here = host
    started = time.monotonic()
    bindir = binaries.resolve(15, workspace=workspace_root).bindir
    with HostPostgres(conn, h, here, bindir, tmp_path) as pg:
        print(f"\nPostgreSQL on the host: {time.monotonic() - started:.1f} s")
        assert pg.postmaster in h.pids()
        watched = Watched("source", pg.connect, pg.postmaster, ("postgres",), host=conn)
        here_before = sum(group_ticks(pg.postmaster))
        with collected([watched]) as ev:
            with pg.connect() as work:
                work.execute("SELECT count(*) FROM generate_series(1, 3000000)")
                stat = read_stat(work.info.backend_pid)   # its CPU, here, before it leaves
        here_after = sum(group_ticks(pg.postmaster))
    print(json.dumps(ev.data), ev.timings)
    server, missing = ev.data["servers"]["source"], ev.data["missing"]
    assert "source.cpu_ms" not in missing, missing
    cpu = server["cpu_ms"]["user"] + server["cpu_ms"]["system"]
    # at least what the case's backend ran; at most what the whole group ran meanwhile, read here
    assert ticks_to_ms(stat.utime + stat.stime - 1) <= cpu <= ticks_to_ms(here_after - here_before + SLACK)
    assert 0 < cpu <= cpu_bound_ms(server)
    assert server["cpu_read_ms"]["before"] > 0 and server["cpu_read_ms"]["after"] > 0
    assert server["waits"]["samples"] > 0
