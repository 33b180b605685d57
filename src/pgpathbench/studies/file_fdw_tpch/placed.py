"""file-fdw-tpch's postgres_fdw layout with workers on other hosts (issue 47): `--place worker=NAME`
puts every worker1..N there, `--place workerK=NAME` worker K alone (servers/placement.py).

A placed worker is a managed server on its host (servers/remote.py): its part files, which its
file_fdw tables read, are shipped to its directory there (RemoteCluster.server_paths), its regular
tables loaded by COPY over the network, and the coordinator here reaches it at the host's address.
What a run with placed workers may ask is checked before anything is written (check); each host's
room for its workers' files, tables and WAL before anything goes there (check_room); the FDW hop
from the coordinator to each placed worker is timed every round (probes), beside the client path's
round trips that every placed server has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...datasets.tpch.files import TpchFiles
from ...datasets.tpch.schema import PARTITIONED
from ...errors import UserError
from ...servers.network import time_statement
from ...servers.placement import CITUS_WORKER, family, host_of
from ..base import StudyOptions, user_roles
from .spec import CITUS, COLUMNAR, DB, canonical
from .user_role import COORDINATOR

if TYPE_CHECKING:
    from .nodes import Nodes
    from .shape import Shape

WORKER = "worker"
HOP, HOP_SCANS = "+fdw_scan", 20    # a probe's link name: <worker's link>+fdw_scan, a one-row foreign scan
# A worker's disk on its host: its part files, the same rows in its regular tables, and their WAL.
ROOM_PER_FILE_BYTE = 3.0


def placed_workers(options: StudyOptions, which: str = WORKER) -> dict[str, str]:
    """--place's roles of a worker family (worker, workerK; or citus_worker...) and their hosts."""
    placed = options.params.get("placed") or {}
    return {role: host for role, host in placed.items() if family(role, "file-fdw-tpch") == which}


def check(options: StudyOptions) -> None:
    """A placed worker needs its layout, and a K within its count; a postgres_fdw one no columnar storage
    (its citus_columnar is not shipped to hosts in this version): one line naming the option."""
    for which, layout, count in ((WORKER, "postgres_fdw", "partitions"), (CITUS_WORKER, CITUS, "workers")):
        _check_family(options, placed_workers(options, which), which, layout, count)
    citus = placed_workers(options, CITUS_WORKER)
    if citus and COORDINATOR in user_roles(options):
        role, host = next(iter(citus.items()))
        raise UserError(f"--place {role}={host}: the citus layout runs on your Citus cluster (--server coordinator), "
                        "whose workers are its own; leave --place out, or --server coordinator out")
    placed = placed_workers(options)
    if placed and COLUMNAR in options.dims["storage"]:
        role, host = next(iter(placed.items()))
        raise UserError(f"--storage columnar: a placed worker ({role}={host}) would need Citus's citus_columnar on "
                        "its host, which this version does not ship; leave columnar out of --storage, or leave "
                        "--place out")


def _check_family(options: StudyOptions, placed: dict[str, str], which: str, layout: str, count: str) -> None:
    if not placed:
        return
    role, host = next(iter(placed.items()))
    if layout not in {canonical(la) for la in options.dims["layout"]}:
        raise UserError(f"--place {role}={host}: places the {layout} layout's workers, and the run measures "
                        f"no {layout} layout; add {layout} to --layout, or leave --place out")
    n = int(options.params.get(count) or 1)
    beyond = sorted(r for r in placed if r != which and int(r[len(which):]) > n)
    if beyond:
        raise UserError(f"--place {beyond[0]}={placed[beyond[0]]}: the {layout} layout has {which}1..{n} "
                        f"(--{count} {n}); give {which}K with K from 1 to {n}, or more --{count}")


def check_room(nodes: Nodes, files: TpchFiles, shape: Shape) -> None:
    """Each host's free disk (read there) against what its placed workers put on it."""
    need: dict[str, tuple[float, int]] = {}   # host -> (bytes its workers need, bytes free there)
    placed = [(k, w) for k, w in enumerate(nodes.fdw_workers, 1) if "unix" not in w.transports]
    sizes = files.part_sizes(shape.partitions) if placed else {}
    for k, w in placed:   # on its host, whose facts were read there
        nbytes = need.get(w.host.name, (0, 0))[0] + ROOM_PER_FILE_BYTE * sum(sizes[t][k - 1] for t in PARTITIONED)
        need[w.host.name] = nbytes, int(w.host.facts.values.get("disk_free_kb") or 0) * 1024
    for host, (nbytes, free) in need.items():
        if nbytes > free:
            raise UserError(f"--place: the postgres_fdw workers on host {host} need about {nbytes / 1e9:.1f} GB "
                            f"free there (part files, tables, WAL), {free / 1e9:.1f} GB are; use a smaller --scale, "
                            "spread the workers over more hosts (--place workerK=NAME), or a host with more room")


def probes(nodes: Nodes, placed: dict[str, str]) -> list[dict]:
    """The FDW hop to each placed worker: a one-row foreign scan of its lineitem partition, timed on the
    coordinator (postgres_fdw's cursor and transaction round trips over the real link)."""
    out = []
    for k, w in enumerate(nodes.fdw_workers, 1):
        host = host_of(placed, f"{WORKER}{k}")
        if host is None:
            continue
        with nodes.main.connect(DB) as conn:
            timing = time_statement(conn, f"SELECT 1 FROM postgres_fdw_regular.lineitem_{k} LIMIT 1", HOP_SCANS,
                                    warmup=3)
        out.append({"link": f"{w.name}@{host}{HOP}", **timing})
    return out
