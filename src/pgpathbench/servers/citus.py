"""Citus, the distributed engine on PostgreSQL: where it is installed, the binaries a run with it
uses, and a managed Citus cluster's nodes, links and facts.

Citus is for PostgreSQL 15 here. It is found, in this order:
- the PostgreSQL of --pg-bindir, when one is given (it must have Citus: a run never swaps the
  binaries a user named);
- the system's PostgreSQL 15, where Citus's own packages (postgresql-15-citus-13.2) install it;
- the tool's own tree, .tools/pg15-citus: Debian's postgresql-15 (15.20 or later, which the
  prebuilt Citus needs) unpacked there, not installed, with Citus's files copied in, by
  scripts/install-citus. The system's PostgreSQL is never written to.

A managed Citus cluster is a coordinator and N workers, each a managed cluster preloading citus
and sharing one password, which pg_dist_authinfo gives Citus's connections between them (its one
way to a password: citus.node_conninfo takes none); the coordinator is in pg_dist_node (group 0,
no shards), the workers are added by citus_add_node. CREATE EXTENSION citus turns ssl on with a
self-signed certificate on each node, and citus.node_conninfo's default (sslmode=require) makes
every link between nodes TLS: links() reads what they use from pg_stat_ssl on the workers.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from ..errors import UserError
from .binaries import DEBIAN_CLIENT_BINDIR, DEBIAN_CLIENT_MAJOR, PgBinaries

MAJOR = 15
TREE = Path(__file__).resolve().parents[3] / ".tools" / f"pg{MAJOR}-citus"
MARKER = "INSTALLED.json"
FIX = ("run scripts/install-citus (make bootstrap runs it when the vendored files are there; it takes "
       "--prebuilt FILE or --source FILE), or install Citus's packages (postgresql-15-citus-13.2)")
PRELOAD = {"shared_preload_libraries": "citus"}
# Citus's own connections between nodes name themselves so (citus_internal gpid=N).
INTERNAL_APP = "citus_internal%"


def pkglibdir(bins: PgBinaries) -> Path:
    """Where the server loads its libraries from (Debian's layout and the tree's: bin/../lib)."""
    return bins.bindir.parent / "lib"


def has_citus(bins: PgBinaries) -> bool:
    return bins.has_extension("citus") and (pkglibdir(bins) / "citus.so").is_file()


def tree_facts(tree: Path = TREE) -> dict:
    """What scripts/install-citus recorded of the tree ({} when there is none)."""
    try:
        return json.loads((tree / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def tree_binaries(tree: Path = TREE) -> PgBinaries | None:
    facts = tree_facts(tree)
    bindir = tree / "usr" / "lib" / "postgresql" / str(MAJOR) / "bin"
    if not facts or not (bindir / "postgres").is_file():
        return None
    return PgBinaries(MAJOR, bindir, DEBIAN_CLIENT_BINDIR, DEBIAN_CLIENT_MAJOR,
                      origin=f"pgpathbench's own PostgreSQL {facts.get('postgresql')} with Citus in {tree} "
                             "(scripts/install-citus)")


def find(bins: PgBinaries) -> PgBinaries | None:
    """The binaries with Citus for a run whose own are `bins` (see the module's docstring), or None."""
    if bins.origin.startswith("--pg-bindir") or has_citus(bins):
        return bins if has_citus(bins) else None
    tree = tree_binaries()
    return tree if tree is not None and has_citus(tree) else None


def require(bins: PgBinaries, option: str) -> PgBinaries:
    """find()'s binaries, or UserError naming `option` and the fix."""
    found = find(bins)
    if found is not None:
        return found
    if bins.origin.startswith("--pg-bindir"):
        raise UserError(f"{option}: the PostgreSQL of --pg-bindir ({bins.bindir}) has no Citus; install Citus "
                        "into it, or leave --pg-bindir out to use pgpathbench's own (scripts/install-citus)")
    raise UserError(f"{option}: needs Citus, which is not installed here; {FIX}")


def refuse_major(majors, option: str) -> None:
    other = [m for m in majors if int(m) != MAJOR]
    if other:
        raise UserError(f"{option}: Citus is for PostgreSQL {MAJOR} here, and --pg asks for {','.join(other)}; "
                        f"give --pg {MAJOR}")


def extension_version(bins: PgBinaries) -> str | None:
    """The version CREATE EXTENSION citus makes with these binaries (its control file's), or None."""
    try:
        control = (bins.sharedir() / "extension" / "citus.control").read_text()
    except OSError:
        return None
    return next((line.split("'")[1] for line in control.splitlines() if line.startswith("default_version")), None)


def describe(bins: PgBinaries) -> tuple[bool, str]:
    """For doctor: whether Citus is there, its version and where."""
    found = find(bins)
    if found is None:
        return False, f"not installed (file-fdw-tpch's --layout citus and --storage columnar need it): {FIX}"
    version = extension_version(found) or "?"
    server = found.version().replace("postgres (PostgreSQL) ", "PostgreSQL ")
    removal = "; scripts/install-citus --remove removes it" if found.bindir.is_relative_to(TREE) else ""
    return True, f"Citus {version} on {server}: {found.origin}{removal}"


# -- a managed cluster ------------------------------------------------------------------------------
def set_up(coordinator, workers, db: str) -> None:
    """The extension on every node, the shared password for Citus's connections, the nodes in pg_dist_node."""
    for node in (coordinator, *workers):
        node.execute(db, "CREATE EXTENSION IF NOT EXISTS citus")
    with coordinator.connect(db) as conn:
        conn.execute("SET log_statement = 'none'")   # the password: never in a server log
        conn.execute("INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, current_user, %s)",
                     (f"password={coordinator.password}",))
        conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (coordinator.tcp_host, coordinator.port))
        for w in workers:
            conn.execute("SELECT citus_add_node(%s, %s)", (w.tcp_host, w.port))


