"""The figures the original studies published, with the seed each comes from.

Only what a seed prints as numbers is here (figures read off a plot are not). Keys are the
study's own case dimensions, so a report can put each published figure beside ours.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    max: float
    min: float
    mean: float
    source: str      # the seed and table it was copied from


_S000 = "seed 000 (PostgreSQL 9.6.2, scale 100, 10 x 10 s, 1 client)"
_S001 = "seed 001 (PostgreSQL 9.6.2, scale 100, 10 x 10 s, 1 client)"

# (workload, target, clients) -> figure.  Seed 000's "Aggregated data" tables.
FDW_OVERHEAD_TPS: dict[tuple[str, str, int], Published] = {
    ("ro", "fdw_external", 1): Published(1713.57, 1387.70, 1511.04, _S000),
    ("ro", "fdw_local", 1): Published(1557.38, 1445.34, 1482.65, _S000),
    ("ro", "local", 1): Published(11717.88, 11131.27, 11512.79, _S000),
    ("rw", "fdw_external", 1): Published(128.12, 102.21, 113.79, _S000),
    ("rw", "fdw_local", 1): Published(146.00, 135.73, 139.72, _S000),
    ("rw", "local", 1): Published(217.21, 203.58, 209.49, _S000),
    # Seed 000 has no updatable 'false' row; seed 001's table (same set-up) does.
    ("ro", "fdw_external_ro", 1): Published(1637.314, 1402.255, 1507.400, _S001),
}

FDW_OVERHEAD_LATENCY_MS: dict[tuple[str, str, int], Published] = {
    ("ro", "fdw_external", 1): Published(0.721, 0.584, 0.6642, _S000),
    ("ro", "fdw_local", 1): Published(0.692, 0.642, 0.6748, _S000),
    ("ro", "local", 1): Published(0.090, 0.085, 0.0869, _S000),
    ("rw", "fdw_external", 1): Published(9.784, 7.805, 8.8521, _S000),
    ("rw", "fdw_local", 1): Published(7.367, 6.849, 7.1598, _S000),
    ("rw", "local", 1): Published(4.912, 4.604, 4.7748, _S000),
}


def published_tps_ratio(workload: str, target: str, clients: int) -> float | None:
    """local/target TPS from the published means, where both were published."""
    local = FDW_OVERHEAD_TPS.get((workload, "local", clients))
    other = FDW_OVERHEAD_TPS.get((workload, target, clients))
    return local.mean / other.mean if local and other else None


# Seed 004 (Tomas Vondra, pgsql-hackers, on the patch that became analyze_sampling): per-row costs.
SAMPLING_US_PER_ROW = {
    "read_and_sample": 0.2,     # "reading+sampling a row costs ~0.2us at most"
    "send_localhost": 1.5,      # "sending it is ~1.5us (localhost)"
    "send_lan": 5.5,            # "or ~5.5us (local network)", latency about 0.1 ms
}


# Seed 002 (Citus Data, "PostgreSQL Foreign File Performance"): TPC-H SF 10 on an EC2
# m2.2xlarge (4 cores, 34 GB, data in memory), PostgreSQL 9.1 and a one-worker CitusDB with
# lineitem and orders in 4 blocks; no indexes; shared_buffers 2GB, work_mem 64MB; the mean of
# three runs after a warm-up, in seconds.  (query, system, storage) -> seconds.
FILE_FDW_TPCH_SOURCE = ("seed 002 (PostgreSQL 9.1 and CitusDB, TPC-H SF 10, 4 cores, no indexes, "
                        "shared_buffers 2GB, work_mem 64MB; mean of 3 runs after a warm-up)")
FILE_FDW_TPCH_SECONDS: dict[tuple[str, str, str], float] = {
    (q, system, storage): seconds
    for q, row in {
        "q1": (311.3, 531.5, 55.1, 109.2),
        "q3": (38.2, 322.6, 13.5, 89.8),
        "q5": (32.9, 319.0, 12.4, 126.9),
        "q6": (18.6, 218.8, 5.5, 56.9),
        "q10": (54.9, 290.9, 38.0, 93.6),
        "q12": (32.6, 589.8, 14.7, 88.3),
        "q14": (18.7, 228.7, 9.0, 66.8),
        "q19": (27.6, 235.1, 10.2, 65.0),
    }.items()
    for (system, storage), seconds in zip((("postgresql", "regular"), ("postgresql", "foreign"),
                                           ("citusdb", "regular"), ("citusdb", "foreign")), row)
}
# "one CPU core parses around 36 MB/s": lineitem's 7.2 GB in a little over 200 s (Q1, Q6).
FILE_FDW_TPCH_PARSE_MB_S_PER_CORE = 36.0


def file_fdw_tpch_slowdown(query: str, system: str) -> float | None:
    """Seed 002's foreign/regular seconds for a query on 'postgresql' or 'citusdb'."""
    regular = FILE_FDW_TPCH_SECONDS.get((query, system, "regular"))
    foreign = FILE_FDW_TPCH_SECONDS.get((query, system, "foreign"))
    return foreign / regular if regular and foreign else None


