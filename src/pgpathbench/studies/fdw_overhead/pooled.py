"""fdw-overhead's poolers (--via, --pool-mode, --fdw-via): which cases cross a PgBouncer, the checks of
the options, and PgBouncer's counters around each measurement (evidence/pooler.py).

--via pgbouncer: pgbench connects to a managed PgBouncer in front of the target's server, over the
pooler's unix socket with the same trust as the server's own socket, so that the direct and the
pooled cases differ in the pooler alone. --fdw-via pgbouncer: the foreign server of an FDW target
reaches a PgBouncer in front of the source (loopback TCP, scram-sha-256) instead of the source
itself, as people do to bound postgres_fdw's connections; only over the direct path (the pooler
sits beside the source, not behind an emulated link), and local has no FDW hop. With --tls on, both
legs of the FDW hop through the pooler are TLS: postgres_fdw verify-full to the pooler, the pooler
verify-full to the source over TCP (a pooler of its own: 1.18's TLS settings are the whole pooler's,
so a run with --tls off,on has two in front of the source, and each case's foreign server names its
pooler's port: fdw_hop_options). --pool-mode is
every pooler's mode in the case; cases without a pooler carry '-' (quiet: their ids do not change).
Transaction pooling breaks what needs a session: PgBouncer 1.18 keeps no prepared statement across
transactions, so --protocol prepared under transaction mode is an excluded case (EXCLUDED names it).
"""

from __future__ import annotations

import psycopg

from ...errors import UserError
from ...evidence import pooler as pooler_evidence
from ...matrix import NOT_APPLICABLE, StudyOptions
from ...servers import pgbouncer, tls, user
from ...servers.network import time_statement
from ...servers.paths import DIRECT
from ..base import user_roles
from .spec import POOLER, REMOTE_TARGETS, case_path

EXCLUDED = ("--protocol prepared under --pool-mode transaction: not measured (PgBouncer 1.18 keeps no prepared "
            "statement across transactions, so pgbench -M prepared fails there)")
PROBE_ROUND_TRIPS = 100
# postgres_fdw SETs search_path = pg_catalog (and more) for its remote sessions: in transaction mode they
# would reach pgbench's sessions sharing the pool. The FDW hop's clients have a pool of their own.
FDW_POOL = "fdw"


def pooled(d) -> bool:
    return d.get("via") == POOLER or d.get("fdw_via") == POOLER


def check(options: StudyOptions, given: set[str]) -> None:
    """The pooler options' combinations: UserError naming the option."""
    dims = options.dims
    via, fdw_via = dims.get("via", ()), dims.get("fdw_via", ())
    if "pool_mode" in given and POOLER not in via and POOLER not in fdw_via:
        raise UserError("--pool-mode: sets the pool mode of a PgBouncer, and no case crosses one; give --via "
                        "pgbouncer or --fdw-via pgbouncer too, or leave --pool-mode out")
    direct_fdw = "fdw_local" in dims["target"] or (DIRECT in dims["latency"] and
                                                   any(t in REMOTE_TARGETS for t in dims["target"]))
    if POOLER in fdw_via and not direct_fdw:
        raise UserError("--fdw-via pgbouncer: no --target has an FDW hop on the direct path (local reads its "
                        "table itself; the pooler is not put behind an emulated link); add fdw_local, or "
                        "fdw_external with --latency 0")
    if POOLER in via or POOLER in fdw_via:
        pgbouncer.refuse_session_settings(options, "--via" if POOLER in via else "--fdw-via")
    served = sorted(user_roles(options))
    if POOLER in fdw_via and served:
        raise UserError(f"--fdw-via pgbouncer: a pooler on the FDW hop with your server (--server {served[0]}=...) "
                        "is not supported; leave --fdw-via out (--via pgbouncer puts one in front of your server)")
    if POOLER in via:
        for dsn in user.from_stored(options.params).values():
            pgbouncer.check_user_dsn(dsn, "--via")


