"""The JDBC client and a user server's DSN: pgjdbc takes only some of libpq's keywords, so a DSN with
another is refused before anything is written (clients.check_jdbc_dsns, the studies' check_user_servers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pgpathbench.tools import clients
from pgpathbench.errors import UserError
from pgpathbench.servers.user import parse_server
from pgpathbench.studies import STUDIES
from pgpathbench.matrix import StudyOptions

STUDY = STUDIES["interfaces"]


def options(**dims) -> StudyOptions:
    return StudyOptions(STUDY.name, "standard", 3, {}, {**STUDY.default_dims, **dims})


JDBC_SOURCE = Path(__file__).resolve().parents[2] / "clients/jdbc/src/main/java/pgpathbench/clients/PgpbJdbc.java"


def test_jdbc_keywords_are_the_java_clients_mapping():
    """clients.JDBC_CONNINFO_KEYWORDS is what PgpbJdbc.buildUrl() takes: m.remove("host") and the rest,
    and the `names` table; a keyword added on one side only fails here."""
    body = JDBC_SOURCE.read_text().split("static void buildUrl()", 1)[1].split("\n    }\n", 1)[0]
    taken = set(re.findall(r'm\.remove\("(\w+)"\)', body)) | set(re.findall(r'\{"(\w+)", "\w+"\}', body))
    assert taken == clients.JDBC_CONNINFO_KEYWORDS


@pytest.mark.parametrize("study, option", [("interfaces", "--interface"), ("interfaces-fidelity", "--tool")])
def test_a_dsn_the_jdbc_client_cannot_use_is_refused_when_jdbc_runs(study, option):
    study = STUDIES[study]
    opts = StudyOptions(study.name, "quick", 1, {"servers": {"local": "host=db1 dbname=app"}}, study.default_dims)
    good = {"local": parse_server("local=host=db1 port=5433 user=u dbname=app sslmode=verify-full sslrootcert=ca.crt "
                                  "connect_timeout=5 application_name=x options='-c work_mem=64MB' password=pw")}
    study.check_user_servers(opts, {}, good)
    bad = {"local": parse_server("local=postgresql://u@db1/app?sslcert=c.pem&sslkey=k.pem&sslmode=require")}
    message = f"--server local: the jdbc client cannot connect by this DSN: pgjdbc has no equivalent of sslcert, " \
              f"sslkey here; give {option} without jdbc, or a DSN without sslcert, sslkey"
    with pytest.raises(UserError, match=f"^{re.escape(message)}$"):
        study.check_user_servers(opts, {}, bad)
    dim = "interface" if study.name == "interfaces" else "tool"
    without = StudyOptions(study.name, "quick", 1, opts.params,
                           {**study.default_dims, dim: tuple(t for t in study.default_dims[dim] if t != "jdbc")})
    study.check_user_servers(without, {}, bad)          # no jdbc: nothing to refuse


def test_only_the_roles_jdbc_connects_to_are_checked():
    bad = {"remote": parse_server("remote=host=db2 hostaddr=10.0.0.2 dbname=app")}
    with pytest.raises(UserError, match="^--server remote: .* of hostaddr here; give --interface without jdbc"):
        STUDY.check_user_servers(options(), {}, bad)
    STUDY.check_user_servers(options(transport=("unix", "tcp")), {}, bad)       # jdbc never goes remote
    local_socket = {"local": parse_server("local=host=/var/run/postgresql target_session_attrs=any dbname=app")}
    STUDY.check_user_servers(options(transport=("unix", "remote")), {}, local_socket)   # jdbc has no unix
