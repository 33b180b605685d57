"""Where Citus is, as doctor says it, and what clean --all says of it: pgpathbench's own tree
(scripts/install-citus, run by make bootstrap from the vendored files), or none for a PostgreSQL
named by --pg-bindir without it."""

from __future__ import annotations

import json
import shutil

from conftest import pgpathbench
from pgpathbench.servers import citus


def doctor_row(res, name: str) -> str:
    """The row from its name on, its wrapped detail joined (its other columns are blank there)."""
    text = " ".join(res.stdout.split())
    assert f" {name} " in text, res.stdout
    return text[text.index(f" {name} ") + 1:]


def test_doctor_says_where_citus_is_and_its_version(workspace_root):
    facts = citus.tree_facts()
    assert facts, "Citus is not installed: make bootstrap (scripts/install-citus)"
    row = doctor_row(pgpathbench("doctor", "--workspace", str(workspace_root)), "citus")
    assert row.startswith(f"citus ok Citus {facts['citus_extension']} on PostgreSQL {facts['postgresql'][:5]}"), row
    assert str(citus.TREE) in row
    assert json.loads((citus.TREE / "INSTALLED.json").read_text())["postgresql_deb_sha256"]


def test_doctor_says_how_to_get_citus_where_it_is_missing(workspace_root):
    res = pgpathbench("doctor", "--pg-bindir", "/usr/lib/postgresql/15/bin", "--workspace", str(workspace_root))
    row = doctor_row(res, "citus")
    assert row.startswith("citus note not installed (file-fdw-tpch's --layout citus and --storage columnar need "
                          "it): run scripts/install-citus"), row


def test_clean_all_says_how_to_remove_the_tree(workspace_root):
    own = workspace_root.parent / (workspace_root.name + "-clean")   # clean --all keeps the empty directory
    own.mkdir(parents=True)
    try:
        res = pgpathbench("clean", "--all", workspace=own)
    finally:
        shutil.rmtree(own, ignore_errors=True)
    assert res.returncode == 0
    assert f"kept pgpathbench's own PostgreSQL with Citus in {citus.TREE}: scripts/install-citus --remove removes " \
           "it" in " ".join(res.stdout.split())
