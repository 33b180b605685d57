"""--results-dsn: measurements go to a user's existing database, inside schema pgpathbench only."""

import json

import psycopg
import pytest

from conftest import pgpathbench
from pgpathbench.procs import OsUser
from pgpathbench.servers.binaries import resolve
from pgpathbench.servers.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def users_server(workspace_root):
    c = Cluster("users-own", workspace_root / "users-own", resolve(15), OsUser.for_servers())
    c.start()
    c.execute("postgres", "CREATE TABLE their_table (x int)", "INSERT INTO their_table VALUES (42)")
    yield c
    c.remove()


def test_results_go_to_the_given_database(users_server, workspace_root):
    dsn = users_server.conninfo("postgres", transport="tcp") + f" passfile={users_server.passfile}"
    res = pgpathbench("run", "fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "local",
                      "--clients", "1", "--repeat", "2", "--duration", "1", "--results-dsn", dsn,
                      workspace=workspace_root)
    assert res.returncode == 0, res.stderr
    with psycopg.connect(dsn) as conn:
        n = conn.execute("SELECT count(*) FROM pgpathbench.measurement WHERE ok").fetchone()[0]
        tps = conn.execute("SELECT median FROM pgpathbench.case_summary WHERE metric = 'tps'").fetchone()[0]
        schemas = {r[0] for r in conn.execute(
            "SELECT DISTINCT table_schema FROM information_schema.tables WHERE table_schema NOT IN "
            "('pg_catalog', 'information_schema')")}
        theirs = conn.execute("SELECT x FROM their_table").fetchone()[0]
    assert n == 2 and tps > 100
    assert schemas == {"public", "pgpathbench"} and theirs == 42
    runs = json.loads(pgpathbench("runs", "--format", "json", "--results-dsn", dsn, workspace=workspace_root).stdout)
    assert len(runs) == 1 and runs[0]["status"] == "finished"
