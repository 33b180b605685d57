"""Parsing what pgbench 15 prints (output captured from Debian's pgbench 15.18 here)."""

import pytest

from pgpathbench.errors import CaseError
from pgpathbench.references import published_tps_ratio
from pgpathbench.studies.fdw_overhead import parse_pgbench

OUTPUT = """pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 5
number of threads: 1
maximum number of tries: 10
duration: 2 s
number of transactions actually processed: 3061
number of failed transactions: 752 (19.726%)
number of transactions retried: 2404 (63.064%)
total number of retries: 8240
latency average = 1.164 ms
latency stddev = 0.931 ms
initial connection time = 7.350 ms
tps = 1530.402611 (without initial connection time)
"""


def test_parse_every_figure():
    m = parse_pgbench(OUTPUT)
    assert m == {"transactions": 3061, "failures": 752, "retried": 2404, "retries": 8240,
                 "latency_ms": 1.164, "latency_stddev_ms": 0.931, "initial_connection_ms": 7.35,
                 "tps": 1530.402611, "clients": 5, "threads": 1, "max_tries": 10, "scale": 1,
                 "duration_s": 2}


def test_parse_without_retries_defaults_them_to_zero():
    plain = "\n".join(l for l in OUTPUT.splitlines() if "retr" not in l and "failed" not in l)
    m = parse_pgbench(plain)
    assert (m["failures"], m["retries"], m["retried"]) == (0, 0, 0)


def test_parse_rejects_truncated_output():
    with pytest.raises(CaseError, match="printed no tps"):
        parse_pgbench(OUTPUT.split("tps =")[0])


def test_published_ratio_from_seed_000_means():
    assert published_tps_ratio("ro", "fdw_external", 1) == pytest.approx(11512.79 / 1511.04)
    assert published_tps_ratio("rw", "fdw_local", 1) == pytest.approx(209.49 / 139.72)
    assert published_tps_ratio("ro", "fdw_external", 5) is None
