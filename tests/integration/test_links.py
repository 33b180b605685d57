"""Remote links in a study: latency as a dimension, RTT probes, cost per round trip, cleanup."""

from __future__ import annotations

import json
import os
import signal
import statistics
from collections import Counter

import pytest

from conftest import finished_run, netns_of_run as netns_of, our_processes, pgpathbench_main, spawn_pgpathbench
from test_fdw_overhead import wait_for_measurements

pytestmark = pytest.mark.integration

LINKED = ["run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local,fdw_external",
          "--clients", "1", "--latency", "0,2ms", "--repeat", "3", "--duration", "1", "--evidence", "off"]


@pytest.fixture(scope="module")
def linked_run(workspace_root):
    return finished_run(*LINKED, workspace=workspace_root)


def test_links_are_probed_before_and_after_every_round(linked_run):
    _, rep = linked_run
    probes = rep["link_probes"]
    # Each path from here, and the FDW hop over it from the external server (a one-row foreign scan).
    assert Counter((p["link"], p["round"], p["phase"]) for p in probes) == {
        (link, r, phase): 1 for link in ("pg15_source_0ms", "pg15_source_2ms", "pg15_source_0ms+fdw_scan",
                                         "pg15_source_2ms+fdw_scan") for r in (1, 2, 3)
        for phase in ("before", "after")}
    # postgres_fdw's scan makes several round trips (transaction, cursor, fetch, close): two at least.
    assert all(p["rtt_min_ms"] >= 2 * 2.0 for p in probes if p["link"] == "pg15_source_2ms+fdw_scan")
    # A 2 ms link adds 2 ms (+ the proxy hop), read against the direct path to the same server probed
    # at the same moment (round and phase): the fastest of each probe's 100 round trips is the one a
    # busy machine disturbed least, and the direct path's own spread (p95 - min) says how busy it was.
    by = {(p["link"], p["round"], p["phase"]): p for p in probes}
    pairs = [(by[("pg15_source_0ms", r, phase)], by[("pg15_source_2ms", r, phase)])
             for r in (1, 2, 3) for phase in ("before", "after")]
    assert all(link["rtt_min_ms"] >= 2.0 for _, link in pairs), "no round trip can beat the link's latency"
    added = statistics.median(link["rtt_min_ms"] - direct["rtt_min_ms"] for direct, link in pairs)
    busy = statistics.median(direct["rtt_p95_ms"] - direct["rtt_min_ms"] for direct, _ in pairs)
    assert 1.6 < added < 3.0 + busy, (added, busy)


def test_ro_transactions_through_2ms_link_wait_for_its_round_trips(linked_run):
    """Each transaction through the 2 ms link waits for two of its round trips at least (postgres_fdw
    makes more), which no load can shorten. How far below the direct path its TPS falls is a timing
    claim, for an idle machine: bench/link_slowdown.py (both suites of a pair at load 7-12 saw the
    direct path at 200 TPS in one round, 3.4x the linked one's best)."""
    res, rep = linked_run
    latency = {}
    for m in rep["measurements"]:
        latency.setdefault(m["case_id"], []).append(m["metrics"]["latency_ms"])
    assert set(latency) == {"ro:local:1:0ms:15:simple", "ro:fdw_external:1:0ms:15:simple",
                            "ro:fdw_external:1:2ms:15:simple"}
    assert min(latency["ro:fdw_external:1:2ms:15:simple"]) >= 2 * 2.0
    out = res.stdout
    assert "RO.FDW_external@2ms" in out and "2ms link, " in out
    assert "Cost of a round trip" in out


def test_each_transaction_costs_several_round_trips(linked_run):
    """The slope of latency per transaction against RTT counts postgres_fdw's round trips."""
    res, _ = linked_run
    row = next(l for l in res.stdout.splitlines() if l.strip().startswith("RO") and "FDW_external" in l and "[" in l
               and "ms per" not in l and l.split()[4] == "6")
    slope = float(row.split()[5])
    assert 2 <= slope <= 10, row


def test_links_recorded_in_environment(linked_run):
    _, rep = linked_run
    links = rep["run"]["environment"]["sessions"][0]["paths"]
    assert links["pg15_source_2ms"]["latency_ms"] == 2 and links["pg15_source_2ms"]["kind"].startswith("proxy")
    assert links["pg15_source_0ms"]["kind"].startswith("direct")
    if os.geteuid() == 0:  # the remote role then sits on its own network stack
        assert "veth" in links["pg15_source_2ms"]["kind"]
        assert links["pg15_source_2ms"]["upstream"].startswith("169.254.")


def test_sigterm_removes_proxy_namespace_and_servers(workspace_root):
    proc = spawn_pgpathbench(*LINKED, workspace=workspace_root)
    wait_for_measurements(proc, 1)
    running = our_processes(workspace_root)
    assert any("toxiproxy" in p for p in running) and any("postgres" in p for p in running)
    run_id = json.loads(pgpathbench_main("runs", "--format", "json", workspace=workspace_root).stdout)[-1]["run_id"]
    if os.geteuid() == 0:
        assert netns_of(run_id)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err[-6000:]
    assert our_processes(workspace_root) == []
    assert netns_of(run_id) == []
    assert not (workspace_root / "network.json").exists() or '"netns"' not in (workspace_root / "network.json").read_text()
