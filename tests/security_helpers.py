"""Shared by the security tests: a CA and certificates (``cryptography``), SCRAM users
written to ZooKeeper as kafka-configs writes them, and broker listener settings.

``Pki(dir)`` makes a CA; ``pki.issue("broker", hosts=[...])`` a server certificate,
``pki.issue("alice", ou="eng")`` a client one; each is a key and a certificate PEM file
plus a combined PEM keystore (key then chain), as Kafka's ``ssl.keystore.type=PEM``
takes it.
"""

from __future__ import annotations

import datetime
import ipaddress
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from broker.security.scram_credentials import ScramCredential
from broker.zk.znodes import ConfigEntityChangeNotificationZNode, ConfigEntityZNode

PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path
    keystore: Path  # key + certificate in one PEM file


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Quill Tests")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _pem_key(key, password: str | None = None) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption(),
    )


class Pki:
    def __init__(self, directory: Path, name: str = "Quill Test CA") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.ca_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self.ca_file = self.dir / f"{name.replace(' ', '-').lower()}.crt"
        self.ca_file.write_bytes(self.ca_pem)

    def issue(
        self,
        cn: str,
        *,
        ou: str | None = None,
        hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
        expired: bool = False,
        key_password: str | None = None,
    ) -> Issued:
        """``key_password``: the key files are encrypted with it (``ssl.key.password``)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        if expired:
            now -= datetime.timedelta(days=40)
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, ou))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        base = self.dir / cn
        paths = Issued(base.with_suffix(".crt"), base.with_suffix(".key"), base.with_suffix(".pem"))
        paths.cert.write_bytes(cert_pem)
        paths.key.write_bytes(_pem_key(key, key_password))
        paths.keystore.write_bytes(_pem_key(key, key_password) + cert_pem)
        return paths


def sasl_listener_cluster(
    cluster_factory, mechanisms: str, plain_users: dict[str, str] | None = None, **config
):
    """One broker with a PLAINTEXT listener (tests' admin path) and a SASL_PLAINTEXT one
    offering ``mechanisms``; PLAIN users from the listener's JAAS config. The cluster
    gains ``sasl_port`` and ``sasl_bootstrap``."""
    from quill_stack import ports

    sasl_port = ports.free_ports(1)[0]
    listeners = lambda _b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    )
    settings = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": mechanisms,
    }
    if plain_users:
        settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = jaas(
            PLAIN_JAAS, **{f"user_{u}": p for u, p in plain_users.items()}
        )
    cluster = cluster_factory(1, **settings, **config)
    cluster.sasl_port = sasl_port
    cluster.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    return cluster


def jaas(module: str, **options: str) -> str:
    """``module required k="v" ...;`` as Kafka's sasl.jaas.config values are written."""
    opts = " ".join(f'{k}="{v}"' for k, v in options.items())
    return f"{module} required {opts};"


def set_scram_user(zk, user: str, password: str, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512")):
    """Write ``/config/users/<user>`` in Kafka's stored form and a change notification,
    as ``kafka-configs --alter --add-config SCRAM-SHA-512=[password=...]`` does."""
    path = ConfigEntityZNode.path("users", user)
    config = {}
    if zk.exists(path):
        config = ConfigEntityZNode.decode(zk.get(path)[0])
    for mechanism in mechanisms:
        config[mechanism] = ScramCredential.from_password(mechanism, password).to_config_value()
    _write_user(zk, user, config)


def delete_scram_user(zk, user: str) -> None:
    _write_user(zk, user, {})


def set_user_quota(zk, user: str, **quotas: int) -> None:
    """``producer_byte_rate=...`` etc. in ``/config/users/<user>``, credentials kept."""
    path = ConfigEntityZNode.path("users", user)
    config = ConfigEntityZNode.decode(zk.get(path)[0]) if zk.exists(path) else {}
    config.update({k: str(v) for k, v in quotas.items()})
    _write_user(zk, user, config)


def _write_user(zk, user: str, config: dict) -> None:
    path = ConfigEntityZNode.path("users", user)
    data = ConfigEntityZNode.encode(config)
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)
    notice = ConfigEntityChangeNotificationZNode
    zk.create(
        f"{notice.path}/{notice.prefix}",
        notice.encode(f"users/{user}"),
        sequence=True,
        makepath=True,
    )


def round_trip(conf: dict, topic: str, values: list[bytes], group: str) -> list[tuple[int, bytes]]:
    """Produce ``values`` with confluent-kafka, consume them back from the start as
    ``group``: their (offset, value) pairs in the order read."""
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and not set(values) <= {v for _, v in got}:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return [(o, v) for o, v in got if v in values]


def first_error(conf: dict, timeout: float = 30.0) -> str:
    """The first error librdkafka reports for a client with ``conf`` (its error_cb)."""
    errors = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not errors:
        producer.poll(0.2)
    assert errors, "no error reported"
    return errors[0].str()
