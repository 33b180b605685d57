"""What a run killed before its servers' data was made leaves, and clear_leftovers() removes."""

from __future__ import annotations

import os

from pgpathbench.procs import OsUser
from pgpathbench.servers.cluster import socket_dir
from pgpathbench.servers.topology import Servers
from pgpathbench.workspace import Workspace


def test_a_socket_directory_in_tmp_goes_with_a_server_killed_in_its_initdb(tmp_path):
    """A long workspace path puts a server's sockets in /tmp (sun_path is 108 bytes); a run killed
    while initdb made the server's data (data.initdb, no data yet) still has that directory removed."""
    ws = Workspace(tmp_path / ("a-long-workspace-path-" * 3), OsUser("me", os.getuid(), os.getgid()))
    servers = Servers(ws, "20261129-160000-abcd", bins=None)
    (servers.root / "pg15_source" / "data.initdb").mkdir(parents=True)
    (servers.root / "pooler").mkdir()
    sockets = [socket_dir(servers.root / name) for name in ("pg15_source", "pooler")]
    assert all(str(s).startswith("/tmp/pgpb-") for s in sockets), sockets
    for s in sockets:
        s.mkdir()
    try:
        said = servers.clear_leftovers()
        assert said == [f"removed {servers.root}"]
        assert not any(s.exists() for s in sockets), "a socket directory in /tmp left"
    finally:
        for s in sockets:
            if s.exists():
                s.rmdir()
