"""SASL on a real broker: a SASL_PLAINTEXT listener (PLAIN users from its JAAS config,
SCRAM-SHA-256/512 users from ZooKeeper) beside the PLAINTEXT one, used by
confluent-kafka, kafka-python, aiokafka and a raw socket. Asserts the records that go
through, Kafka's error codes for what must not, closed connections, the broker's log
line naming the principal and address, and that the broker keeps serving everyone."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from scramp import ScramClient

from tests.metrics_helpers import samples
from tests.security_helpers import (
    PLAIN_JAAS,
    delete_scram_user,
    first_error,
    jaas,
    logs_in,
    round_trip,
    sasl_listener_cluster,
    set_scram_user,
)
from tests.wait_helpers import wait_log
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

TOPIC = "sasl-records"
PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


@pytest.fixture(scope="module")
def sasl_cluster(cluster_factory):
    cluster = sasl_listener_cluster(
        cluster_factory,
        MECHANISMS,
        PLAIN_USERS,
        **{
            "auto.create.topics.enable": "false",
            "quill.metrics.port": "free",  # request metrics must not count bare SASL tokens
        },
    )
    zk = cluster.zk_client()
    set_scram_user(zk, SCRAM_USER, SCRAM_PASSWORD)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    cluster.zk = zk
    return cluster


def _conf(cluster, mechanism: str, user: str, password: str, **extra) -> dict:
    return {
        "bootstrap.servers": cluster.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        **extra,
    }


def _broker_log(cluster) -> str:
    return Path(cluster.brokers[0].log_path).read_text(errors="replace")


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", PLAIN_USERS["alice"]),
        ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
        ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
    ],
)
def test_confluent_kafka_produces_and_consumes_over_sasl(sasl_cluster, mechanism, user, password):
    values = [f"{mechanism}-{i}".encode() for i in range(5)]
    conf = _conf(sasl_cluster, mechanism, user, password)
    got = round_trip(conf, TOPIC, values, f"g-{mechanism}")
    assert [v for _, v in got] == values
    offsets = [o for o, _ in got]
    assert offsets == list(range(offsets[0], offsets[0] + 5))


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", "not-her-password"),
        ("PLAIN", "mallory", "anything"),
        ("SCRAM-SHA-256", SCRAM_USER, "wrong"),
        ("SCRAM-SHA-512", "nobody", "wrong"),
    ],
)
def test_wrong_credentials_are_refused_and_logged(sasl_cluster, mechanism, user, password):
    error = first_error(_conf(sasl_cluster, mechanism, user, password))
    assert "Authentication failed" in error
    wait_log(sasl_cluster, f"principal User:{user}")
    assert "Failed authentication with 127.0.0.1:" in _broker_log(sasl_cluster)
    # the broker still serves everyone else
    good = AdminClient(_conf(sasl_cluster, "PLAIN", "alice", PLAIN_USERS["alice"]))
    assert TOPIC in good.list_topics(timeout=30).topics


def _python_client_auth(cluster, mechanism: str, user: str, password: str) -> dict:
    """kafka-python's and aiokafka's (shared) keyword arguments for SASL_PLAINTEXT."""
    return {
        "bootstrap_servers": cluster.sasl_bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def test_kafka_python_plain_and_scram(sasl_cluster):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    for mechanism, user, password in [
        ("PLAIN", "alice", PLAIN_USERS["alice"]),
        ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
    ]:
        auth = _python_client_auth(sasl_cluster, mechanism, user, password)
        producer = KafkaProducer(**auth)
        value = f"kafka-python-{mechanism}".encode()
        meta = producer.send(TOPIC, value).get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(**auth, consumer_timeout_ms=20000, auto_offset_reset="earliest")
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        record = next(iter(consumer))
        consumer.close()
        assert (record.offset, record.value) == (meta.offset, value)


def test_aiokafka_plain_and_scram(sasl_cluster):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run(mechanism: str, user: str, password: str) -> tuple[int, int, bytes]:
        auth = _python_client_auth(sasl_cluster, mechanism, user, password)
        producer = AIOKafkaProducer(**auth)
        await producer.start()
        value = f"aiokafka-{mechanism}".encode()
        try:
            meta = await producer.send_and_wait(TOPIC, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**auth)
        await consumer.start()
        try:
            tp = TopicPartition(TOPIC, 0)
            consumer.assign([tp])
            consumer.seek(tp, meta.offset)
            record = await asyncio.wait_for(consumer.getone(), 30)
        finally:
            await consumer.stop()
        return meta.offset, record.offset, record.value

    for mechanism, user, password in [
        ("PLAIN", "alice", PLAIN_USERS["alice"]),
        ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
    ]:
        sent, read, value = asyncio.run(run(mechanism, user, password))
        assert (read, value) == (sent, f"aiokafka-{mechanism}".encode())


def test_scram_user_changes_apply_at_once(sasl_cluster):
    """A user added, its password changed, then deleted in ZooKeeper: each change is
    picked up from /config/changes without a restart."""
    zk = sasl_cluster.zk
    user = "dave"

    def can_log_in(password: str) -> bool:
        return logs_in(_conf(sasl_cluster, "SCRAM-SHA-512", user, password))

    def eventually(check, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return True
            time.sleep(0.2)
        return False

    assert not can_log_in("first")
    set_scram_user(zk, user, "first")
    assert eventually(lambda: can_log_in("first"))
    set_scram_user(zk, user, "second")
    assert eventually(lambda: can_log_in("second"))
    assert not can_log_in("first")
    delete_scram_user(zk, user)
    assert eventually(lambda: not can_log_in("second"))


# -- the wire: exact codes, closed connections --------------------------------------


class Raw(WireClient):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _raw(cluster) -> Raw:
    return Raw("127.0.0.1", cluster.sasl_port)


def _closed(client: WireClient) -> bool:
    return client.is_closed_by_peer(timeout=10)


def test_no_request_is_served_before_authentication(sasl_cluster):
    with _raw(sasl_cluster) as c:
        versions = c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        keys = {k.api_key for k in versions.api_keys}
        assert {17, 36} <= keys
        c.correlation += 1
        from broker.protocol.messages import RequestHeader, build, encode_request, request_schema

        body = build(request_schema(3, 9), {"topics": None})
        c.send_raw(encode_request(RequestHeader(3, 9, c.correlation, "t"), body))
        assert _closed(c)  # Kafka closes: no Metadata for an unauthenticated client


def test_unknown_mechanism_gets_the_enabled_list_then_a_closed_connection(sasl_cluster):
    with _raw(sasl_cluster) as c:
        resp = c.request(17, 1, {"mechanism": "GSSAPI"})
        assert resp.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(resp.mechanisms) == MECHANISMS.split(",")
        assert _closed(c)


def test_plain_bad_tokens_get_sasl_authentication_failed(sasl_cluster):
    for token in [
        b"\0alice\0wrong",
        b"garbage without separators",
        b"\xff\xfe\0alice\0alice-secret",
        b"\0alice\0alice-secret\0extra",
        b"bob\0alice\0alice-secret",  # an authorization id other than the user
        b"",
    ]:
        with _raw(sasl_cluster) as c:
            assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
            resp = c.request(36, 2, {"auth_bytes": token})
            assert resp.error_code == 58, token  # SASL_AUTHENTICATION_FAILED
            assert resp.error_message
            assert _closed(c)


def test_plain_success_then_requests_then_no_second_handshake(sasl_cluster):
    with _raw(sasl_cluster) as c:
        assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        resp = c.request(36, 2, {"auth_bytes": b"\0alice\0alice-secret"})
        assert resp.error_code == 0
        meta = c.request(3, 9, {"topics": [{"name": TOPIC}]})
        assert [t.name for t in meta.topics] == [TOPIC]
        assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 34  # ILLEGAL_SASL_STATE
        assert c.request(36, 2, {"auth_bytes": b"x"}).error_code == 34


def test_handshake_v0_then_raw_tokens(sasl_cluster):
    """Kafka 0.10's framing: after SaslHandshake v0 the token is a bare size-prefixed
    frame, answered the same way."""
    with _raw(sasl_cluster) as c:
        assert c.request(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = b"\0alice\0alice-secret"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert c.read_frame() == b""  # PLAIN's empty server token
        meta = c.request(3, 9, {"topics": [{"name": TOPIC}]})
        assert [t.name for t in meta.topics] == [TOPIC]
    with _raw(sasl_cluster) as c:
        assert c.request(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        token = b"\0alice\0wrong"
        c.send_raw(struct.pack(">i", len(token)) + token)
        assert _closed(c)
    requests = {
        dict(labels).get("request")
        for _name, labels in samples(sasl_cluster.brokers[0].metrics_port)
        if dict(labels).get("request")
    }
    assert "SaslHandshake" in requests
    assert all(not r.isdigit() for r in requests), requests  # no token taken for an API key


def _scram_first(c: WireClient, mechanism: str, password: str) -> ScramClient:
    scram = ScramClient([mechanism], SCRAM_USER, password)
    assert c.request(17, 1, {"mechanism": mechanism}).error_code == 0
    resp = c.request(36, 2, {"auth_bytes": scram.get_client_first().encode()})
    assert resp.error_code == 0
    scram.set_server_first(resp.auth_bytes.decode())
    return scram


def test_scram_over_the_wire_and_a_replayed_final_message(sasl_cluster):
    mechanism = "SCRAM-SHA-256"
    with _raw(sasl_cluster) as c:
        scram = _scram_first(c, mechanism, SCRAM_PASSWORD)
        final = scram.get_client_final()
        resp = c.request(36, 2, {"auth_bytes": final.encode()})
        assert resp.error_code == 0
        scram.set_server_final(resp.auth_bytes.decode())  # the server proved itself too
    with _raw(sasl_cluster) as c:  # the same final message on a new exchange: a new nonce
        _scram_first(c, mechanism, SCRAM_PASSWORD)
        resp = c.request(36, 2, {"auth_bytes": final.encode()})
        assert resp.error_code == 58
        assert _closed(c)


@pytest.mark.parametrize(
    "first",
    [b"n,,n=carol", b"n,,", b"", b"\xff\xff", b"n,,n=carol,r=", b"p=tls-unique,,n=carol,r=abc"],
)
def test_truncated_or_malformed_scram_messages(sasl_cluster, first):
    with _raw(sasl_cluster) as c:
        assert c.request(17, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
        resp = c.request(36, 2, {"auth_bytes": first})
        assert resp.error_code == 58
        assert _closed(c)


def test_truncated_scram_final_message(sasl_cluster):
    with _raw(sasl_cluster) as c:
        scram = _scram_first(c, "SCRAM-SHA-512", SCRAM_PASSWORD)
        final = scram.get_client_final()
        resp = c.request(36, 2, {"auth_bytes": final[: len(final) // 2].encode()})
        assert resp.error_code == 58
        assert _closed(c)


def test_garbage_before_and_during_the_exchange_closes_only_that_connection(sasl_cluster):
    with _raw(sasl_cluster) as c:  # absurd size
        c.send_raw(b"\x7f\xff\xff\xff" + b"x" * 16)
        assert _closed(c)
    with _raw(sasl_cluster) as c:  # a frame too short for a header
        c.send_raw(struct.pack(">i", 3) + b"abc")
        assert _closed(c)
    with _raw(sasl_cluster) as c:  # garbage after the handshake
        assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        c.send_raw(struct.pack(">i", 12) + b"\x00\x24\x00\x02" + b"\xff" * 8)
        assert _closed(c)
    with _raw(sasl_cluster) as c:  # SaslHandshake at a version nobody speaks (a fuzzer find)
        body = struct.pack(">hhih", 17, 122, 1, 2) + b"fz" + struct.pack(">h", 5) + b"PLAIN"
        c.send_raw(struct.pack(">i", len(body)) + body)
        assert _closed(c)
    with _raw(sasl_cluster) as c:  # a TLS ClientHello on the SASL_PLAINTEXT port
        c.send_raw(bytes.fromhex("16030100a5010000a10303") + b"\0" * 64)
        assert _closed(c)
    good = AdminClient(_conf(sasl_cluster, "PLAIN", "alice", PLAIN_USERS["alice"]))
    assert TOPIC in good.list_topics(timeout=30).topics
    assert "unexpected error" not in _broker_log(sasl_cluster)  # refusals, not bugs


def test_plaintext_listener_answers_sasl_requests_with_illegal_state(sasl_cluster):
    host, port = sasl_cluster.bootstrap.split(",")[0].rsplit(":", 1)
    with Raw(host, int(port)) as c:
        assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 34
        assert c.request(36, 0, {"auth_bytes": b"\0alice\0alice-secret"}).error_code == 34
        meta = c.request(3, 9, {"topics": [{"name": TOPIC}]})
        assert [t.name for t in meta.topics] == [TOPIC]


def test_sasl_port_stays_up(sasl_cluster):
    """After everything above: still one broker process, accepting."""
    assert sasl_cluster.brokers[0].alive()
    with socket.create_connection(("127.0.0.1", sasl_cluster.sasl_port), timeout=10):
        pass


def test_a_broker_with_only_a_sasl_listener(cluster_factory):
    """No PLAINTEXT listener at all: the registration's legacy host/port are null/-1 (as
    Kafka writes them), the controller reaches the broker over SASL_PLAINTEXT with PLAIN
    credentials from the JAAS config, and clients produce and consume."""
    import json

    listeners = lambda _b, port: f"SASL_PLAINTEXT://127.0.0.1:{port}"  # noqa: E731
    cluster = cluster_factory(
        1,
        **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(
                PLAIN_JAAS,
                username="broker",
                password="b-secret",
                user_broker="b-secret",
                user_alice="alice-secret",
            ),
            # KIP-306 made long enough that an early close cannot pass unnoticed
            "connection.failed.authentication.delay.ms": "600000",
            "connections.max.idle.ms": "1200000",
        },
    )
    registration = json.loads(cluster.zk_client().get("/brokers/ids/1")[0])
    assert (registration["host"], registration["port"]) == (None, -1)
    assert registration["listener_security_protocol_map"] == {"SASL_PLAINTEXT": "SASL_PLAINTEXT"}
    conf = {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    values = [b"only-sasl-%d" % i for i in range(3)]
    assert [v for _, v in round_trip(conf, "only-sasl", values, "g-only-sasl")] == values

    # a failed login is answered at once, but the connection is held open (no request
    # read) for connection.failed.authentication.delay.ms before the close
    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
    with Raw(host, int(port)) as c:
        assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        assert c.request(36, 2, {"auth_bytes": b"\0alice\0wrong"}).error_code == 58
        from broker.protocol.messages import RequestHeader, build, encode_request, request_schema

        c.correlation += 1
        retry = build(request_schema(36, 2), {"auth_bytes": b"\0alice\0alice-secret"})
        c.send_raw(encode_request(RequestHeader(36, 2, c.correlation, "t"), retry))
        assert not c.is_closed_by_peer(timeout=3)  # neither closed nor answered yet