def pool_modes(options: StudyOptions) -> tuple[str, ...]:
    """--pool-mode's values, and '-' for the cases that cross no pooler."""
    return (*options.dims["pool_mode"], NOT_APPLICABLE) if "pool_mode" in options.dims else ()


def excluded(d: dict[str, str]) -> bool:
    if "pool_mode" not in d:   # a run stored before the poolers
        return False
    if pooled(d) != (d["pool_mode"] != NOT_APPLICABLE):
        return True
    if d["fdw_via"] == POOLER and (d["target"] == "local" or d["latency"] != DIRECT):
        return True
    return d["pool_mode"] == "transaction" and d["protocol"] == "prepared"


def fdw_hop(case) -> str:
    """How the case's foreign server reaches the source: 'direct', or the pooler's mode."""
    return case.get("pool_mode") if case.get("fdw_via") == POOLER else "direct"


def client_pooler(env, case, cluster, db):
    """The pooler pgbench connects to and its alias of `db`, or (None, db) for the direct cases."""
    if case.get("via") != POOLER:
        return None, db
    pooler = env.servers.pooler(cluster)
    return pooler, pooler.serve(db, case["pool_mode"])


def poolers_of(env, case) -> dict[str, tuple]:
    """The case's poolers by metric prefix: (pooler, alias)."""
    out = {}
    pooler, alias = client_pooler(env, case, *env.state.targets[target_key(case)])
    if pooler is not None:
        out[pooler_evidence.CLIENT_PREFIX] = (pooler, alias)
    if case.get("fdw_via") == POOLER:
        out[pooler_evidence.FDW_PREFIX] = fdw_pooler(env, case)
    return out


def fdw_pooler(env, case) -> tuple:
    """The PgBouncer on the case's FDW hop (its TLS value's) and its alias of the source: (pooler, alias)."""
    pooler = env.servers.pooler(env.state.source, tls=case.get("tls") == tls.ON)
    return pooler, pooler.serve("source", case["pool_mode"], FDW_POOL)


def fdw_hop_options(env, case) -> dict[str, str]:
    """The foreign server's options of the case's FDW hop: its TLS (servers/tls.py), and through a pooler
    that pooler's port (the TLS value's)."""
    options = tls.client_options(case.get("tls", tls.OFF), env.servers.root_cert) if env.state.source.tls else {}
    if case.get("fdw_via") == POOLER:
        options["port"] = str(fdw_pooler(env, case)[0].port)
    return options


def before(env, case) -> None:
    """The counters of the case's poolers, read before its measurement (untimed)."""
    env.state.pooler_counters = pooler_evidence.snapshot(poolers_of(env, case))


def after(env, case, evidence: dict) -> dict:
    """The deltas since before(), kept in the evidence ("pgbouncer") and as metrics."""
    return pooler_evidence.collect(poolers_of(env, case), env.state.pooler_counters, evidence)


def target_key(case) -> tuple[str, str, str]:
    """The key of the case's target in FdwOverheadState.targets: (target, latency, fdw_hop)."""
    return case["target"], case["latency"], fdw_hop(case)


def probes(env) -> list[dict]:
    """SELECT 1 from the tool through the pooler in front of the source, per pool mode: the round trip
    of local's pooled path (stored like the links'; FDW targets' paths are the FDW hop's)."""
    out, seen = [], set()
    for case in env.state.pooled_cases:
        path = case_path(case)
        if case["target"] != "local" or path.id in seen:
            continue
        seen.add(path.id)
        pooler, alias = client_pooler(env, case, *env.state.targets[target_key(case)])
        with psycopg.connect(pooler.conninfo(alias), autocommit=True, prepare_threshold=None) as conn:
            out.append({"link": path.id, **time_statement(conn, "SELECT 1", PROBE_ROUND_TRIPS)})
    return out
