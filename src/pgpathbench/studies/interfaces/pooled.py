"""interfaces through a PgBouncer (--via pgbouncer, --pool-mode): the checks of the options, where the
clients connect then, and the pooler's counters around each measurement (evidence/pooler.py).

The pooler sits in front of the server of the case's transport (local for unix and tcp, remote for
remote), on the direct path only; a client reaches it as it reaches the server: over the unix
socket (the pooler's own, trust, as the server's), or over TCP with scram-sha-256 (a secret of the
pooler's, by PGPASSFILE; --tcp-auth md5 concerns the servers only). The pooler reaches its server
by the server's socket.
"""

from __future__ import annotations

from ...errors import UserError
from ...evidence import pooler as pooler_evidence
from ...matrix import NOT_APPLICABLE, StudyOptions
from ...servers import pgbouncer
from ...servers.paths import DIRECT
from ...tools.clients import SYNC_SCANS_OFF
from ..base import user_roles
from .local import Target
from ...datasets.seed003 import DB
from .spec import LOCAL_ROLE, POOLER, REMOTE_ROLE, pool_mode_of


SYNC_SCANS = SYNC_SCANS_OFF.removeprefix("-c ").split("=")


def check(options: StudyOptions, given: set[str]) -> None:
    """UserError naming the option: a pool mode with no pooler, a pooler in front of a user's server."""
    via = options.dims.get("via", ())
    if "pool_mode" in given and POOLER not in via:
        raise UserError("--pool-mode: sets the pool mode of a PgBouncer, and no case crosses one; give --via "
                        "pgbouncer too, or leave --pool-mode out")
    if POOLER in via:
        pgbouncer.refuse_session_settings(options, "--via")
    served = sorted(user_roles(options))
    if POOLER in via and served:
        raise UserError(f"--via pgbouncer: a pooler in front of your server (--server {served[0]}=...) is not "
                        "supported yet; leave --via out, or use managed servers")


def requires(options: StudyOptions) -> None:
    if POOLER in options.dims.get("via", ()):
        pgbouncer.require("--via")


def pool_modes(options: StudyOptions) -> tuple[str, ...]:
    return (*options.dims["pool_mode"], NOT_APPLICABLE)


def target_key(case) -> tuple[str, str, str]:
    """(transport, latency, 'direct' or the pool mode): the case's key in InterfacesState.targets."""
    return case["transport"], case["latency"], pool_mode_of(case) or "direct"


def targets(env, servers: dict) -> dict[tuple[str, str, str], Target]:
    """Where the pooled cases connect: the pooler in front of each transport's server, per pool mode."""
    if POOLER not in env.options.dims.get("via", ()):
        return {}
    out = {}
    for transport in env.options.dims["transport"]:
        server = servers[REMOTE_ROLE if transport == "remote" else LOCAL_ROLE]
        # The clients' PGOPTIONS (synchronize_seqscans = off) does not pass a pooler: our database has it.
        server.execute("postgres", f"ALTER DATABASE {DB} SET {SYNC_SCANS[0]} = {SYNC_SCANS[1]}")
        pooler = env.servers.pooler(server)
        for mode in env.options.dims["pool_mode"]:
            over = "unix" if transport == "unix" else "tcp"
            out[(transport, DIRECT, mode)] = Target(pooler.conninfo(pooler.serve(DB, mode), over), pooler)
    return out


def poolers_of(env, case) -> dict[str, tuple]:
    mode = pool_mode_of(case)
    if mode is None:
        return {}
    server = env.state.servers[REMOTE_ROLE if case["transport"] == "remote" else LOCAL_ROLE]
    pooler = env.servers.pooler(server)
    return {pooler_evidence.CLIENT_PREFIX: (pooler, pooler.serve(DB, mode))}
