"""KIP-368 re-authentication on a SASL_PLAINTEXT listener, against one real broker.

``connections.max.reauth.ms`` is set three ways so each level is seen winning: the
broker's (100 s), the listener's (4 s, PLAIN takes it) and the listener's for one
mechanism (3 s, SCRAM-SHA-256). librdkafka (>= 2.2) re-authenticates before its
session ends and keeps producing and consuming; a raw client that lets its session
expire is disconnected at its next request; a re-authentication may not change the
principal or the mechanism. Brokers replicating over a SASL inter-broker listener with a
session lifetime re-authenticate their own connections (broker/client) and stay in sync.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from scramp import ScramClient

from tests.metrics_helpers import value
from tests.security_helpers import (
    plain_inter_broker,
    sasl_listener_cluster,
    set_scram_user,
)
from tests.wait_helpers import wait_until
from tests.wire import WireClient

TOPIC = "reauth-records"
PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
PLAIN_LIFETIME_MS, SCRAM_LIFETIME_MS = 4000, 3000
METRIC = "kafka_server_socket_server_metrics_"
LABELS = {"listener": "SASL_PLAINTEXT", "networkProcessor": "0"}


@pytest.fixture(scope="module")
def reauth_cluster(cluster_factory):
    cluster = sasl_listener_cluster(
        cluster_factory,
        "PLAIN,SCRAM-SHA-256",
        PLAIN_USERS,
        **{
            "connections.max.reauth.ms": "100000",
            "listener.name.sasl_plaintext.connections.max.reauth.ms": str(PLAIN_LIFETIME_MS),
            "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": str(
                SCRAM_LIFETIME_MS
            ),
            "quill.metrics.port": "free",
        },
    )
    set_scram_user(cluster.zk_client(), SCRAM_USER, SCRAM_PASSWORD, ("SCRAM-SHA-256",))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    return cluster


def _metric(cluster, name: str) -> float:
    return value(cluster.brokers[0].metrics_port, METRIC + name, **LABELS)


def _plain(c: WireClient, user: str, password: str, mechanism_version: int = 1):
    assert c.request(17, mechanism_version, {"mechanism": "PLAIN"}).error_code == 0
    return c.request(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})


def _lifetime_ms(resp) -> int:
    return int(resp.session_lifetime.total_seconds() * 1000)


def _metadata_ok(c: WireClient) -> bool:
    meta = c.request(3, 9, {"topics": [{"name": TOPIC}]})
    return [t.name for t in meta.topics] == [TOPIC]


def _send_metadata(c: WireClient) -> None:
    from broker.protocol.messages import RequestHeader, build, encode_request, request_schema

    c.correlation += 1
    body = build(request_schema(3, 9), {"topics": [{"name": TOPIC}]})
    c.send_raw(encode_request(RequestHeader(3, 9, c.correlation, "t"), body))


def test_session_lifetime_per_listener_and_mechanism(reauth_cluster):
    c = WireClient("127.0.0.1", reauth_cluster.sasl_port)
    try:
        resp = _plain(c, "alice", "alice-secret")
        assert resp.error_code == 0
        assert _lifetime_ms(resp) == PLAIN_LIFETIME_MS  # the listener's value
    finally:
        c.close()
    c = WireClient("127.0.0.1", reauth_cluster.sasl_port)
    try:
        scram = ScramClient(["SCRAM-SHA-256"], SCRAM_USER, SCRAM_PASSWORD)
        assert c.request(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
        first = c.request(36, 2, {"auth_bytes": scram.get_client_first().encode()})
        assert first.error_code == 0 and _lifetime_ms(first) == 0  # not complete yet
        scram.set_server_first(first.auth_bytes.decode())
        final = c.request(36, 2, {"auth_bytes": scram.get_client_final().encode()})
        assert final.error_code == 0
        assert _lifetime_ms(final) == SCRAM_LIFETIME_MS  # the mechanism's value
        assert _metadata_ok(c)
    finally:
        c.close()


def test_an_expired_session_is_closed_at_its_next_request(reauth_cluster):
    killed = _metric(reauth_cluster, "expired_connections_killed_count")
    c = WireClient("127.0.0.1", reauth_cluster.sasl_port)
    try:
        assert _plain(c, "alice", "alice-secret").error_code == 0
        ends = time.monotonic() + PLAIN_LIFETIME_MS / 1000
        assert _metadata_ok(c)  # within the session
        time.sleep(max(0.0, ends - time.monotonic()) + 0.5)
        _send_metadata(c)  # not a re-authentication: the broker closes, answering nothing
        assert c.is_closed_by_peer(timeout=10)
    finally:
        c.close()
    assert _metric(reauth_cluster, "expired_connections_killed_count") == killed + 1


def test_reauthentication_on_the_same_connection(reauth_cluster):
    before = _metric(reauth_cluster, "successful_reauthentication_total")
    c = WireClient("127.0.0.1", reauth_cluster.sasl_port)
    try:
        assert _plain(c, "alice", "alice-secret").error_code == 0
        started = time.monotonic()
        resp = _plain(c, "alice", "alice-secret")  # again, same principal
        assert resp.error_code == 0 and _lifetime_ms(resp) == PLAIN_LIFETIME_MS
        # a second one within a second is not a re-authentication (Kafka's limit): KafkaApis
        # answers ILLEGAL_SASL_STATE and the connection stays
        error = c.request(17, 1, {"mechanism": "PLAIN"}).error_code
        reauths = 1
        if time.monotonic() - started < 1.0:
            assert error == 34
        else:  # a machine so loaded a second went by: it was a re-authentication
            assert error == 0
            token = b"\0alice\0alice-secret"
            assert c.request(36, 2, {"auth_bytes": token}).error_code == 0
            reauths = 2
        assert _metadata_ok(c)
        time.sleep(1.1)
        resp = _plain(c, "bob", "bob-secret")  # another principal: refused, then closed
        assert resp.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert resp.error_message == (
            "Cannot change principals during re-authentication from User.alice: User.bob"
        )
        assert c.is_closed_by_peer(timeout=10)
    finally:
        c.close()
    assert _metric(reauth_cluster, "successful_reauthentication_total") == before + reauths
    assert _metric(reauth_cluster, "failed_reauthentication_total") >= 1


def test_reauthentication_may_not_change_the_mechanism(reauth_cluster):
    c = WireClient("127.0.0.1", reauth_cluster.sasl_port)
    try:
        assert _plain(c, "alice", "alice-secret").error_code == 0
        assert c.request(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == 0  # as Kafka
        scram = ScramClient(["SCRAM-SHA-256"], SCRAM_USER, SCRAM_PASSWORD)
        resp = c.request(36, 2, {"auth_bytes": scram.get_client_first().encode()})
        assert resp.error_code == 58
        assert "not supported for re-authentication of mechanism 'PLAIN'" in resp.error_message
        assert c.is_closed_by_peer(timeout=10)
    finally:
        c.close()


@pytest.mark.parametrize(
    ("mechanism", "user", "password", "lifetime_ms"),
    [
        ("PLAIN", "alice", "alice-secret", PLAIN_LIFETIME_MS),
        ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD, SCRAM_LIFETIME_MS),
    ],
)
def test_librdkafka_reauthenticates_and_keeps_working(
    reauth_cluster, mechanism, user, password, lifetime_ms
):
    """Produce and consume across several session lifetimes: librdkafka re-authenticates
    its connections before they end, so the broker kills none of them."""
    from confluent_kafka import Consumer, Producer

    conf = {
        "bootstrap.servers": reauth_cluster.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    killed = _metric(reauth_cluster, "expired_connections_killed_count")
    reauths = _metric(reauth_cluster, "successful_reauthentication_total")
    producer = Producer(conf)
    consumer = Consumer(
        {**conf, "group.id": f"reauth-{mechanism}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    sent, got = [], []
    try:
        # the consumer has its partition before we produce (it reads from the start and
        # keeps only this run's records)
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        run_until = time.monotonic() + 3 * lifetime_ms / 1000
        while time.monotonic() < run_until:
            payload = f"{mechanism}-{len(sent)}".encode()
            producer.produce(TOPIC, payload)
            assert producer.flush(30) == 0
            sent.append(payload)
            got += _ours(consumer.poll(0.25), mechanism)
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            got += _ours(consumer.poll(0.5), mechanism)
    finally:
        consumer.close()
        del producer  # its connections close now, not at the next test's teardown
    assert got == sent
    # several lifetimes passed on at least the producer's and the consumer's connections
    assert _metric(reauth_cluster, "successful_reauthentication_total") >= reauths + 4
    assert _metric(reauth_cluster, "expired_connections_killed_count") == killed


def _ours(msg, mechanism: str) -> list[bytes]:
    if msg is None or msg.error() is not None or not msg.value().startswith(mechanism.encode()):
        return []
    return [msg.value()]


def test_brokers_reauthenticate_their_inter_broker_connections(cluster_factory):
    """Two brokers replicate over an INTERNAL SASL_PLAINTEXT listener whose sessions last
    3 s: the follower's fetcher and the controller's channel re-authenticate (nothing
    is killed for expiry), and acks=all writes keep their ISR of two."""
    two = cluster_factory(
        2,
        **{
            **plain_inter_broker(2)[0],
            "listener.name.internal.connections.max.reauth.ms": "3000",
            "quill.metrics.port": "free",
        },
    )
    name = "reauth-replicated"
    w = WireClient.for_bootstrap(two.bootstrap)
    assert w.create_topic(name, 1, {"min.insync.replicas": "2"}, rf=2).error_code == 0
    w.close()
    zk = two.zk_client()

    def state() -> dict:
        import json

        path = f"/brokers/topics/{name}/partitions/0/state"
        return json.loads(zk.get(path)[0]) if zk.exists(path) else {}

    wait_until(lambda: len(state().get("isr", [])) == 2, what="an ISR of two")
    leader = two.broker(state()["leader"])
    c = WireClient("127.0.0.1", leader.port)
    labels = {"listener": "INTERNAL", "networkProcessor": "0"}
    try:
        from broker.protocol.records import build_batch

        offset = 0
        ends = time.monotonic() + 3 * 3.0
        while time.monotonic() < ends or offset < 10:
            batch = build_batch([(None, b"v%d" % offset, [], int(time.time() * 1000))])
            r = c.produce(name, 0, batch, acks=-1)
            assert (r.error_code, r.base_offset) == (0, offset)
            offset += 1
            time.sleep(0.1)
    finally:
        c.close()
    assert sorted(state()["isr"]) == [1, 2]
    reauths = value(leader.metrics_port, METRIC + "successful_reauthentication_total", **labels)
    assert reauths >= 2  # the follower's fetch connection, several lifetimes over
    for b in two.brokers:
        assert value(b.metrics_port, METRIC + "expired_connections_killed_count", **labels) == 0
        assert value(b.metrics_port, METRIC + "failed_reauthentication_total", **labels) == 0
