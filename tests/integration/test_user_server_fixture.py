"""The user-server fixture (tests/user_server.py) is what issue 12's tests take it for: a server
pgpathbench does not manage, reachable by a non-superuser with its password only, whose log says
who did what where, and which leaves nothing behind."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

import user_lan
from user_lan import Lan
from user_server import Statement, UserServer, expected_fingerprint

from pgpathbench.procs import pid_alive
from pgpathbench.servers.network import available_link_kinds

pytestmark = pytest.mark.integration
TESTS = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def plain(workspace_root):
    with UserServer(workspace_root, "user-plain", pg_stat_statements=True) as s:
        yield s


@pytest.fixture(scope="module")
def tls(workspace_root):
    with UserServer(workspace_root, "user-tls", address="127.0.0.2", ssl=True) as s:
        yield s


def processes_in(path: Path) -> list[str]:
    """Live processes whose command line names path or whose working directory is below it
    (a backend's cwd is its data directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(path) in cmd or cwd.startswith(str(path)):
            found.append(f"{proc.name}: {cmd} (in {cwd})")
    return found


def test_app_connects_over_tcp_with_its_password_only(plain):
    with plain.connect() as c:
        assert c.execute("SELECT current_user, current_database()").fetchone() == ("app", "userdb")
        assert c.execute("SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication FROM pg_roles "
                         "WHERE rolname = 'app'").fetchone() == (False, True, False, False)
        assert c.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(plain.dsn(), password="wrong", connect_timeout=5)
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(plain.dsn(), passfile="/dev/null", connect_timeout=5)
    # The password file, the way a client program of the tool gets it.
    assert oct(plain.pgpass_file.stat().st_mode & 0o777) == "0o600"
    env = {k: v for k, v in os.environ.items() if k != "PGPASSWORD"} | {"PGPASSFILE": str(plain.pgpass_file)}
    res = subprocess.run([str(plain.bins.path("psql")), "-XAtc", "SELECT current_user", plain.dsn()],
                         capture_output=True, text=True, env=env, timeout=30)
    assert res.returncode == 0 and res.stdout.strip() == "app", res.stderr
    assert plain.password() not in " ".join(res.args)


def test_app_creates_a_database_and_uses_postgres_fdw_there_but_no_superuser_thing(plain):
    with plain.connect(dbname="postgres") as c:
        c.execute("CREATE DATABASE pgpathbench_fixture_check")
    try:
        with plain.connect(dbname="pgpathbench_fixture_check") as c:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("CREATE EXTENSION file_fdw")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("SET log_statement = 'none'")     # app cannot hide its statements from the log
            # template1's extension and its grant came along with the copy.
            assert c.execute("SELECT has_foreign_data_wrapper_privilege('postgres_fdw', 'USAGE')").fetchone()[0]
            c.execute(f"CREATE SERVER loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '{plain.address}', "
                      f"port '{plain.port}', dbname 'pgpathbench_fixture_check')")
            c.execute(f"CREATE USER MAPPING FOR app SERVER loop OPTIONS (user 'app', password '{plain.password()}')")
            # ... which log_statement = 'all' (or 'ddl') writes to the server's log, password included.
            assert any(plain.password() in st.text for st in plain.statements_log() if st.user == "app")
            c.execute("CREATE TABLE t AS SELECT generate_series(1, 10) AS i")
            c.execute("CREATE FOREIGN TABLE ft (i int) SERVER loop OPTIONS (table_name 't')")
            assert c.execute("SELECT sum(i) FROM ft").fetchone()[0] == 55
            assert c.execute("SELECT count(*) > 0 FROM pg_stat_statements").fetchone()[0]
    finally:
        with plain.connect(dbname="postgres") as c:    # FORCE: postgres_fdw's own session may linger
            c.execute("DROP DATABASE pgpathbench_fixture_check WITH (FORCE)")
    assert "pgpathbench_fixture_check" not in plain.known_objects()["databases"]


def test_tls_refuses_plain_tcp_and_verifies_the_certificate(tls):
    with pytest.raises(psycopg.OperationalError, match="no encryption"):
        psycopg.connect(f"host={tls.address} port={tls.port} user=app dbname=userdb sslmode=disable",
                        password=tls.password(), connect_timeout=5)
    assert "sslmode=verify-full" in tls.dsn() and tls.root_cert.is_file()
    with tls.connect() as c:
        assert c.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()[0] is True
    with pytest.raises(psycopg.OperationalError, match="certificate"):   # verify-full needs the root
        psycopg.connect(tls.dsn().replace(str(tls.root_cert), "/dev/null"), password=tls.password(),
                        connect_timeout=5)
    assert tls.user_data_fingerprint() == expected_fingerprint()


def test_statements_log_says_who_did_what_where(plain):
    plain.mark_log()
    with plain.connect() as c:
        c.execute("SELECT 'fixture-marker'")
        c.execute("SELECT count(*) FROM public.accounts WHERE id > %s", [500])  # extended protocol
        c.execute("SELECT 1\nAS two_lines")
    with plain.connect(dbname="postgres") as c:
        c.execute("SELECT version()")
        c.execute("CREATE DATABASE pgpathbench_logged")
        c.execute("DROP DATABASE pgpathbench_logged")
    log = plain.statements_log()
    assert Statement("app", "userdb", "SELECT 'fixture-marker'") in log
    assert Statement("app", "userdb", "SELECT count(*) FROM public.accounts WHERE id > $1") in log
    assert Statement("app", "userdb", "SELECT 1\nAS two_lines") in log
    assert Statement("app", "postgres", "CREATE DATABASE pgpathbench_logged") in log
    # Only the read of the user's table is foreign: the rest reads nothing of the user's.
    assert plain.foreign_statements() == [
        Statement("app", "userdb", "SELECT count(*) FROM public.accounts WHERE id > $1")]
    # The set-up's statements are in the whole log, without a password.
    whole = plain.statements_log(since_mark=False)
    assert Statement("dba", "template1", "CREATE EXTENSION postgres_fdw") in whole
    assert not [st for st in whole if st.user == "dba" and (plain.password() in st.text or plain.password("dba") in st.text)]


def test_the_users_data_and_catalog_are_known_and_stable(plain):
    assert plain.user_data_fingerprint() == expected_fingerprint() == plain.user_data_fingerprint()
    before = plain.known_objects()
    assert before["databases"] == ["postgres", "template0", "template1", "userdb"]
    assert {"app", "dba"} <= set(before["roles"])
    assert before["userdb"]["relations"] == ["public.accounts", "public.accounts_pkey"]
    assert "postgres_fdw" in before["template1"]["extensions"] and "postgres_fdw" not in before["userdb"]["extensions"]
    assert plain.known_objects() == before


def test_nothing_remains_after_stop_even_when_the_test_fails(workspace_root):
    server = UserServer(workspace_root, "user-failing", address="127.0.0.3")
    with pytest.raises(RuntimeError, match="the test failed"):
        with server:
            pid = server.pid
            with server.connect() as c:
                c.execute("SELECT 1")
            assert processes_in(server.data) and server.dir.is_dir() and server.sockdir.is_dir()
            raise RuntimeError("the test failed")
    assert not pid_alive(pid) and server.pid is None
    assert processes_in(server.dir) == [] and processes_in(server.sockdir) == []
    assert not server.dir.exists() and not server.sockdir.exists()


def test_the_server_dies_with_the_test_process(workspace_root):
    """A SIGKILLed test process runs no finally: the postmaster still gets its fast shutdown."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from user_server import UserServer\n"
         "s = UserServer(Path(sys.argv[1]), 'user-orphan').start()\n"
         "print(s.pid, s.dir, s.sockdir, flush=True); time.sleep(600)", str(workspace_root)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(TESTS)})
    pid, data_dir, sockdir = child.stdout.readline().split()
    try:
        assert pid_alive(int(pid)) and processes_in(Path(data_dir))
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        deadline = time.monotonic() + 60
        while processes_in(Path(data_dir)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_in(Path(data_dir)) == []
    finally:
        child.kill()
        child.wait()
        for d in (data_dir, sockdir):       # removing them was the dead process's job
            subprocess.run(["rm", "-rf", d])


# -- the test LAN (tests/user_lan.py) -------------------------------------------------------------
needs_netns = pytest.mark.skipif(not available_link_kinds()["netns"].startswith("ok"),
                                 reason="network namespaces need root and ip")
# In one namespace: accept one connection on ADDRESS:5432 and print the peer's address.
ACCEPT = "import socket, sys; s = socket.create_server((sys.argv[1], 5432)); c, peer = s.accept(); print(peer[0])"


def _ours(tag: str) -> str:
    """Namespaces and links of this machine (root namespace) whose names hold the LAN's tag."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout + \
        subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return " ".join(w for w in names.split() if tag in w)


def _connect_from(netns: str | None, address: str) -> None:
    inside = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run([*inside, sys.executable, "-c", "import socket, sys, time\nfor _ in range(50):\n try:\n"
                    "  socket.create_connection((sys.argv[1], 5432), 1).close(); break\n except OSError:\n"
                    "  time.sleep(0.1)", address], check=True, timeout=30)


@needs_netns
def test_lan_hosts_reach_each_other_without_forwarding_and_leave_nothing(workspace_root):
    forward = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    with Lan(workspace_root / "lan-check", ("a", "b")) as lan:
        a, b = lan.hosts["a"], lan.hosts["b"]
        tag = a.netns.removesuffix("-a")
        assert json.loads(lan.state.read_text())[0] == {"kind": "netns", "name": f"{tag}-lan"}
        for source, peer in ((b.netns, b.address), (None, lan.root_address)):   # host b, then this namespace
            server = subprocess.Popen(["ip", "netns", "exec", a.netns, sys.executable, "-c", ACCEPT, a.address],
                                      stdout=subprocess.PIPE, text=True)
            try:
                _connect_from(source, a.address)
                assert server.communicate(timeout=30)[0].strip() == peer
            finally:
                server.kill()
                server.wait()
        route = subprocess.run(["ip", "-n", b.netns, "route", "get", a.address], capture_output=True, text=True)
        assert f"dev {b.interface}" in route.stdout and " via " not in route.stdout    # same link: no router
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == forward
    assert _ours(tag) == "" and not lan.state.exists()


@needs_netns
def test_a_half_made_lan_is_removed_and_another_namespace_is_never_ours(workspace_root, monkeypatch):
    """Host b's namespace name is taken (as a concurrent suite could, in theory): the start fails
    there; what it had made is removed, the other's namespace kept."""
    pick, fixed = user_lan._free_tag_and_subnet, secrets.token_hex(2)
    tag = user_lan.PREFIX + fixed
    monkeypatch.setattr(user_lan, "_free_tag_and_subnet", lambda: (fixed, pick()[1]))   # X still free, under the lock
    subprocess.run(["ip", "netns", "add", f"{tag}-b"], check=True)
    try:
        lan = Lan(workspace_root / "lan-half", ("a", "b"))
        with pytest.raises(RuntimeError, match=f"network namespace {tag}-b exists already"):
            lan.start()
        assert set(lan.hosts) == {"a"}, "the LAN, this namespace's end and host a were made"
        assert _ours(tag) == f"{tag}-b" and not lan.state.exists()
    finally:
        subprocess.run(["ip", "netns", "del", f"{tag}-b"])
