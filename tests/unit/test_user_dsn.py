"""--server ROLE=DSN and --fdw-host as parsed and kept: the password never in what is shown or stored."""

from __future__ import annotations

import os

import pytest

from pgpathbench import clientenv
from pgpathbench.errors import UserError
from pgpathbench.servers.network import Link
from pgpathbench.servers.user import (UserServer, from_stored, parse_fdw_hosts, parse_server, parse_servers,
                                      passwords_given, stored)
from pgpathbench.servers.ledger import Ledger

ROLES = {"source": None, "external": None}


def test_the_password_is_taken_out_of_the_dsn(monkeypatch):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    dsn = parse_server("source=host=db1 port=5433 user=app dbname=app password=s3cret sslmode=require", ROLES)
    assert dsn.password == "s3cret" and "s3cret" not in dsn.shown and "s3cret" not in repr(dsn)
    assert (dsn.host, dsn.port, dsn.dbname) == ("db1", 5433, "app") and "sslmode=require" in dsn.shown
    uri = parse_server("external=postgresql://app:pw2@db2:6000/app?sslmode=verify-full", ROLES)
    assert uri.password == "pw2" and (uri.host, uri.port) == ("db2", 6000) and "pw2" not in uri.shown
    assert passwords_given(["source=host=db1 password=x", "external=host=db2"]) == ["source"]


def test_pgpassword_is_the_password_when_the_dsn_has_none(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "from-env")
    assert parse_server("source=host=db1", ROLES).password == "from-env"


@pytest.mark.parametrize("given, message", [
    (["nodsn"], "--server: give ROLE=DSN"),
    (["worker=host=x"], "--server worker: not a role of this study"),
    (["source=host=x secret\"pw"], "--server source: not a libpq connection string"),
    (["source=host=a", "source=host=b"], "--server source: given twice"),
])
def test_bad_servers_are_one_line_that_never_repeats_the_dsn(given, message):
    with pytest.raises(UserError) as e:
        parse_servers(given, ROLES)
    assert str(e.value).startswith(message) and "secret" not in str(e.value)


def test_fdw_host_is_where_postgres_fdw_reaches_a_user_server(tmp_path):
    dsns = parse_fdw_hosts(["source=10.0.0.5:6432"], parse_servers(["source=host=db1 port=5433"], ROLES))
    server = UserServer(dsns["source"], "20261122-101010-ab12", tmp_path, Ledger(tmp_path))
    direct = Link("pg15_source_0ms", "direct (loopback)", "db1", 5433, upstream="db1:5433")
    proxied = Link("pg15_source_5ms", "proxy (loopback)", "127.0.0.1", 41000, 5, upstream="db1:5433")
    assert server.reached_at(direct) == ("10.0.0.5", 6432) and server.self_host == "10.0.0.5"
    assert server.reached_at(proxied) == ("127.0.0.1", 41000)   # the link is on this machine: its own address
    assert server.dbname("source") == "pgpathbench_ab12_source"
    plain = parse_servers(["source=host=db1 port=5433"], ROLES)
    assert parse_fdw_hosts(["source=10.0.0.5"], plain)["source"].fdw_address == ("10.0.0.5", 5433)
    with pytest.raises(UserError, match="--fdw-host external: give --server external=DSN too"):
        parse_fdw_hosts(["external=10.0.0.6"], dsns)


def test_a_run_stores_its_servers_without_passwords_and_resume_reads_them_back(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "later")
    dsns = parse_fdw_hosts(["source=10.0.0.5:6432"], parse_servers(["source=host=db1 password=first"], ROLES))
    kept = stored(dsns)
    assert "first" not in str(kept) and kept["fdw_hosts"] == {"source": "10.0.0.5:6432"}
    back = from_stored(kept)["source"]
    assert back.password == "later" and back.fdw_address == ("10.0.0.5", 6432) and back.shown == dsns["source"].shown


def test_the_users_libpq_environment_completes_a_dsn_and_is_recorded_by_name(monkeypatch):
    """Where, who and how from the environment (the DSN's own parameters win); the password and the
    password file apart; what would change the sessions never taken into the DSN."""
    env = {"PGHOST": "db9", "PGPORT": "6000", "PGPASSWORD": "pw-env", "PGPASSFILE": "/x/pgpass",
           "PGSSLMODE": "verify-full", "PGSSLROOTCERT": "/x/ca.crt", "PGOPTIONS": "-c work_mem=64kB",
           "PGAPPNAME": "mine"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    dsn = parse_server("source=host=db1 user=app dbname=app", ROLES)
    assert dict(dsn.params) == {"host": "db1", "user": "app", "dbname": "app", "port": "6000",
                                "sslmode": "verify-full", "sslrootcert": "/x/ca.crt"}
    assert (dsn.password, dsn.passfile) == ("pw-env", "/x/pgpass") and "pw-env" not in dsn.shown + repr(dsn)
    assert dsn.from_env == ("PGPORT", "PGPASSWORD", "PGPASSFILE", "PGSSLMODE", "PGSSLROOTCERT")
    assert clientenv.ignored(dsn.from_env) == ["PGAPPNAME", "PGHOST", "PGOPTIONS"]
    with pytest.raises(UserError, match="^--server source: PGOPTIONS is set in the environment and it would change "
                                        "the sessions measured there; give session settings by --set; .* unset "
                                        "PGOPTIONS$"):
        clientenv.refuse_for_user_servers("--server source")


def test_programs_and_this_process_run_without_the_users_variables(monkeypatch):
    """child_env() for every program started; isolated() for libpq in this process, given back after."""
    kept = {"PATH": "/bin", "PGPATHBENCH_HOME": "/ws", "PGPB_ODBC_DRIVER": "/d.so"}
    users = {"PGPASSWORD": "x", "PGSERVICE": "nosuch", "PSQLRC": "/x", "JAVA_TOOL_OPTIONS": "-Xmx1m",
             "ODBCSYSINI": "/nonexistent", "LD_PRELOAD": "/x.so"}
    for name, value in {**kept, **users}.items():
        monkeypatch.setenv(name, value)
    env = clientenv.child_env(PGPASSFILE="/ours")
    assert {k: env.get(k) for k in kept} == kept and env["PGPASSFILE"] == "/ours" and not set(users) & set(env)
    with clientenv.isolated():
        assert not set(users) & set(os.environ) and dict(clientenv.users()) == users
        assert parse_server("source=host=db1", ROLES).password == "x"   # what the user set, for user servers
    assert {k: os.environ[k] for k in users} == users and clientenv.users() == users
