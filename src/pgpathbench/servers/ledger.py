"""The workspace's ledger of objects made on user servers, so that `clean` finds what a killed run left.

Each database is recorded before it is made, with the DSN minus its password; the entry goes when
the database is dropped. A database is dropped only if it is still marked ours: its COMMENT names
the run (made right after it), or it has no comment and was recorded by that run (killed between
the two). A CREATE that fails removes its entry at once: the name may belong to someone else.
A schema of ours in the DSN's own database (a Citus coordinator's: entries with "schema") is kept
the same way, and dropped with CASCADE (on Citus, with its shards on the workers).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import psycopg
from psycopg import sql

MARK = "pgpathbench run"
FILE = "user-objects.json"


@contextlib.contextmanager
def locked_entries(path: Path) -> Iterator[list[dict]]:
    """A JSON list's entries, read and written back under an exclusive lock (runs may share a workspace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = json.loads(path.read_text()) if path.exists() else []
        before = list(entries)
        yield entries
        if entries != before:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(entries, indent=1) + "\n")
            os.replace(tmp, path)


class Ledger:
    def __init__(self, root: Path):
        self.path = root / FILE

    def _locked(self):
        return locked_entries(self.path)

    def entries(self, run_id: str | None = None) -> list[dict]:
        if not self.path.exists():
            return []
        with self._locked() as entries:
            return [e for e in entries if run_id is None or e["run_id"] == run_id]

    def add(self, run_id: str, role: str, dsn: str, database: str | None, schema: str | None = None) -> None:
        with self._locked() as entries:
            entries.append({"run_id": run_id, "role": role, "dsn": dsn, "database": database,
                            **({"schema": schema} if schema else {}),
                            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})

    def forget(self, run_id: str, database: str | None, dsn: str, schema: str | None = None) -> None:
        with self._locked() as entries:
            entries[:] = [e for e in entries if (e["run_id"], e["database"], e["dsn"], e.get("schema")) !=
                          (run_id, database, dsn, schema)]

    def drop(self, run_id: str, role: str | None, connect: Callable[..., psycopg.Connection],
             dsn: str | None = None) -> list[str]:
        """Drop the recorded databases of a run on one server (by role, or by its DSN); what was done,
        one line each. `connect` is a UserDsn's (it takes untimed=True)."""
        said = []
        mine = [e for e in self.entries(run_id) if (role is None or e["role"] == role) and (dsn is None or e["dsn"] == dsn)]
        if not mine:
            return said
        # The role's own timeouts are for its queries: our clean-up must not be cancelled halfway
        # (15's DROP DATABASE waits for a checkpoint), or a database of ours stays behind.
        # Last made first: a database whose foreign tables reach another (localfdw, source) goes before
        # it. On 15 a DROP waits until every backend absorbs its barrier; one of localfdw's in
        # postgres_fdw's (blocking) connect to the source waits on a backend that waits on the DROP's
        # lock, and absorbs nothing: both hung (seen once, two suites side by side).
        with connect(untimed=True) as conn:
            for e in sorted(mine[::-1], key=lambda e: "schema" not in e):   # schemas live in the DSN's database
                said.append(drop_schema(conn, e) if "schema" in e else drop_database(conn, e))
                self.forget(e["run_id"], e["database"], e["dsn"], e.get("schema"))
        return said


def _not_ours(conn: psycopg.Connection, comment_query: str, name: str, run_id: str, where: str) -> str | None:
    """Why an object may not be dropped (gone, or its COMMENT names another run), or None: ours (its
    comment names the run, or it has none: killed between CREATE and COMMENT)."""
    row = conn.execute(comment_query, (name,)).fetchone()
    if row is None:
        return f"{where}: already gone"
    if row[0] is not None and not row[0].startswith(f"{MARK} {run_id},"):
        return f"{where}: left alone, its comment does not name run {run_id}"
    return None


def drop_database(conn: psycopg.Connection, entry: dict) -> str:
    """DROP DATABASE of one entry if it is still ours (see the module's docstring)."""
    db = entry["database"]
    where = f"{db} on {entry['dsn']}"
    refused = _not_ours(conn, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                        db, entry["run_id"], where)
    if refused:
        return refused
    force = sql.SQL(" WITH (FORCE)") if conn.info.server_version >= 130000 else sql.SQL("")
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}{}").format(sql.Identifier(db), force))
    return f"dropped database {where}"


def drop_schema(conn: psycopg.Connection, entry: dict) -> str:
    """DROP SCHEMA ... CASCADE of one entry if it is still ours (its COMMENT names the run, or it has
    none: killed between CREATE and COMMENT). `conn` is in the DSN's own database, where it lives."""
    schema = entry["schema"]
    where = f"schema {schema} in {entry['database'] or 'the DSN database'} on {entry['dsn']}"
    refused = _not_ours(conn, "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
                        schema, entry["run_id"], where)
    if refused:
        return refused
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return f"dropped {where}"
