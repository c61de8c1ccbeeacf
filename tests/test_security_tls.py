"""TLS on a real broker: an SSL listener that requires client certificates (the
principal is the certificate's DN through ``ssl.principal.mapping.rules``) and a
SASL_SSL listener with SCRAM-SHA-256/512, beside the PLAINTEXT one. confluent-kafka
produces and consumes over both; untrusted, expired and missing client certificates and
plaintext on the TLS port are refused with the broker serving everyone else; user quotas
throttle the authenticated principal and no one else."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from quill_stack import ports, tls
from tests.quota_helpers import Throttles
from tests.security_helpers import first_error, round_trip, set_scram_user, set_user_quota
from tests.wait_helpers import wait_log
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

TOPIC = "tls-records"
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
# "CN=alice,OU=eng,O=Quill" -> "alice"; other DNs stay whole
RULES = "RULE:^CN=([^,]+),OU=eng,O=Quill$/$1/L,DEFAULT"
QUOTA = 100_000  # bytes/s
KEY_PASSWORD = "keystore-secret"
BROKER_HOSTS = ("localhost", "127.0.0.1")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """The stack's CA code (quill_stack/tls.py) makes the certificates; the stranger's
    CA is another one."""
    pki_dir = tmp_path_factory.mktemp("pki")
    return SimpleNamespace(
        dir=pki_dir,
        ca_file=pki_dir / "ca.crt",
        broker=tls.issue(pki_dir, "broker", BROKER_HOSTS, key_password=KEY_PASSWORD),
        alice=tls.issue(pki_dir, "Alice", ou="eng"),
        bob=tls.issue(pki_dir, "bob", ou="ops"),
        expired=tls.issue(pki_dir, "old", ou="eng", expired=True),
        stranger=tls.issue(pki_dir / "other", "alice", ou="eng"),
    )


@pytest.fixture(scope="module")
def tls_cluster(cluster_factory, pki):
    ssl_port, sasl_ssl_port, requested_port = ports.free_ports(3)
    listeners = lambda _b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},"
        f"SASL_SSL://127.0.0.1:{sasl_ssl_port},REQUESTED://127.0.0.1:{requested_port}"
    )
    cluster = cluster_factory(
        1,
        **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.broker.keystore),
            "ssl.key.password": KEY_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca_file),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,REQUESTED:SSL"
            ),
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.requested.ssl.client.auth": "requested",
            "ssl.principal.mapping.rules": RULES,
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "auto.create.topics.enable": "false",
        },
    )
    cluster.ssl_bootstrap = f"127.0.0.1:{ssl_port}"
    cluster.sasl_ssl_bootstrap = f"127.0.0.1:{sasl_ssl_port}"
    cluster.requested_bootstrap = f"127.0.0.1:{requested_port}"
    cluster.zk = cluster.zk_client()
    set_scram_user(cluster.zk, SCRAM_USER, SCRAM_PASSWORD)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    return cluster


def _ssl_conf(cluster, pki, who) -> dict:
    return {
        "bootstrap.servers": cluster.ssl_bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca_file),
        "ssl.certificate.location": str(who.cert),
        "ssl.key.location": str(who.key),
    }


def _sasl_ssl_conf(cluster, pki, mechanism: str, password: str = SCRAM_PASSWORD) -> dict:
    return {
        "bootstrap.servers": cluster.sasl_ssl_bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca_file),
        "sasl.mechanism": mechanism,
        "sasl.username": SCRAM_USER,
        "sasl.password": password,
    }


def _serves_everyone(cluster, pki) -> None:
    admin = AdminClient(_ssl_conf(cluster, pki, pki.alice))
    assert TOPIC in admin.list_topics(timeout=30).topics
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert TOPIC in admin.list_topics(timeout=30).topics


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_over_sasl_ssl(tls_cluster, pki, mechanism):
    values = [f"sasl-ssl-{mechanism}-{i}".encode() for i in range(5)]
    got = round_trip(_sasl_ssl_conf(tls_cluster, pki, mechanism), TOPIC, values, f"g-{mechanism}")
    assert [v for _, v in got] == values
    offsets = [o for o, _ in got]
    assert offsets == list(range(offsets[0], offsets[0] + 5))


def test_sasl_ssl_wrong_password(tls_cluster, pki):
    error = first_error(_sasl_ssl_conf(tls_cluster, pki, "SCRAM-SHA-512", "wrong"))
    assert "Authentication failed" in error
    _serves_everyone(tls_cluster, pki)


def test_confluent_kafka_over_ssl_with_a_client_certificate(tls_cluster, pki):
    values = [f"mtls-{i}".encode() for i in range(5)]
    got = round_trip(_ssl_conf(tls_cluster, pki, pki.alice), TOPIC, values, "g-mtls")
    assert [v for _, v in got] == values


@pytest.mark.parametrize("who", ["stranger", "expired"])
def test_untrusted_or_expired_client_certificates_are_refused(tls_cluster, pki, who):
    refusals = _refusals(tls_cluster)
    first_error(_ssl_conf(tls_cluster, pki, getattr(pki, who)))
    _wait_refused(tls_cluster, refusals)
    _serves_everyone(tls_cluster, pki)


def _wait_refused(cluster, refusals: int) -> None:
    """Until the broker logged one more refused certificate than ``refusals``."""
    deadline = time.monotonic() + 20
    while _refusals(cluster) == refusals and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _refusals(cluster) > refusals  # the broker refused the handshake


def _refusals(cluster) -> int:
    """How often the broker logged a client certificate it could not verify."""
    return (
        Path(cluster.brokers[0].log_path)
        .read_text(errors="replace")
        .count("certificate verify failed")
    )


def test_no_client_certificate_where_one_is_required(tls_cluster, pki):
    conf = _ssl_conf(tls_cluster, pki, pki.alice)
    del conf["ssl.certificate.location"], conf["ssl.key.location"]
    first_error(conf)
    host, port = tls_cluster.ssl_bootstrap.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"\0\0\0\x0e\0\x12\0\0\0\0\0\x01\0\x04test")  # ApiVersions
                answer = tls.recv(1)  # TLS 1.3 reports the refusal on the first read
        except (ssl.SSLError, ConnectionError):
            answer = b""
    assert answer == b""
    _serves_everyone(tls_cluster, pki)


def test_plaintext_kafka_on_a_tls_port_is_closed(tls_cluster, pki):
    for bootstrap in (tls_cluster.ssl_bootstrap, tls_cluster.sasl_ssl_bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        client = WireClient(host, int(port))
        try:
            client.send_raw(b"\0\0\0\x0e\0\x12\0\0\0\0\0\x01\0\x04test")  # ApiVersions v0
            assert client.is_closed_by_peer(timeout=15)
        finally:
            client.close()
    _serves_everyone(tls_cluster, pki)


def _produce(conf: dict, total: int) -> Throttles:
    throttles = Throttles()
    producer = Producer(
        {**conf, "linger.ms": 5, "statistics.interval.ms": 200, "stats_cb": throttles}
    )
    for _ in range(total // 1000):
        producer.produce(TOPIC, value=os.urandom(1000), partition=0)
        producer.poll(0)
    assert producer.flush(120) == 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        producer.poll(0.1)
    return throttles


def test_user_quotas_throttle_the_authenticated_principal(tls_cluster, pki):
    """A producer quota on users/alice (the mapped certificate DN) and users/carol
    (SCRAM): both are throttled; bob's certificate maps to another principal and is not."""
    zk = tls_cluster.zk
    for user in ("alice", SCRAM_USER):
        set_user_quota(zk, user, producer_byte_rate=QUOTA)
        wait_log(
            tls_cluster, f"quotas of users/{user} are now {{'producer_byte_rate': {QUOTA:.1f}}}"
        )
    total = 2 * 1024 * 1024  # beyond the burst a fresh rate lets through at once
    assert _produce(_ssl_conf(tls_cluster, pki, pki.bob), total).max_ms == 0
    assert _produce(_ssl_conf(tls_cluster, pki, pki.alice), total).max_ms > 0
    assert _produce(_sasl_ssl_conf(tls_cluster, pki, "SCRAM-SHA-256"), total).max_ms > 0