def nodes(conn: psycopg.Connection) -> list[dict]:
    """pg_dist_node's active primaries: the coordinator (group 0) first, then the workers."""
    rows = conn.execute("SELECT nodeid, groupid, nodename, nodeport, shouldhaveshards FROM pg_dist_node "
                        "WHERE isactive AND noderole = 'primary' ORDER BY groupid, nodeid").fetchall()
    return [{"nodeid": i, "group": g, "host": h, "port": p, "shards": s} for i, g, h, p, s in rows]


def workers_of(conn: psycopg.Connection) -> list[dict]:
    return [n for n in nodes(conn) if n["group"] != 0]


def facts(conn: psycopg.Connection) -> dict:
    """The coordinator's view: Citus's version, its nodes, and how they connect to each other
    (citus.node_conninfo is readable by superusers and pg_read_all_settings only)."""
    readable = conn.execute("SELECT rolsuper OR pg_has_role(oid, 'pg_read_all_settings', 'USAGE') FROM pg_roles "
                            "WHERE rolname = current_user").fetchone()[0]
    conninfo = conn.execute("SELECT current_setting('citus.node_conninfo')").fetchone()[0] if readable else \
        f"not readable by {conn.info.user} (superusers and pg_read_all_settings only)"
    return {"version": conn.execute("SELECT citus_version()").fetchone()[0],
            "extension": conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()[0],
            "nodes": nodes(conn), "node_conninfo": conninfo}


def links(conn: psycopg.Connection) -> list[dict]:
    """What Citus's connections to each worker use, as the worker sees them (pg_stat_ssl of the
    citus_internal backends open now: call it right after a query, while they are cached)."""
    query = ("SELECT coalesce(json_agg(json_build_object('ssl', s.ssl, 'version', s.version, 'cipher', s.cipher, "
             "'bits', s.bits, 'client_addr', host(a.client_addr))), '[]') FROM pg_stat_ssl s JOIN pg_stat_activity a "
             f"USING (pid) WHERE a.application_name LIKE '{INTERNAL_APP}'")
    rows = conn.execute("SELECT nodename, nodeport, success, result FROM run_command_on_workers(%s)",
                        (query,)).fetchall()
    out = []
    for host, port, ok, result in rows:
        seen = json.loads(result) if ok else []
        kinds = sorted({(c["ssl"], c["version"], c["cipher"]) for c in seen}, key=str)
        out.append({"worker": f"{host}:{port}", "connections": len(seen),
                    "tls": [{"ssl": s, "version": v, "cipher": c} for s, v, c in kinds],
                    **({} if ok else {"error": result})})
    return out

