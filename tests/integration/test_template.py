"""New clusters copied from one pristine initdb per workspace (servers/template.py), or per folder
of templates shared by workspaces (PGPATHBENCH_TEMPLATES: the suite's own): each copy gets its own
password at its first start, and is a cluster like one initdb made."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from pgpathbench.procs import OsUser
from pgpathbench.servers import binaries, template
from pgpathbench.servers.cluster import SUPERUSER, Cluster
from conftest import pgpathbench_main

pytestmark = pytest.mark.integration


@pytest.fixture
def clusters(workspace_root):
    made = []

    def make(name: str, from_template: bool = True) -> Cluster:
        c = Cluster(name, workspace_root / "servers" / name, binaries.resolve(15), OsUser.for_servers(),
                    template=workspace_root / "templates" if from_template else None)
        made.append(c)
        return c.start()
    yield make
    for c in made:
        c.remove()


def _tcp(cluster: Cluster, passfile) -> str:
    with psycopg.connect(cluster.conninfo(transport="tcp"), passfile=str(passfile), connect_timeout=5) as conn:
        return conn.execute("SELECT current_user").fetchone()[0]


def test_copies_have_their_own_passwords(clusters, workspace_root):
    # The session's workspace holds other tests' templates too: b adds none, a's is the one for its key.
    templates = workspace_root / "templates"
    a = clusters("a")
    after_a = set(templates.iterdir())
    b = clusters("b")
    assert set(templates.iterdir()) == after_a    # one initdb for both
    made = templates / template.key(a.bins, a.user, SUPERUSER)
    assert made in after_a
    assert not (made / "data" / "postmaster.pid").exists()   # never started
    assert a.password != b.password
    assert _tcp(a, a.passfile) == _tcp(b, b.passfile) == "pgpathbench"
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        _tcp(a, b.passfile)   # b's password does not open a


def test_a_copy_is_what_initdb_makes(clusters):
    copied, fresh = clusters("copied"), clusters("fresh", from_template=False)
    for c in (copied, fresh):
        assert (c.data / "postgresql.conf").read_text().endswith(template.INCLUDE)
    a, b = copied.fingerprint(), fresh.fingerprint()
    assert a["settings"] == b["settings"] and a["version"] == b["version"] and a["auth"] == b["auth"]
    with copied.connect() as conn:
        assert conn.execute("SELECT pg_encoding_to_char(encoding), datcollate FROM pg_database "
                            "WHERE datname = 'template1'").fetchone() == ("UTF8", "C")


def test_md5_copy_stores_an_md5_hash(clusters):
    scram = clusters("scram")
    c = Cluster("md5", scram.root.parent / "md5", binaries.resolve(15), OsUser.for_servers(), tcp_auth="md5",
                template=scram.template)
    try:
        c.start()
        with c.connect() as conn:
            stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = current_user").fetchone()[0]
        assert stored.startswith("md5") and _tcp(c, c.passfile) == "pgpathbench"
    finally:
        c.remove()


def test_workspaces_naming_a_shared_folder_copy_from_it(workspace_root):
    """The suite's workspaces share the session's templates: a workspace's results cluster is copied
    from there, and the workspace keeps no templates of its own."""
    shared = Path(os.environ["PGPATHBENCH_TEMPLATES"])
    ws = workspace_root / "shared-templates"
    assert pgpathbench_main("runs", workspace=ws).returncode == 0
    made = shared / template.key(binaries.resolve(15), OsUser.for_servers(), SUPERUSER)
    assert (made / "data" / "PG_VERSION").is_file()
    assert not (ws / "templates").exists()
    assert shared.stat().st_mode & 0o777 == 0o711
