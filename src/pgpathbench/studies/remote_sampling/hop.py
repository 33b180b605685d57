"""remote-sampling's FDW hop with --tls: the options of postgres_fdw's connection to the source, and
what it negotiated.

The connection belongs to a session the study keeps across measurements (one per database on the
external server), so it is alive after each: the source's pg_stat_ssl, joined to pg_stat_activity,
shows its TLS, found by the application_name its foreign server gives it.
"""

from __future__ import annotations

import psycopg

from ...errors import CaseError
from ...matrix import Case
from ...servers import tls
from ..base import StudyEnv


def _application(env: StudyEnv, case: Case) -> str:
    """The application_name of the case's kept session's FDW connection."""
    return f"postgres_fdw {env.state.dbs[case['latency']]}"


def options(env: StudyEnv, case: Case) -> dict[str, str]:
    """The FDW connection's own options on a source with TLS (none without): the case's TLS
    (servers/tls.py), and the name the source's pg_stat_activity tells it by."""
    if not env.state.source.tls:
        return {}
    return {**tls.client_options(case.get("tls", tls.OFF), env.servers.root_cert),
            "application_name": _application(env, case)}


def negotiated(env: StudyEnv, case: Case, source: psycopg.Connection, database: str) -> str:
    """What the case's FDW connection negotiated, from `source` (a session in `database` there);
    CaseError when it is not the case's TLS."""
    try:
        seen = tls.sessions_seen(source, database, _application(env, case))
        return tls.check_seen(seen, case.get("tls", tls.OFF), "postgres_fdw")
    except (psycopg.Error, ValueError) as e:
        raise CaseError(f"tls {case.get('tls', tls.OFF)}: {e}") from None
