"""file-fdw-tpch's tpch role on a user server (--server tpch=DSN): its regular side only.

The TPC-H files are generated here and loaded into a database of ours there with COPY FROM
STDIN over the DSN; the cases of the single layout's regular storage are measured. The others
cannot run there: refine() leaves them out when they come from the defaults or a preset (the log
says so, say()), and refuses them in one line when the command line names them, before anything
is written. The seed's server settings a session may set are SET on each of our connections
there (the others, shared_buffers, are the server's own: its fingerprint holds them).
"""

from __future__ import annotations

from ..base import StudyOptions, only_served, user_roles
from .spec import CLUSTER_SETTINGS

ROLE = "tpch"
# What a user server in the tpch role serves, per dimension.
SERVED = {"storage": ("regular",), "layout": ("single",)}
WHY = {
    "foreign": "file_fdw reads files on the server's own disk, and the .tbl files are generated on this machine",
    "partitioned": "its partitions and parallel workers are sized by this machine's cores, and your server's "
                   "cores are not visible from SQL",
    "scaleout": "its workers are managed servers on this machine's loopback, which your server cannot reach "
                "through postgres_fdw (and the worker role cannot be a user server)",
}
FIX = {"storage": "--storage regular", "layout": "--layout single"}
# The seed's settings (spec.CLUSTER_SETTINGS) that a session may set with SET: a user server's.
SESSION_SETTINGS = {k: CLUSTER_SETTINGS[k] for k in ("work_mem", "jit", "synchronous_commit")}


def on_user_server(options: StudyOptions) -> bool:
    return ROLE in user_roles(options)


def refine(options: StudyOptions, given: set[str]) -> StudyOptions:
    """With a user tpch server: only what it serves (SERVED; base.only_served). Managed: the options
    as they are."""
    return only_served(options, given, SERVED, refusal) if on_user_server(options) else options


def refusal(dim: str, value: str) -> str:
    return (f"--{dim} {value}: your server in the tpch role (--server tpch) cannot run it: {WHY[value]}; give "
            f"{FIX[dim]}, or leave --server tpch out to measure it on a managed server")


def say(log) -> None:
    """The log line of a user tpch server: what it measures, and why nothing else."""
    log("tpch is your server: the regular storage of the single layout only (foreign: "
        f"{WHY['foreign']}; partitioned: {WHY['partitioned']}; scaleout: {WHY['scaleout']})")
