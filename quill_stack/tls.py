"""A private CA and broker certificates for the secure stack, with `cryptography`.

Everything lives in one directory (``.state/tls/``), PEM, made once and reused:

- ``ca.key``/``ca.crt``: the stack's CA (what clients trust: ``ssl.ca.location``;
  what brokers trust: ``ssl.truststore.location``);
- ``<name>.pem``: a broker's keystore as Kafka's PEM keystore reads it
  (``ssl.keystore.type=PEM``, ``ssl.keystore.location``): its unencrypted PKCS#8 key,
  then its certificate, then the CA's.

Broker certificates name every address a client may dial (subjectAltName: DNS names and
IP addresses), since clients check the host name against them (librdkafka's default
``ssl.endpoint.identification.algorithm=https``).
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from quill_stack.state import write_private

CA_NAME = "Quill stack CA"
VALID_DAYS = 3650  # a local stack's CA; `rm -rf .state/tls` makes a new one
_PEM = serialization.Encoding.PEM


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Quill"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
    )


def ensure_ca(tls_dir: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """The CA in `tls_dir`, made the first time."""
    key_path, cert_path = tls_dir / "ca.key", tls_dir / "ca.crt"
    if key_path.exists() and cert_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        return key, x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(CA_NAME)
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(key_path, _key_pem(key))
    cert_path.write_bytes(cert.public_bytes(_PEM))
    return key, cert


def _san(hosts: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _covers(cert: x509.Certificate, hosts: list[str]) -> bool:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    have = {str(v) for v in san.get_values_for_type(x509.DNSName)}
    have |= {str(v) for v in san.get_values_for_type(x509.IPAddress)}
    return set(hosts) <= have


def ensure_server_cert(tls_dir: Path, name: str, hosts: list[str]) -> Path:
    """``<tls_dir>/<name>.pem`` (key, certificate, CA) for `hosts`, signed by the CA; made
    again when it is missing or does not name every host."""
    path = tls_dir / f"{name}.pem"
    ca_key, ca_cert = ensure_ca(tls_dir)
    if path.exists():
        current = x509.load_pem_x509_certificate(path.read_bytes())
        if current.issuer == ca_cert.subject and _covers(current, hosts):
            return path
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(_name(name), ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_san(hosts), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    write_private(path, _key_pem(key) + cert.public_bytes(_PEM) + ca_cert.public_bytes(_PEM))
    return path
