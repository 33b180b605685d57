"""The X.509 of a run's TLS (tls.Authority keeps the files): a CA, and the server certificates it
signs, as PEM bytes. Apart from tls.py so that only a process that makes certificates imports
`cryptography`: about 0.17 s of CPU, a fifth of the CLI's imports, that every pgpathbench process
paid at its start before.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 30


def new_ca() -> tuple[bytes, bytes]:
    """A CA's key and self-signed certificate (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    # A name of its own: verification looks an issuer up by name, so another CA by the same name
    # would fail only at its signature (OpenSSL's obscure "EVP lib"), not as an unknown issuer.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"pgpathbench run CA {secrets.token_hex(6)}")])
    cert = (_builder(name, name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256()))
    return _key_pem(key), cert.public_bytes(serialization.Encoding.PEM)


def issue(ca_key_pem: bytes, ca_cert_pem: bytes, name: str, hosts: tuple[str, ...]) -> tuple[bytes, bytes]:
    """A server certificate for `name`, valid for `hosts` (addresses or names), signed by the CA:
    its key and certificate (PEM)."""
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), ca_cert.subject, key.public_key())
            .add_extension(x509.SubjectAlternativeName([_alt_name(h) for h in hosts]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return _key_pem(key), cert.public_bytes(serialization.Encoding.PEM)


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
