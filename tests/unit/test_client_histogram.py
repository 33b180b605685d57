"""The contract's histogram of iteration times (clients/CONTRACT.md "Iteration times"): the Python
bucket function (clients/psycopg/pgpb_histogram.py, which the orchestrator shares), the checks of
parse_client_json, iteration_percentiles, and that every built client buckets as Python does
(that last test runs a real server: marked integration)."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import REPO
from pgpathbench.tools import clients
from pgpathbench.tools.clients import ClientOutputError, bucket, bucket_width, iteration_percentiles, parse_client_json

TOOLS = REPO / ".tools" / "clients"


# -- the bucket function -------------------------------------------------------------------------
def test_values_below_32_have_their_own_bucket():
    assert [bucket(v) for v in range(32)] == list(range(32))
    assert all(bucket_width(v) == 1 for v in range(32))


@pytest.mark.parametrize("v, lower, width", [
    (32, 32, 2), (33, 32, 2), (34, 34, 2), (63, 62, 2), (64, 64, 4), (67, 64, 4), (1000, 992, 32),
    (1023, 992, 32), (1024, 1024, 64), (5106, 4864, 256), (10**6, 983040, 32768), (2**63 - 1, 31 << 58, 1 << 58),
    (2**64 - 1, 31 << 59, 1 << 59),
])
def test_known_buckets(v, lower, width):
    assert bucket(v) == lower and bucket_width(lower) == width
    assert lower <= v < lower + width


def test_sixteen_buckets_per_power_of_two_each_at_most_6_25_percent_wide():
    h = clients._histogram
    for e in range(5, 64):
        lowers = sorted({bucket(v) for v in range(2**e, 2**(e + 1), max(1, 2**e // 64))})
        assert len(lowers) == 16 and lowers[0] == 2**e, e
        assert all(bucket_width(lo) / lo <= 1 / 16 for lo in lowers)
    # the index is dense and ascending, and every index below BUCKETS maps back to its own LOWER
    indexes = [h.bucket_index(v) for v in range(0, 5000)]
    assert indexes == sorted(indexes) and set(indexes) == set(range(indexes[-1] + 1))
    assert h.bucket_index(2**64 - 1) < h.BUCKETS
    assert all(h.bucket_index(h.bucket_lower(i)) == i for i in range(h.bucket_index(2**64 - 1) + 1))


def test_the_psycopg_clients_recorder():
    hist = clients._histogram.IterationHistogram()
    for began, ended in ((0.0, 0.000033), (1.0, 1.001), (2.0, 2.0010005), (3.0, 3.0)):
        hist.record(began, ended)
    out = json.loads(hist.json())
    assert out["min"] == 0 and out["max"] in (1000, 999)   # truncated: 1.0005 ms is 1000 µs, or 999 in floats
    assert out["hist"][0] == [0, 1] and out["hist"][1] in ([32, 1], [33, 1]) and out["hist"][-1] == [992, 2]


# -- parse_client_json ---------------------------------------------------------------------------
def client_line(iteration_us, iterations=3, total_s=0.5) -> str:
    return json.dumps({"client": "libpq", "version": "libpq 15.18", "mode": "normal", "iterations": iterations,
                       "rows": iterations, "bytes": 2 * iterations, "checksum": "0123456789abcdef",
                       "connect_s": 0.001, "exec_s": 0.002, "fetch_s": 0.003, "total_s": total_s,
                       "iteration_us": iteration_us})


GOOD_HIST = {"min": 7, "max": 1010, "hist": [[7, 1], [64, 1], [992, 1]]}


def test_valid_iteration_us_is_returned_as_a_dict():
    out = parse_client_json(client_line(GOOD_HIST), "libpq", "normal", 3)
    assert out["iteration_us"] == GOOD_HIST and list(out)[-1] == "iteration_us"


@pytest.mark.parametrize("iteration_us, message", [
    ([1, 2], "not an object with keys min, max, hist"),
    ({"max": 1010, "min": 7, "hist": GOOD_HIST["hist"]}, "in that order"),
    ({**GOOD_HIST, "extra": 1}, "keys min, max, hist"),
    ({**GOOD_HIST, "min": 1011}, "0 <= min <= max"),
    ({**GOOD_HIST, "min": -1}, "0 <= min <= max"),
    ({**GOOD_HIST, "max": 1.5}, "0 <= min <= max"),
    ({**GOOD_HIST, "hist": [[7, 1], [64, 1], [992]]}, "pairs of whole numbers"),
    ({**GOOD_HIST, "hist": [[7, 1], [64, True], [992, 1]]}, "pairs of whole numbers"),
    ({**GOOD_HIST, "hist": [[7, 1], [65, 1], [992, 1]]}, "starts no bucket"),
    ({**GOOD_HIST, "hist": [[7, 1], [64, 0], [992, 2]]}, "COUNT < 1"),
    ({**GOOD_HIST, "hist": [[7, 1], [992, 1], [64, 1]]}, "not ascending"),
    ({**GOOD_HIST, "hist": [[7, 1], [64, 1], [64, 1]]}, "not ascending"),
    ({**GOOD_HIST, "hist": [[7, 1], [64, 1], [992, 2]]}, "add up to 4, not the 3 iterations"),
    ({**GOOD_HIST, "hist": []}, "starts no bucket"),
    ({**GOOD_HIST, "min": 8}, "min is not in the first bucket"),
    ({**GOOD_HIST, "max": 1024}, "max not in the last"),
])
def test_invalid_iteration_us_fails_the_measurement(iteration_us, message):
    with pytest.raises(ClientOutputError, match=message):
        parse_client_json(client_line(iteration_us), "libpq", "normal", 3)


# -- percentiles ---------------------------------------------------------------------------------
def test_percentiles_of_a_hand_made_histogram():
    # 100 iterations: 50 of 10 µs, 40 in [992, 1024), 5 in [2048, 2176), 4 in [4096, 4352), one of 9000
    h = {"min": 10, "max": 9000, "hist": [[10, 50], [992, 40], [2048, 5], [4096, 4], [8704, 1]]}
    assert iteration_percentiles(h) == {
        "latency_p50_ms": 0.010,                     # rank 50: the last of the exact 10s
        "latency_p90_ms": (992 + 31 / 2) / 1000,     # rank 90: the midpoint of [992, 1023]
        "latency_p95_ms": (2048 + 127 / 2) / 1000,   # rank 95
        "latency_p99_ms": (4096 + 255 / 2) / 1000,   # rank 99
        "latency_max_ms": 9.0,                       # exact
    }


def test_percentiles_are_clipped_to_min_and_max_and_ranks_round_up():
    one = {"min": 1000, "max": 1000, "hist": [[992, 1]]}      # midpoint 1007.5, but the only value is 1000
    assert set(iteration_percentiles(one).values()) == {1.0}
    # 20 iterations: rank ceil(0.95 * 20) = 19 and ceil(0.99 * 20) = 20
    twenty = {"min": 3, "max": 40, "hist": [[3, 18], [5, 1], [40, 1]]}
    p = iteration_percentiles(twenty)
    assert (p["latency_p50_ms"], p["latency_p90_ms"], p["latency_p95_ms"], p["latency_p99_ms"]) == \
        (0.003, 0.003, 0.005, 0.040)
    assert p["latency_max_ms"] == 0.040


# -- every client buckets as Python does -----------------------------------------------------------
COMMANDS = {
    "libpq": [str(TOOLS / "pgpb_libpq")],
    "odbc": [str(TOOLS / "pgpb_odbc")],
    "jdbc": ["java", "-jar", str(TOOLS / "pgpb-jdbc.jar")],
    "psycopg": [str(TOOLS / "pgpb_psycopg")],
}


@pytest.fixture(scope="module")
def server(workspace_root):
    from pgpathbench.procs import OsUser
    from pgpathbench.servers.binaries import resolve
    from pgpathbench.servers.cluster import Cluster
    res = subprocess.run([str(REPO / "scripts" / "build-clients")], capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    c = Cluster("histogram", workspace_root / "histogram", resolve(15), OsUser.for_servers())
    c.start()
    yield c
    c.remove()


@pytest.mark.integration
@pytest.mark.parametrize("client", list(COMMANDS))
def test_every_client_buckets_as_python_does(server, client):
    """-n 200 iterations of a tiny query (and 20 connecting each time): every LOWER a client prints is
    a bucket's lower bound under the Python function, and min and max fall in the first and last."""
    for keep, n in (("1", 200), ("0", 20)):
        res = subprocess.run(COMMANDS[client] + ["-c", server.conninfo(transport="tcp"), "-s", "select 1",
                                                 "-k", keep, "-n", str(n)],
                             capture_output=True, text=True, timeout=300, env=server.client_env())
        assert res.returncode == 0, res.stderr
        h = parse_client_json(res.stdout, client, "normal", n)["iteration_us"]   # validates it all, too
        assert all(bucket(lower) == lower for lower, _ in h["hist"]), h
        assert bucket(h["min"]) == h["hist"][0][0] and bucket(h["max"]) == h["hist"][-1][0]
        assert sum(count for _, count in h["hist"]) == n and h["min"] > 0
