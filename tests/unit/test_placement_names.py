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
