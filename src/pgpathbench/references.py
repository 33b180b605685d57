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
