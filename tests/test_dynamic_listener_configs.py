"""KIP-226's certificate rotation on a real broker: a TLS listener's keystore replaced
with confluent-kafka's AdminClient (IncrementalAlterConfigs on the broker's own
``listener.name.ssl.ssl.keystore.*``). New TLS connections get the new certificate, a
producer connected before keeps producing; a keystore whose key does not match its
certificate, or whose certificate names another subject, is refused with INVALID_CONFIG
and the old one stays. The key password is stored encrypted with the static
``password.encoder.secret`` and DescribeConfigs shows it as sensitive, without a value.
KIP-612's ``listener.name.<l>.max.connection.creation.rate`` set the same way slows a
burst of connections down to the limit, counted by the socket-server metrics."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from cryptography import x509

from broker.zk.znodes import ConfigEntityZNode
from quill_stack import ports, tls
from tests.metrics_helpers import value, wait_value
from tests.wait_helpers import wait_until

pytestmark = pytest.mark.cluster

TOPIC = "rotated-records"
KEY_PASSWORD = "keystore-secret"
NEW_KEY_PASSWORD = "rotated-secret"
HOSTS = ("localhost", "127.0.0.1")
PREFIX = "listener.name.ssl."
BROKER = ConfigResource.Type.BROKER


def _issue_with_ca(pki_dir, sub: str, name: str, key_password: str) -> tls.Issued:
    """A certificate from the same CA, in a directory of its own (same file names)."""
    target = pki_dir / sub
    target.mkdir()
    for ca_file in ("ca.key", "ca.crt"):
        shutil.copy(pki_dir / ca_file, target / ca_file)
    return tls.issue(target, name, HOSTS, key_password=key_password)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki_dir = tmp_path_factory.mktemp("rotation-pki")
    first = tls.issue(pki_dir, "broker", HOSTS, key_password=KEY_PASSWORD)
    rotated = _issue_with_ca(pki_dir, "rotated", "broker", NEW_KEY_PASSWORD)
    other = _issue_with_ca(pki_dir, "other", "intruder", NEW_KEY_PASSWORD)
    mismatched = pki_dir / "mismatched.pem"  # the first key with the rotated certificate
    mismatched.write_bytes(first.key.read_bytes() + rotated.cert.read_bytes())
    return SimpleNamespace(
        ca_file=pki_dir / "ca.crt",
        first=first,
        rotated=rotated,
        other=other,
        mismatched=mismatched,
    )


@pytest.fixture(scope="module")
def cluster(cluster_factory, pki):
    (ssl_port,) = ports.free_ports(1)
    listeners = lambda _b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}"
    )
    cluster = cluster_factory(
        1,
        **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.first.keystore),
            "ssl.key.password": KEY_PASSWORD,
            "password.encoder.secret": "encoder-secret",
            "offsets.topic.replication.factor": "1",
            "quill.metrics.port": "free",
            "quota.window.num": "2",  # rates over 1-2 s, so a burst measures as one
        },
    )
    cluster.ssl_port = ssl_port
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    cluster.admin = admin
    return cluster


def _serial(cluster, pki) -> int:
    """The serial of the certificate a new TLS connection is shown."""
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    with socket.create_connection(("127.0.0.1", cluster.ssl_port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as conn:
            return x509.load_der_x509_certificate(conn.getpeercert(binary_form=True)).serial_number


def _alter(cluster, ops: dict, op=AlterConfigOpType.SET) -> None:
    res = ConfigResource(
        BROKER,
        "1",
        incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v in ops.items()],
    )
    cluster.admin.incremental_alter_configs([res])[res].result(30)


def _set_keystore(cluster, location, password: str) -> None:
    _alter(
        cluster,
        {PREFIX + "ssl.keystore.location": str(location), PREFIX + "ssl.key.password": password},
    )


def _produce(producer: Producer, value: bytes) -> None:
    errors = []
    producer.produce(TOPIC, value, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(30) == 0
    assert errors == [None]


def _ssl_producer(cluster, pki) -> Producer:
    return Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{cluster.ssl_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca_file),
            "linger.ms": 0,
        }
    )


def test_rotation_then_refused_keystores(cluster, pki):
    first = x509.load_pem_x509_certificate(pki.first.cert.read_bytes()).serial_number
    rotated = x509.load_pem_x509_certificate(pki.rotated.cert.read_bytes()).serial_number
    assert _serial(cluster, pki) == first
    old_producer = _ssl_producer(cluster, pki)
    _produce(old_producer, b"before")

    _set_keystore(cluster, pki.rotated.keystore, NEW_KEY_PASSWORD)
    wait_until(lambda: _serial(cluster, pki) == rotated, 60, what="the rotated certificate")
    _produce(old_producer, b"after, same producer")
    _produce(_ssl_producer(cluster, pki), b"after, new producer")

    # the password is stored encrypted, and shown by no one
    data, _ = cluster.zk_client().get(ConfigEntityZNode.path("brokers", "1"))
    stored = json.loads(data)["config"]
    assert stored[PREFIX + "ssl.keystore.location"] == str(pki.rotated.keystore)
    assert NEW_KEY_PASSWORD not in stored[PREFIX + "ssl.key.password"]
    assert "encryptedPassword:" in stored[PREFIX + "ssl.key.password"]
    res = ConfigResource(BROKER, "1")
    described = cluster.admin.describe_configs([res])[res].result(30)
    password = described[PREFIX + "ssl.key.password"]
    assert password.is_sensitive and password.value is None
    assert described[PREFIX + "ssl.keystore.location"].value == str(pki.rotated.keystore)
    assert not described[PREFIX + "ssl.keystore.location"].is_read_only

    for location, message in (
        (pki.mismatched, "Validation of dynamic config update of SSLFactory failed: "),
        (
            pki.other.keystore,
            "Validation of dynamic config update of SSLFactory failed: "
            "Keystore DistinguishedName does not match: existing={DN=CN=broker,O=Quill}, "
            "new={DN=CN=intruder,O=Quill}",
        ),
    ):
        with pytest.raises(KafkaException) as info:
            _set_keystore(
                cluster, location, NEW_KEY_PASSWORD if location != pki.mismatched else KEY_PASSWORD
            )
        err = info.value.args[0]
        assert err.code() == KafkaError.INVALID_CONFIG
        assert err.str().startswith(message), err.str()
    data, _ = cluster.zk_client().get(ConfigEntityZNode.path("brokers", "1"))
    assert json.loads(data)["config"][PREFIX + "ssl.keystore.location"] == str(pki.rotated.keystore)
    assert _serial(cluster, pki) == rotated
    _produce(old_producer, b"still")


def test_restart_keeps_the_rotated_keystore(cluster, pki):
    """The dynamic keystore (its password decoded with the secret) after a restart."""
    rotated = x509.load_pem_x509_certificate(pki.rotated.cert.read_bytes()).serial_number
    cluster.broker(1).restart()
    wait_until(lambda: _try_serial(cluster, pki) == rotated, 60, what="the rotated certificate")


def _try_serial(cluster, pki) -> int | None:
    try:
        return _serial(cluster, pki)
    except OSError:
        return None


CREATED = "kafka_server_socket_server_metrics_connection_creation_total"
ACCEPT_RATE = "kafka_server_socket_server_metrics_connection_accept_rate"
THROTTLE = "kafka_server_socket_server_metrics_connection_accept_throttle_time"
RATE_KEY = "listener.name.plaintext.max.connection.creation.rate"
BURST = 20


def _burst(cluster) -> list[socket.socket]:
    """BURST TCP connections at once to broker 1's PLAINTEXT listener (the kernel's
    backlog holds them until the broker accepts)."""
    port = int(cluster.bootstrap.split(",")[0].rsplit(":", 1)[1])
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(BURST)]


def _accepted_burst(cluster, metrics_port: int) -> float:
    """Open a burst, wait until the broker has accepted every one: the accept rate then."""
    labels = {"listener": "PLAINTEXT", "networkProcessor": "0"}
    before = value(metrics_port, CREATED, **labels)
    conns = _burst(cluster)
    try:
        wait_value(metrics_port, CREATED, lambda n: n >= before + BURST, 120, **labels)
        return value(metrics_port, ACCEPT_RATE, listener="PLAINTEXT")
    finally:
        for conn in conns:
            conn.close()


def test_listener_connection_creation_rate(cluster):
    metrics_port = cluster.broker(1).metrics_port
    with pytest.raises(KafkaException) as info:
        _alter(cluster, {"max.connection.creation.rate": "-1"})
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "Value must be at least 0" in info.value.args[0].str()

    _alter(cluster, {RATE_KEY: "2"})
    res = ConfigResource(BROKER, "1")
    wait_until(
        lambda: cluster.admin.describe_configs([res])[res].result(30)[RATE_KEY].value == "2",
        what="the dynamic rate",
    )
    # every connection of the burst is accepted, none faster than the limit allows: the
    # broker's measured accept rate stays near 2/s (unthrottled, 20 connections at once
    # measure 10/s or more; a slow machine only spreads them out, lowering it). The
    # acceptor's last wait (THROTTLE) is not asserted: on a loaded machine the burst's
    # last connection may come late enough to need none.
    rate = _accepted_burst(cluster, metrics_port)
    assert rate <= 2 * 2.5, rate

    _alter(cluster, {RATE_KEY: ""}, AlterConfigOpType.DELETE)
    wait_until(lambda: RATE_KEY not in cluster.admin.describe_configs([res])[res].result(30))
