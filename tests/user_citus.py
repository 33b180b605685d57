"""A user's Citus cluster for the tests: a coordinator and a worker, each a tests/user_server.py
server (its own initdb and postmaster, roles dba and app, the user's data) on a host of a test LAN
(tests/user_lan.py), on pgpathbench's own PostgreSQL with Citus (scripts/install-citus), preloading
citus.

What its DBA did, as a DBA would (the README's list for the coordinator role):
  on every node, in userdb: CREATE EXTENSION citus; CREATE EXTENSION citus_columnar;
    GRANT CREATE ON DATABASE userdb TO app (our schemas go there; Citus creates them on the workers
    as app too);
  on the coordinator: pg_dist_authinfo rows with dba's and app's passwords for every node (Citus's
    connections to its workers authenticate with them: the nodes share the roles' passwords), then
    citus_set_coordinator_host and citus_add_node for the worker.
app stays LOGIN CREATEDB NOSUPERUSER: what a user gives the tool.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from pgpathbench.servers import citus

from user_lan import Lan
from user_server import APP, DBA, USERDB, UserServer

# What Citus's metadata holds of distributed tables: a run leaves the counts as they were.
CITUS_METADATA = ("pg_dist_partition", "pg_dist_shard", "pg_dist_placement", "pg_dist_colocation", "pg_dist_node")


class CitusNode(UserServer):
    """A UserServer on the Citus tree, preloading citus."""

    def __init__(self, *args, passwords: dict[str, str] | None = None, **kw):
        super().__init__(*args, **kw)
        self.bins = citus.tree_binaries()
        assert self.bins is not None, "Citus is not installed: make bootstrap (scripts/install-citus)"
        if passwords:      # the nodes of one cluster share the roles' passwords (pg_dist_authinfo's)
            self._passwords = dict(passwords)

    def _configure(self) -> None:
        super()._configure()
        with open(self.data / "postgresql.conf", "a") as f:   # after the fixture's: the last one wins
            f.write("shared_preload_libraries = 'citus'\n")

    def citus_metadata(self) -> dict[str, int]:
        with self.connect(DBA, USERDB) as c:
            return {t: c.execute(f"SELECT count(*) FROM pg_catalog.{t}").fetchone()[0] for t in CITUS_METADATA}


@contextlib.contextmanager
def citus_cluster(root: Path) -> Iterator[tuple[CitusNode, CitusNode]]:
    """(coordinator, worker) on hosts c and w of a LAN of their own."""
    with Lan(root / "lan", ("c", "w")) as lan, CitusNode(root, "coord", lan=lan.hosts["c"]) as coordinator, \
            CitusNode(root, "worker", lan=lan.hosts["w"], passwords=coordinator._passwords) as worker:
        for node in (coordinator, worker):
            with node.connect(DBA, USERDB) as c:
                c.execute("CREATE EXTENSION citus")
                c.execute("CREATE EXTENSION citus_columnar")
                c.execute(f"GRANT CREATE ON DATABASE {USERDB} TO {APP}")
        with coordinator.connect(DBA, USERDB) as c:
            c.execute("SET log_statement = 'none'")     # the passwords
            for role in (DBA, APP):
                c.execute("INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES (0, %s, %s)",
                          (role, f"password={coordinator.password(role)}"))
            c.execute("RESET log_statement")
            c.execute("SELECT citus_set_coordinator_host(%s, 5432)", (coordinator.address,))
            c.execute("SELECT citus_add_node(%s, 5432)", (worker.address,))
        coordinator.mark_log()
        worker.mark_log()
        yield coordinator, worker