def test_kcat_over_sasl_ssl(tls_cluster, pki):
    """kcat (librdkafka's CLI) with -X client properties, as operators use it."""
    props = [
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        "sasl.mechanism=SCRAM-SHA-256",
        "-X",
        f"sasl.username={SCRAM_USER}",
        "-X",
        f"sasl.password={SCRAM_PASSWORD}",
        "-X",
        f"ssl.ca.location={pki.ca_file}",
    ]
    bootstrap = ["-b", tls_cluster.sasl_ssl_bootstrap]
    lines = [f"kcat-{i}" for i in range(3)]
    produced = subprocess.run(
        ["kcat", *bootstrap, *props, "-P", "-t", TOPIC, "-p", "0"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        ["kcat", *bootstrap, *props, "-C", "-t", TOPIC, "-p", "0", "-o", "-3", "-e", "-f", "%s\n"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == lines


def test_requested_client_auth_takes_clients_with_and_without_certificates(tls_cluster, pki):
    """ssl.client.auth=requested (set for that listener only): no certificate is
    ANONYMOUS and welcome, a trusted one is taken, an untrusted one is still refused."""
    requested = {"bootstrap.servers": tls_cluster.requested_bootstrap}
    with_cert = {**_ssl_conf(tls_cluster, pki, pki.alice), **requested}
    without = {
        k: v
        for k, v in with_cert.items()
        if not k.endswith((".certificate.location", ".key.location"))
    }
    for conf in (with_cert, without):
        assert TOPIC in AdminClient(conf).list_topics(timeout=30).topics
    refusals = _refusals(tls_cluster)
    first_error({**_ssl_conf(tls_cluster, pki, pki.stranger), **requested})
    _wait_refused(tls_cluster, refusals)


def test_describe_configs_hides_the_key_password(tls_cluster, pki):
    """ssl.key.password (which the encrypted keystore needed) is sensitive: no value on
    the wire, as Kafka answers for its PASSWORD configs; the keystore's path is shown."""
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": tls_cluster.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(30)
    password = entries["ssl.key.password"]
    assert password.value is None and password.is_sensitive
    assert KEY_PASSWORD not in repr({k: e.value for k, e in entries.items()})
    assert entries["ssl.keystore.location"].value == str(pki.broker.keystore)
    assert not entries["ssl.keystore.location"].is_sensitive
