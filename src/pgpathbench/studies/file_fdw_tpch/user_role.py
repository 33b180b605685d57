"""file-fdw-tpch's roles on user servers, and the PostgreSQL build its managed servers run.

- tpch (--server tpch=DSN): the regular storage of the single layout only. The TPC-H files are
  generated here and loaded into a database of ours there with COPY FROM STDIN over the DSN. The
  seed's server settings a session may set are SET on each of our connections there (the others,
  shared_buffers, are the server's own: its fingerprint holds them).
- coordinator (--server coordinator=DSN): the citus layout on the user's Citus cluster, its
  regular and columnar storages (citus.py).

What a user server cannot run: refine() leaves it out when it comes from the defaults or a preset
(the log says so, say()), and refuses it in one line when the command line names it, before
anything is written.
"""

from __future__ import annotations

import dataclasses

from ...errors import UserError
from ...servers import citus as engine
from ...servers.binaries import PgBinaries
from ..base import StudyOptions, only_served, user_roles
from .spec import CITUS, CLUSTER_SETTINGS, COLUMNAR, canonical

ROLE = "tpch"
COORDINATOR = "coordinator"
# What a user server in the tpch role serves, per dimension (the citus layout runs on its own cluster).
SERVED = {"storage": ("regular",), "layout": ("single", CITUS)}
COORDINATOR_SERVED = {"storage": ("regular", COLUMNAR)}
WHY = {
    "foreign": "file_fdw reads files on the server's own disk, and the .tbl files are generated on this machine",
    COLUMNAR: "the columnar tables of the tpch instance are made on a managed server with Citus's citus_columnar",
    "partitioned": "its partitions and parallel workers are sized by this machine's cores, and your server's "
                   "cores are not visible from SQL",
    "postgres_fdw": "its workers are managed servers on this machine's loopback, which your server cannot reach "
                    "through postgres_fdw (and the worker role cannot be a user server)",
}
WHY["scaleout"] = WHY["postgres_fdw"]
FIX = {"storage": "--storage regular", "layout": "--layout single"}
# The seed's settings (spec.CLUSTER_SETTINGS) that a session may set with SET: a user server's.
SESSION_SETTINGS = {k: CLUSTER_SETTINGS[k] for k in ("work_mem", "jit", "synchronous_commit")}


def on_user_server(options: StudyOptions) -> bool:
    return ROLE in user_roles(options)


def refine(options: StudyOptions, given: set[str]) -> StudyOptions:
    """With user servers: only what they serve (SERVED; base.only_served). With a user coordinator
    and no --layout, the citus layout alone. Citus and columnar for PostgreSQL 15 only."""
    roles = user_roles(options)
    if COORDINATOR in roles and "layout" not in given:
        layouts = (("single",) if ROLE in roles else ()) + (CITUS,)
        options = dataclasses.replace(options, dims={**options.dims, "layout": layouts})
    if ROLE in roles:
        options = only_served(options, given, SERVED, refusal)
    if COORDINATOR in roles:
        options = only_served(options, given, COORDINATOR_SERVED, coordinator_refusal)
        if CITUS not in options.dims["layout"]:
            raise UserError("--server coordinator: no case runs on your Citus cluster; add citus to --layout, or "
                            "leave --server coordinator out")
    option = citus_option(options)
    if option:
        engine.refuse_major(options.dims["pg"], option)
    return options


def citus_option(options: StudyOptions, managed_only: bool = False) -> str | None:
    """The option that asks for Citus ('--layout citus', '--storage columnar'), or None. managed_only:
    on a managed server (the user's coordinator has its own Citus)."""
    layouts = {canonical(la) for la in options.dims["layout"]}
    roles = user_roles(options)
    citus_here = CITUS in layouts and not (managed_only and COORDINATOR in roles)
    stock_here = bool(layouts - {CITUS}) and not (managed_only and ROLE in roles)
    if citus_here:
        return "--layout citus"
    if COLUMNAR in options.dims["storage"] and (stock_here or not managed_only):
        return "--storage columnar"
    return None


def server_binaries(options: StudyOptions, bins: PgBinaries) -> PgBinaries:
    """A run whose managed servers run citus or columnar runs them all on the build with Citus, so
    that its layouts are compared on one PostgreSQL (servers/citus.py finds it); else `bins`."""
    option = citus_option(options, managed_only=True)
    return engine.require(bins, option) if option else bins


def managed(options: StudyOptions, layout: str) -> bool:
    """Whether a layout's servers are managed (not --server tpch or coordinator)."""
    return (COORDINATOR if canonical(layout) == CITUS else ROLE) not in user_roles(options)


def check_coordinator(options: StudyOptions, facts, dsn) -> None:
    """What the user's Citus cluster must have for the cases asked (read only, before anything is written)."""
    if COLUMNAR in options.dims["storage"] and "citus_columnar" not in facts.extensions:
        raise UserError("--storage columnar: your Citus cluster's database (--server coordinator) has no "
                        "citus_columnar; a DBA runs CREATE EXTENSION citus_columnar there, or give --storage regular")
    with dsn.connect(read_only=True) as conn:
        workers = engine.workers_of(conn)
    if not workers:
        raise UserError("--server coordinator: pg_dist_node lists no active worker of your Citus cluster; add one "
                        "(SELECT citus_add_node(host, port)), or give the DSN of a coordinator that has workers")


def refusal(dim: str, value: str) -> str:
    return (f"--{dim} {value}: your server in the tpch role (--server tpch) cannot run it: {WHY[value]}; give "
            f"{FIX[dim]}, or leave --server tpch out to measure it on a managed server")


def coordinator_refusal(dim: str, value: str) -> str:
    return (f"--storage {value}: your Citus cluster (--server coordinator) cannot run it: its shards would be "
            "file_fdw tables over files on the workers' own disks, which pgpathbench writes on this machine; give "
            "--storage regular,columnar, or leave --server coordinator out to measure it on a managed cluster")


def say(log, options: StudyOptions) -> bool:
    """The log lines of user servers, what each measures and why nothing else; whether tpch is one."""
    roles = user_roles(options)
    if ROLE in roles:
        log("tpch is your server: the regular storage of the single layout only (foreign: "
            f"{WHY['foreign']}; partitioned: {WHY['partitioned']}; postgres_fdw: {WHY['postgres_fdw']})")
    if COORDINATOR in roles:
        log("coordinator is your Citus cluster: the citus layout's regular and columnar storages, in schemas of "
            "ours in the DSN's database (foreign: the shards' files would be on your workers' disks)")
    return ROLE in roles
