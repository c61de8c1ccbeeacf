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

``issue`` makes a new certificate each call (the tests' client and broker certificates:
an ``OU`` for ``ssl.principal.mapping.rules`` to see, an encrypted key for
``ssl.key.password``, an expired one), as separate ``.crt``/``.key`` files and the
``.pem`` keystore.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from quill_stack.state import write_private

CA_NAME = "Quill stack CA"
VALID_DAYS = 3650  # a local stack's CA; `rm -rf .state/tls` makes a new one
_PEM = serialization.Encoding.PEM


@dataclass(frozen=True)
class Issued:
    """What ``issue`` wrote: the certificate, its key, and both (with the CA) as a PEM
    keystore."""

    cert: Path
    key: Path
    keystore: Path


def _name(common_name: str, ou: str | None = None) -> x509.Name:
    """``CN=<name>[,OU=<ou>],O=Quill`` as Kafka prints a DN (RFC 4514)."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Quill")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, encryption)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key, expired: bool = False
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)
    if expired:  # ended yesterday
        start, end = now - datetime.timedelta(days=30), now - datetime.timedelta(days=1)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
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
    key, cert = _signed(ca_key, ca_cert, _name(name), hosts)
    write_private(path, _key_pem(key) + cert.public_bytes(_PEM) + ca_cert.public_bytes(_PEM))
    return path


def _signed(
    ca_key, ca_cert: x509.Certificate, subject: x509.Name, hosts: list[str], expired: bool = False
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new key and its certificate for `subject`, signed by the CA, good for servers
    and clients alike; `hosts` (if any) are its subjectAltName."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _builder(subject, ca_cert.subject, key.public_key(), expired).add_extension(
        x509.BasicConstraints(ca=False, path_length=None), critical=True
    )
    if hosts:
        builder = builder.add_extension(_san(hosts), critical=False)
    cert = (
        builder.add_extension(
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
    return key, cert


def issue(
    tls_dir: Path,
    name: str,
    hosts: tuple[str, ...] = (),
    *,
    ou: str | None = None,
    key_password: str | None = None,
    expired: bool = False,
) -> Issued:
    """A new certificate ``CN=<name>[,OU=<ou>],O=Quill`` signed by the CA of `tls_dir`
    (made if missing): ``<name>.crt``, ``<name>.key`` (encrypted with `key_password`,
    Kafka's ``ssl.key.password``) and ``<name>.pem`` (key, certificate, CA)."""
    ca_key, ca_cert = ensure_ca(tls_dir)
    key, cert = _signed(ca_key, ca_cert, _name(name, ou), list(hosts), expired)
    issued = Issued(*(tls_dir / f"{name}.{ext}" for ext in ("crt", "key", "pem")))
    key_pem, cert_pem = _key_pem(key, key_password), cert.public_bytes(_PEM)
    issued.cert.write_bytes(cert_pem)
    write_private(issued.key, key_pem)
    write_private(issued.keystore, key_pem + cert_pem + ca_cert.public_bytes(_PEM))
    return issued
