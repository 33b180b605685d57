"""interfaces through a PgBouncer (--via pgbouncer, --pool-mode): the checks of the options, where the
clients connect then, and the pooler's counters around each measurement (evidence/pooler.py).

The pooler sits in front of the server of the case's transport (local for unix and tcp, remote for
remote), on the direct path only; a client reaches it as it reaches the server: over the unix
socket (the pooler's own, trust, as the server's), or over TCP with scram-sha-256 (a secret of the
pooler's, by PGPASSFILE; --tcp-auth md5 concerns the servers only). The pooler reaches its server
by the server's socket; with --tls on, a case's both legs are TLS (a pooler of its own per server:
clients verify-full to it, it verify-full to its server over TCP). In front of a user's server
(--server local=DSN or remote=DSN) the pooler is ours, here, and logs in there as the DSN says.
"""

from __future__ import annotations

from psycopg import sql

from ...errors import UserError
from ...evidence import pooler as pooler_evidence
from ...matrix import NOT_APPLICABLE, StudyOptions
from ...servers import pgbouncer, tls, user
from ...servers.paths import DIRECT
from ...tools.clients import SYNC_SCANS_OFF
from ..base import tls_values
from .local import Target
from ...datasets.seed003 import DB
from .spec import LOCAL_ROLE, POOLER, REMOTE_ROLE, pool_mode_of


SYNC_SCANS = SYNC_SCANS_OFF.removeprefix("-c ").split("=")


def check(options: StudyOptions, given: set[str]) -> None:
    """UserError naming the option: a pool mode with no pooler, a user's DSN the pooler cannot verify by."""
    via = options.dims.get("via", ())
    if "pool_mode" in given and POOLER not in via:
        raise UserError("--pool-mode: sets the pool mode of a PgBouncer, and no case crosses one; give --via "
                        "pgbouncer too, or leave --pool-mode out")
    if POOLER in via:
        pgbouncer.refuse_session_settings(options, "--via")
        for dsn in user.from_stored(options.params).values():
            pgbouncer.check_user_dsn(dsn, "--via")


def requires(options: StudyOptions) -> None:
    if POOLER in options.dims.get("via", ()):
        pgbouncer.require("--via")


def pool_modes(options: StudyOptions) -> tuple[str, ...]:
    return (*options.dims["pool_mode"], NOT_APPLICABLE)


TLS_HOP = "+tls"   # a pooled target's both legs with TLS (the key's third part: 'session+tls')


def target_key(case) -> tuple[str, str, str]:
    """(transport, latency, 'direct' or the pool mode, +tls with TLS): the case's key in InterfacesState.targets."""
    mode = pool_mode_of(case)
    if mode is None:
        return case["transport"], case["latency"], "direct"
    return case["transport"], case["latency"], mode + (TLS_HOP if case.get("tls") == tls.ON else "")


def targets(env, servers: dict) -> dict[tuple[str, str, str], Target]:
    """Where the pooled cases connect: the pooler in front of each transport's server, per pool mode,
    and per TLS value over TCP (a pooler of each: its legs' TLS is the whole pooler's)."""
    if POOLER not in env.options.dims.get("via", ()):
        return {}
    out = {}
    for transport in env.options.dims["transport"]:
        server = servers[REMOTE_ROLE if transport == "remote" else LOCAL_ROLE]
        # The clients' PGOPTIONS (synchronize_seqscans = off) does not pass a pooler: our database has it.
        server.execute(DB, sql.SQL("ALTER DATABASE {} SET {} = {}").format(
            sql.Identifier(server.dbname(DB)), sql.Identifier(SYNC_SCANS[0]), sql.Literal(SYNC_SCANS[1])))
        over = "unix" if transport == "unix" else "tcp"
        for with_tls in sorted({v == tls.ON for v in tls_values(env.options)} if over == "tcp" else {False}):
            pooler = env.servers.pooler(server, tls=with_tls)
            for mode in env.options.dims["pool_mode"]:
                hop = mode + (TLS_HOP if with_tls else "")
                out[(transport, DIRECT, hop)] = Target(pooler.conninfo(pooler.serve(DB, mode), over), pooler)
    return out


def poolers_of(env, case) -> dict[str, tuple]:
    mode = pool_mode_of(case)
    if mode is None:
        return {}
    server = env.state.servers[REMOTE_ROLE if case["transport"] == "remote" else LOCAL_ROLE]
    pooler = env.servers.pooler(server, tls=case.get("tls") == tls.ON)
    return {pooler_evidence.CLIENT_PREFIX: (pooler, pooler.serve(DB, mode))}
