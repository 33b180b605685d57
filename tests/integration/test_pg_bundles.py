"""PostgreSQL 17 from Maven Central (zonky bundle) as a managed server, with Debian's pgbench 15 against it."""

from __future__ import annotations

import os
import subprocess
import time

import psycopg
import pytest

from pgpathbench.procs import OsUser
from pgpathbench.servers import binaries
from pgpathbench.servers.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fetched(workspace_root):
    # The workspace under the repository (see conftest): the server user must reach the bundle.
    started = time.monotonic()
    bins = binaries.resolve(17, workspace=workspace_root)
    seconds = time.monotonic() - started
    size = sum(f.stat().st_size for f in bins.bindir.parent.rglob("*") if f.is_file() and not f.is_symlink())
    print(f"\nPostgreSQL 17 bundle: first resolve {seconds:.2f} s, {size / 1e6:.1f} MB at {bins.bindir.parent}")
    return bins


@pytest.fixture(scope="module")
def pg17(fetched, workspace_root):
    c = Cluster("pg17", workspace_root / "pg17", fetched, OsUser.for_servers())
    c.start()
    yield c
    c.remove()


def test_bundle_layout(fetched, workspace_root):
    bundle = binaries.BUNDLES[17]
    assert fetched.major == 17 and fetched.bindir == workspace_root / "binaries" / bundle.version / "bin"
    assert fetched.version() == f"postgres (PostgreSQL) {bundle.server_version}"
    assert fetched.path("pgbench") == binaries.DEBIAN_CLIENT_BINDIR / "pgbench"
    assert "(PostgreSQL) 15." in fetched.version("pgbench")
    assert fetched.has_extension("postgres_fdw") and fetched.has_extension("file_fdw")
    fetched.require(*binaries.SERVER_TOOLS, *binaries.CLIENT_TOOLS, option="--pg")


def test_second_resolve_reuses_the_bundle_without_maven(fetched, workspace_root, monkeypatch):
    marker = fetched.bindir.parent / binaries.MARKER
    before = marker.stat().st_mtime_ns
    monkeypatch.setattr(binaries, "MVN", "/nonexistent/mvn")  # any Maven call would now fail
    started = time.monotonic()
    again = binaries.resolve(17, workspace=workspace_root)
    seconds = time.monotonic() - started
    print(f"\nPostgreSQL 17 bundle: second resolve {seconds * 1000:.2f} ms")
    assert again == fetched and seconds < 1
    assert marker.stat().st_mtime_ns == before


def test_server_17_with_postgres_fdw(pg17):
    with pg17.connect() as conn:
        version = conn.execute("SELECT version()").fetchone()[0]
        assert version.startswith("PostgreSQL 17."), version
        assert conn.execute("SHOW server_version_num").fetchone()[0].startswith("17")
        conn.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
        # analyze_sampling is a PostgreSQL 16+ postgres_fdw option (15 says "invalid option")
        conn.execute("CREATE SERVER loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
                     f"(host '127.0.0.1', port '{pg17.port}', dbname 'postgres', analyze_sampling 'system')")
        opts = conn.execute("SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'loop'").fetchone()[0]
        assert "analyze_sampling=system" in opts
        with pytest.raises(psycopg.errors.Error):
            conn.execute("ALTER SERVER loop OPTIONS (SET analyze_sampling 'bogus')")
        conn.execute("CREATE EXTENSION IF NOT EXISTS file_fdw")


def test_debian_pgbench_15_against_server_17(pg17):
    pgbench = pg17.bins.path("pgbench")
    env = {**os.environ, "PGPASSWORD": pg17.password}
    conn = ["-h", "127.0.0.1", "-p", str(pg17.port), "-U", "pgpathbench", "postgres"]
    init = subprocess.run([str(pgbench), "-i", "-s", "1", "-q", *conn], capture_output=True, text=True,
                          env=env, timeout=300)
    assert init.returncode == 0, init.stderr
    run = subprocess.run([str(pgbench), "-S", "-T", "1", "-n", *conn], capture_output=True, text=True,
                         env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "number of transactions actually processed" in run.stdout
    tps = float(run.stdout.split("tps = ")[1].split()[0])
    assert tps > 10
    # and through postgres_fdw, whose libpq 17 comes from the bundle's lib/
    with pg17.connect() as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
        c.execute("CREATE SERVER IF NOT EXISTS self FOREIGN DATA WRAPPER postgres_fdw OPTIONS "
                  f"(host '127.0.0.1', port '{pg17.port}', dbname 'postgres', analyze_sampling 'system')")
        c.execute("CREATE USER MAPPING IF NOT EXISTS FOR CURRENT_USER SERVER self "
                  f"OPTIONS (user 'pgpathbench', password '{pg17.password}')")
        c.execute("CREATE FOREIGN TABLE IF NOT EXISTS remote_accounts (aid int, bid int, abalance int, "
                  "filler char(84)) SERVER self OPTIONS (table_name 'pgbench_accounts')")
        c.execute("ANALYZE remote_accounts")
        assert c.execute("SELECT count(*) FROM remote_accounts").fetchone()[0] == 100_000
