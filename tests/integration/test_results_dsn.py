"""--results-dsn: measurements go to a user's existing database, inside schema pgpathbench only."""

import json

import psycopg
import pytest

from conftest import pgpathbench, pgpathbench_main
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
    runs = json.loads(pgpathbench_main("runs", "--format", "json", "--results-dsn", dsn, workspace=workspace_root).stdout)
    assert len(runs) == 1 and runs[0]["status"] == "finished"


@pytest.fixture(scope="module")
def roles(users_server):
    """A role that may not create schemas in its database, and one beside the store's owner."""
    users_server.execute("postgres", "CREATE ROLE weak LOGIN PASSWORD 'weak_pw_1'",
                         "CREATE ROLE other LOGIN PASSWORD 'other_pw_1'", "CREATE DATABASE weakdb",
                         "CREATE DATABASE shared OWNER other")
    users_server.execute("shared", "CREATE SCHEMA pgpathbench", "GRANT CREATE ON DATABASE shared TO weak")
    # A managed cluster admits only its own superuser; this one plays a user's server, which admits them.
    with open(users_server.data / "pg_hba.conf", "a") as hba:
        hba.write(f"host all weak,other 127.0.0.1/32 {users_server.tcp_auth}\n")
    users_server.execute("postgres", "SELECT pg_reload_conf()")
    return users_server


@pytest.mark.parametrize("dbname, message", [
    ("weakdb", '--results-dsn: role weak may not create schema pgpathbench in database weakdb (it lacks CREATE on the '
               'database); GRANT CREATE ON DATABASE "weakdb" TO "weak", or give a database where it has it'),
    ("shared", "--results-dsn: schema pgpathbench in database shared belongs to role pgpathbench, and role weak may "
               "not change it; give the DSN of role pgpathbench, which keeps the store there"),
])
def test_a_role_without_the_privileges_is_one_line(roles, workspace_root, dbname, message):
    dsn = f"host=127.0.0.1 port={roles.port} user=weak password=weak_pw_1 dbname={dbname}"
    ws = workspace_root.parent / (workspace_root.name + "-untouched")   # reachable by the servers' user
    for argv in (["runs"], ["run", "fdw-overhead", "--preset", "quick", "--target", "local", "--repeat", "1"]):
        res = pgpathbench(*argv, "--results-dsn", dsn, workspace=ws)
        assert res.returncode == 2 and res.stderr == f"pgpathbench: error: {message}\n" and res.stdout == ""
        assert "weak_pw_1" not in res.stderr
    assert not ws.exists(), "nothing written: no workspace, no server"
    with psycopg.connect(roles.conninfo(dbname)) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'pgpathbench'").fetchone()[0] == 0