# -- interfaces (seed 003) ------------------------------------------------------------------------
# Seed 003 (Joe Conway, "Postgres Interface Performance", credativ, September 2014): libpq (C),
# ODBC (C) and JDBC (Java) command-line clients, 288 testcases run 9 times each; sql001 = 1 row by
# id 50k times, sql50k = 50k rows once, sql10m = 10M rows once; durations in seconds (the wall
# time of each client command). Candidates: iface:acc-n (normal), acc-a (alternate: libpq's
# single-row mode), acc-y (COPY). The figures below are the slides' tables as printed.
INTERFACES_SOURCE = ("seed 003 (Joe Conway 2014: libpq/ODBC/JDBC clients; sql001 x 50k, t50k 50k rows, t10m 10M "
                     "rows; 9 runs per testcase)")

# 'Results - Interface/Method Summarized': candidate -> (avg_grpsz, avg_nml_dur, avg_nml_drng), in the
# slide's order (ORDER BY avg_nml_dur, avg_nml_drng, candidate).
INTERFACES_CANDIDATE_RANKING: dict[str, tuple[float, float, float]] = {
    "libpq:acc-a": (9.0, 0.008, 0.285),
    "libpq:acc-n": (9.0, 0.055, 0.224),
    "libpq:acc-y": (9.0, 0.097, 0.416),
    "JDBC:acc-y": (9.0, 0.231, 0.279),
    "ODBC:acc-n": (9.0, 0.748, 0.523),
    "JDBC:acc-n": (9.0, 0.851, 0.600),
}

# 'Results - Location/Transport Summarized': loc:comm -> (avg_grpsz, avg_nml_dur, avg_nml_drng).
INTERFACES_LOCATION_RANKING: dict[str, tuple[float, float, float]] = {
    "lcl:ipc": (9.0, 0.001, 0.398),
    "lcl:tcp": (9.0, 0.108, 0.484),
    "rmt:tcp": (9.0, 1.000, 0.538),
}

# 'Results - Query/Connect Strategy Summarized': testcase -> avg_dur (s), the mean over candidates.
INTERFACES_STRATEGY_AVG_DURATION: dict[str, float] = {
    "sql50k:001:lcl:ipc:0:p-all:file": 0.293,
    "sql50k:001:lcl:ipc:1:p-all:file": 0.299,
    "sql50k:001:lcl:tcp:0:p-all:file": 0.758,
    "sql50k:001:lcl:tcp:1:p-all:file": 0.784,
    "sql50k:001:rmt:tcp:0:p-all:file": 1.036,
    "sql50k:001:rmt:tcp:1:p-all:file": 1.038,
    "sql001:50k:lcl:ipc:1:p-all:file": 10.245,
    "sql001:50k:lcl:tcp:1:p-all:file": 15.586,
    "sql001:50k:rmt:tcp:1:p-all:file": 40.944,
    "sql001:50k:lcl:ipc:0:p-all:file": 186.176,
    "sql001:50k:lcl:tcp:0:p-all:file": 203.528,
    "sql001:50k:rmt:tcp:0:p-all:file": 428.544,
}

