"""A major a host lacks, shipped there (issue 47, `--place`): namespace hosts of tests/hosts.py.

PostgreSQL 17 on a host with Debian's 15 only runs from the pinned bundle shipped to the login's
workspace there; a host with no PostgreSQL gets the pinned 15 bundle and measures; one without room
for it is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import subprocess

from pgpathbench.servers.binaries import BUNDLES, HOST_ONLY_BUNDLES
from pgpathbench.servers.host_ledger import HostLedger
from pgpathbench.servers.remote import HostWorkspace, RemoteCluster

import test_place
from conftest import pgpathbench, report_json
from hosts import LOGIN
from test_place import known, opened, ours_on, place_args, sshd_pids

pytestmark = test_place.pytestmark
hosts = test_place.hosts   # its fixture: two hosts of this module's own


def test_a_major_the_host_lacks_is_shipped_there_as_the_pinned_bundle(hosts, workspace_root):
    host, ws = hosts["a"], workspace_root / "place-bundle"
    bundle = BUNDLES[17]
    with opened(host, LOGIN, ws) as conns:
        place = HostWorkspace(conns["a"], "run-bundle", HostLedger(ws))
        cluster = RemoteCluster("pg17_source", place, 17, ws / "s")
        cluster.start(ws)
        try:
            with cluster.connect() as conn:
                assert conn.execute("SHOW server_version").fetchone()[0] == bundle.server_version
            facts = cluster.fingerprint()
            assert facts["binaries"].startswith(f"{bundle.coordinates}, shipped to the host")
            assert facts["bindir"] == f"{place.dir}/postgresql-{bundle.version}/bin"
            shipped = host.dir / "home" / place.dir.removeprefix("/home/") / f"postgresql-{bundle.version}"
            assert (shipped / "bin" / "postgres").is_file()   # on the host's own /home, over SSH
        finally:
            cluster.remove()
            place.remove()
    assert not ours_on(host)


@contextlib.contextmanager
def mounted_on(host, *targets: str, options: str = ""):
    """tmpfs over targets in the host's mount namespace (its sshd's: every session's), for the block."""
    sshd = sshd_pids(host)[0]
    done = []
    try:
        for target in targets:
            subprocess.run(["nsenter", "-t", str(sshd), "-m", "mount", "-t", "tmpfs", *options.split(), "tmpfs",
                            target], check=True)
            done.append(target)
        yield
    finally:
        for target in reversed(done):
            subprocess.run(["nsenter", "-t", str(sshd), "-m", "umount", target], check=True)


def test_a_host_without_15_gets_the_pinned_15_bundle_and_measures(hosts, workspace_root):
    ws = known(hosts, workspace_root / "place-ship15")
    bundle = HOST_ONLY_BUNDLES[15]
    with mounted_on(hosts["b"], "/usr/lib/postgresql"):   # no PostgreSQL on b; a keeps Debian's 15
        res = pgpathbench(*place_args(hosts, LOGIN), workspace=ws, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "pg15_external runs on host b" in res.stderr and bundle.coordinates in res.stderr, res.stderr
    exported = report_json(ws)
    ok = [m for m in exported["measurements"] if m["ok"]]
    assert len(ok) == 2 and all(m["metrics"]["tps"] > 0 for m in ok)
    servers = exported["run"]["environment"]["sessions"][0]["servers"]
    shipped, debian = servers["pg15_external"], servers["pg15_source"]
    assert shipped["binaries"].startswith(f"{bundle.coordinates}, shipped to the host (postgres (PostgreSQL) "
                                          f"{bundle.server_version})"), shipped["binaries"]
    assert f"PostgreSQL {bundle.server_version} " in shipped["version"] and "Debian" not in shipped["version"]
    assert "the host's own /usr/lib/postgresql/15/bin" in debian["binaries"] and "Debian" in debian["version"]
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"])


def test_a_host_that_cannot_run_the_major_is_refused_before_anything_is_written(hosts, workspace_root):
    ws = known(hosts, workspace_root / "place-nopg")
    # no PostgreSQL there, and no room for the 15 bundle in root's workspace (/var/lib/pgpathbench)
    with mounted_on(hosts["b"], "/usr/lib/postgresql", "/var/lib", options="-o size=1m"):
        res = pgpathbench(*place_args(hosts, "root"), workspace=ws)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("pgpathbench: error: --place external=b: PostgreSQL 15 neither installed (found: "
                                 "none) nor shippable (a bundle needs 128 MiB in /var/lib/pgpathbench, which has "
                                 "1 MiB free)"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in ws.iterdir()) == ["known_hosts"]   # nothing written: no results, no run
    assert not ours_on(hosts["a"]) and not ours_on(hosts["b"])
