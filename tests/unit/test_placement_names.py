"""--place's numbered roles (servers/placement.py): worker=NAME for every worker, workerK=NAME for one."""

from __future__ import annotations

import pytest

from pgpathbench.errors import UserError
from pgpathbench.servers.placement import family, host_of


@pytest.mark.parametrize("role, study, expected", [
    ("worker", "file-fdw-tpch", "worker"), ("worker2", "file-fdw-tpch", "worker"),
    ("worker16", "file-fdw-tpch", "worker"), ("citus_worker3", "file-fdw-tpch", "citus_worker"),
    ("worker0", "file-fdw-tpch", "worker0"), ("workers", "file-fdw-tpch", "workers"),
    ("source2", "fdw-overhead", "source2"), ("worker2", "fdw-overhead", "worker2")])
def test_a_numbered_role_belongs_to_its_family_in_its_study_only(role, study, expected):
    assert family(role, study) == expected


def test_a_number_beyond_the_most_workers_is_refused():
    with pytest.raises(UserError, match="at most 16"):
        family("worker17", "file-fdw-tpch")


@pytest.mark.parametrize("placed, server, expected", [
    ({"worker": "a"}, "worker1", "a"), ({"worker": "a"}, "worker12", "a"),
    ({"worker2": "b"}, "worker1", None), ({"worker2": "b"}, "worker2", "b"),
    ({"worker": "a"}, "citus_worker1", None), ({"source": "a"}, "source", "a"), ({"source": "a"}, "external", None)])
def test_a_server_is_on_the_host_of_its_own_name_or_of_its_family(placed, server, expected):
    assert host_of(placed, server) == expected


def facts(os_release="debian 12", arch="x86_64", free_kb=10 << 20, citus=None):
    from pgpathbench.servers.host_facts import HostFacts
    text = (f"os_release={os_release}\narch={arch}\ndisk_free_kb={free_kb}\n"
            "postgres=/usr/lib/postgresql/15/bin|postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n"
            + (f"citus=/usr/lib/postgresql/15/bin|{citus}\n" if citus else ""))
    return HostFacts.parse(text)


def test_a_host_with_the_coordinators_citus_runs_its_own():
    from pgpathbench.servers.host_facts import citus_refusal, citus_text
    assert citus_text(facts(citus="13.2-1"), "13.2-1") is None
    assert citus_refusal(facts(citus="13.2-1", os_release="rhel 9"), "13.2-1") is None
    assert citus_text(facts(citus="12.1-1"), "13.2-1") == "its PostgreSQL 15 has Citus 12.1-1, the coordinator's 13.2-1"


@pytest.mark.parametrize("kw, said", [({"os_release": "ubuntu 24.04"}, "(it is ubuntu 24.04 x86_64)"),
                                      ({"arch": "aarch64"}, "(it is debian 12 aarch64)"),
                                      ({"free_kb": 1024}, "with 128 MiB free only")])
def test_a_host_without_citus_is_refused_unless_the_tree_can_go_there(kw, said):
    from pgpathbench.servers import citus
    from pgpathbench.servers.host_facts import citus_refusal
    tree = citus.tree_binaries()
    version = citus.extension_version(tree) if tree else "13.2-1"
    why = citus_refusal(facts(**kw), version)
    assert why.startswith("its PostgreSQL 15 has no Citus, and this machine's PostgreSQL 15 with Citus ships to")
    assert said in why and why.endswith("install postgresql-15-citus-13.2 there")
    if tree is not None:   # a Debian 12 x86_64 host with room takes the tree
        assert citus_refusal(facts(), version) is None