# The per-testcase slides (ifmeth_cat_results): (testcase, candidate) -> duration (s, average of 9 runs).
INTERFACES_TESTCASE_DURATION: dict[tuple[str, str], float] = {
    (testcase, candidate): seconds
    for testcase, rows in {
        "sql001:50k:lcl:ipc:0:p-all:file": {"libpq:acc-n": 167.08301, "libpq:acc-a": 168.08354,
                                            "libpq:acc-y": 169.53112, "ODBC:acc-n": 240.00766},
        "sql001:50k:lcl:ipc:1:p-all:file": {"libpq:acc-n": 7.72111, "libpq:acc-a": 8.30801,
                                            "libpq:acc-y": 8.44191, "ODBC:acc-n": 16.50867},
        "sql001:50k:lcl:tcp:0:p-all:file": {"libpq:acc-n": 184.76682, "libpq:acc-a": 185.10930,
                                            "libpq:acc-y": 187.35046, "JDBC:acc-y": 200.94066,
                                            "JDBC:acc-n": 206.43863, "ODBC:acc-n": 256.56118},
        "sql001:50k:lcl:tcp:1:p-all:file": {"libpq:acc-a": 11.40072, "libpq:acc-n": 11.62985,
                                            "libpq:acc-y": 12.67647, "JDBC:acc-y": 15.00848,
                                            "JDBC:acc-n": 20.46275, "ODBC:acc-n": 22.33883},
        "sql001:50k:rmt:tcp:0:p-all:file": {"libpq:acc-n": 380.87894, "libpq:acc-a": 381.20051,
                                            "libpq:acc-y": 398.77627, "JDBC:acc-y": 437.91512,
                                            "JDBC:acc-n": 443.36177, "ODBC:acc-n": 529.13435},
        "sql001:50k:rmt:tcp:1:p-all:file": {"libpq:acc-n": 26.79044, "libpq:acc-a": 26.95195,
                                            "libpq:acc-y": 41.10257, "JDBC:acc-y": 44.27100,
                                            "ODBC:acc-n": 52.93944, "JDBC:acc-n": 53.60791},
        "sql50k:001:rmt:tcp:1:p-all:file": {"libpq:acc-a": 0.44083, "libpq:acc-y": 0.55278,
                                            "libpq:acc-n": 0.60207, "JDBC:acc-y": 0.67728,
                                            "ODBC:acc-n": 0.94350, "JDBC:acc-n": 3.00985},
        "sql10m:001:rmt:tcp:1:p-all:file": {"libpq:acc-a": 36.10610, "libpq:acc-y": 41.68094,
                                            "JDBC:acc-y": 41.85082, "libpq:acc-n": 52.39856,
                                            "ODBC:acc-n": 90.92070, "JDBC:acc-n": 416.97683},
        "sql10m:001:lcl:tcp:1:p-all:file": {"libpq:acc-y": 29.37412, "libpq:acc-a": 31.62445,
                                            "JDBC:acc-y": 31.87552, "libpq:acc-n": 40.85718,
                                            "ODBC:acc-n": 77.09062, "JDBC:acc-n": 396.85311},
        "sql10m:001:lcl:ipc:1:p-all:file": {"libpq:acc-y": 27.45592, "libpq:acc-a": 30.03265,
                                            "libpq:acc-n": 36.35336, "ODBC:acc-n": 69.42425},
    }.items()
    for candidate, seconds in rows.items()
}

# The last slide (loccomm_cat_results, '%:acc-n:sql50k:001:1:p-all:file'): (testcase, loc:comm) -> s.
INTERFACES_LOCCOMM_DURATION: dict[tuple[str, str], float] = {
    ("libpq:acc-n:sql50k:001:1:p-all:file", "lcl:ipc"): 0.21962,
    ("libpq:acc-n:sql50k:001:1:p-all:file", "lcl:tcp"): 0.32501,
    ("libpq:acc-n:sql50k:001:1:p-all:file", "rmt:tcp"): 0.60207,
    ("ODBC:acc-n:sql50k:001:1:p-all:file", "lcl:ipc"): 0.56753,
    ("ODBC:acc-n:sql50k:001:1:p-all:file", "lcl:tcp"): 0.70518,
    ("ODBC:acc-n:sql50k:001:1:p-all:file", "rmt:tcp"): 0.94350,
    ("JDBC:acc-n:sql50k:001:1:p-all:file", "lcl:tcp"): 2.72273,
    ("JDBC:acc-n:sql50k:001:1:p-all:file", "rmt:tcp"): 3.00985,
}
