"""servers/tls.py without a server: the certificates it issues, the client options, and the server
log lines it reads (as PostgreSQL 15 writes them with log_connections)."""

from __future__ import annotations

import ipaddress
import subprocess
import sys

import pytest
from cryptography import x509

from pgpathbench.procs import OsUser
from pgpathbench.servers import tls

LOG = """\
2026-11-28 02:11:40.101 UTC [101] LOG:  connection received: host=127.0.0.1 port=50432
2026-11-28 02:11:40.105 UTC [101] LOG:  connection authorized: user=pgpathbench database=iftest application_name=pgpb_libpq SSL enabled (protocol=TLSv1.3, cipher=TLS_AES_256_GCM_SHA384, bits=256)
2026-11-28 02:11:40.201 UTC [102] LOG:  connection authorized: user=pgpathbench database=postgres
2026-11-28 02:11:40.301 UTC [103] LOG:  connection authorized: user=pgpathbench database=iftest
2026-11-28 02:11:40.401 UTC [104] LOG:  connection authorized: user=pgpathbench database=source application_name=postgres_fdw SSL enabled (protocol=TLSv1.2, cipher=ECDHE-ECDSA-AES256-GCM-SHA384, bits=256)
2026-11-28 02:11:40.501 UTC [105] LOG:  connection authorized: user=pgpathbench database=source application_name=my app
"""


def test_a_certificate_names_what_clients_reach_and_chains_to_its_ca(tmp_path):
    ca = tls.Authority(tmp_path / "tls", OsUser.for_servers())
    files = ca.issue("pg15_remote", ("10.201.3.2",))
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"),
                                                         ipaddress.ip_address("10.201.3.2")]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    root = x509.load_pem_x509_certificate(ca.root_cert.read_bytes())
    cert.verify_directly_issued_by(root)          # raises when another key signed it
    assert files.key.stat().st_mode & 0o777 == 0o600 and (tmp_path / "tls" / "ca.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "tls").stat().st_mode & 0o777 == 0o700
    # a second certificate comes from the same CA; another directory is another CA, by another name
    again = x509.load_pem_x509_certificate(ca.issue("pg15_local", ()).cert.read_bytes())
    again.verify_directly_issued_by(root)
    other = tls.Authority(tmp_path / "other", OsUser.for_servers())
    other.issue("x", ())
    assert x509.load_pem_x509_certificate(other.root_cert.read_bytes()).subject != root.subject
    with pytest.raises(ValueError):   # not its issuer
        again.verify_directly_issued_by(x509.load_pem_x509_certificate(other.root_cert.read_bytes()))


def test_client_options_verify_the_server_or_refuse_tls(tmp_path):
    ca = tmp_path / "ca.crt"
    assert tls.client_options("on", ca) == {"sslmode": "verify-full", "sslrootcert": str(ca)}
    assert tls.client_options("off", ca) == {"sslmode": "disable"}
    assert tls.conninfo("host=127.0.0.1 port=5", "on", ca) == f"host=127.0.0.1 port=5 sslmode=verify-full sslrootcert={ca}"
    assert tls.server_settings(None) == {"ssl": "off"}
    assert tls.server_settings(tls.ServerFiles(ca, ca))["ssl"] == "on"


def test_connections_are_read_from_the_log_since_an_offset(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(LOG)
    assert tls.connections_seen(log, 0, "iftest") == ["TLSv1.3 TLS_AES_256_GCM_SHA384 256", "off"]
    assert tls.connections_seen(log, 0, "source", "postgres_fdw") == ["TLSv1.2 ECDHE-ECDSA-AES256-GCM-SHA384 256"]
    assert tls.connections_seen(log, 0, "source", "my app") == ["off"]
    assert tls.connections_seen(log, LOG.index("[103]"), "iftest") == ["off"]
    assert tls.log_offset(log) == len(LOG.encode()) and tls.log_offset(tmp_path / "none") == 0


@pytest.mark.parametrize("seen, value, message", [
    (["TLSv1.3 A 256", "off"], "on", "1 of 2 connections of x were not encrypted, with tls on"),
    (["TLSv1.3 A 256"], "off", "1 of 1 connections of x were encrypted, with tls off"),
    ([], "on", "the server logged no connection of x"),
])
def test_a_connection_that_is_not_the_cases_is_refused(seen, value, message):
    with pytest.raises(ValueError, match=message):
        tls.check_seen(seen, value, "x")


def test_the_negotiated_tls_is_one_value_per_kind():
    assert tls.check_seen(["TLSv1.3 A 256", "TLSv1.3 A 256"], "on", "x") == "TLSv1.3 A 256"
    assert tls.check_seen(["off", "off"], "off", "x") == "off"


def test_a_pgpathbench_process_imports_cryptography_only_to_make_certificates():
    """certificates.py holds every use of cryptography: importing it cost each pgpathbench process
    about 0.17 s of CPU at its start, a fifth of the CLI's imports, TLS cases or not."""
    probe = "import sys, pgpathbench.cli; print(sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography'))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
