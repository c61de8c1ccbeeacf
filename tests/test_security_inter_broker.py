"""Brokers authenticate to each other: three brokers whose inter-broker listener is
SASL_SSL (SCRAM-SHA-512, the broker's user from its listener's JAAS config, its
credential written to ZooKeeper after the brokers started and picked up at once).
Followers replicate over it (acks=all with min.insync.replicas=3 needs all three),
leadership fails over when the leader is killed, and the restarted broker catches up
and rejoins the ISR; every acknowledged record is read back in order."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from quill_stack import ports, tls
from tests.security_helpers import SCRAM_JAAS, jaas, set_scram_user

pytestmark = pytest.mark.cluster

TOPIC = "replicated-over-sasl-ssl"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"


@pytest.fixture(scope="module")
def secure_cluster(cluster_factory, tmp_path_factory):
    pki_dir = tmp_path_factory.mktemp("pki")
    keystore = tls.issue(pki_dir, "broker", ("localhost", "127.0.0.1")).keystore
    internal = dict(zip((1, 2, 3), ports.free_ports(3), strict=True))
    listeners = lambda b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal[b]}"
    )
    cluster = cluster_factory(
        3,
        **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": jaas(
                SCRAM_JAAS, username=BROKER_USER, password=BROKER_PASSWORD
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki_dir / "ca.crt"),
            "auto.create.topics.enable": "false",
        },
    )
    set_scram_user(cluster.zk_client(), BROKER_USER, BROKER_PASSWORD, ("SCRAM-SHA-512",))
    return cluster


def _isr(bootstrap: str) -> tuple[int, list[int]]:
    """The partition's leader and ISR as one broker's metadata says, (-1, []) while that
    broker has not heard of the topic yet (CreateTopics answers once the controller has
    the topic; UpdateMetadata reaches the other brokers just after)."""
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=30)
    topic = meta.topics.get(TOPIC)
    part = None if topic is None else topic.partitions.get(0)
    if part is None:
        return -1, []
    return part.leader, sorted(part.isrs)


def _wait_isr(bootstrap: str, want: list[int], timeout: float = 90.0) -> int:
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = _isr(bootstrap)
        if seen[1] == want and seen[0] in want:
            return seen[0]
        time.sleep(0.5)
    raise AssertionError(f"ISR never became {want}: last seen leader/ISR {seen}")


def _produce(bootstrap: str, values: list[bytes]) -> None:
    failures = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 120000,
        }
    )
    for value in values:
        producer.produce(
            TOPIC, value, partition=0, on_delivery=lambda e, _m: e and failures.append(e)
        )
    assert producer.flush(150) == 0
    assert failures == []


def _read_all(bootstrap: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader"})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=1.0):
            if msg.error() is None:
                got.append(msg.value())
    consumer.close()
    return got


def test_replicates_and_fails_over_on_a_sasl_ssl_inter_broker_listener(secure_cluster):
    bootstrap = secure_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "3"})
    admin.create_topics([topic])[TOPIC].result(60)
    leader = _wait_isr(bootstrap, [1, 2, 3])
    first = [b"%06d" % i for i in range(200)]
    _produce(bootstrap, first)  # acks=all with min ISR 3: every follower fetched over SASL_SSL

    victim = secure_cluster.broker(leader)
    victim.kill()
    others = sorted({1, 2, 3} - {leader})
    live = ",".join(secure_cluster.broker(b).address for b in others)
    new_leader = _wait_isr(live, others)
    assert new_leader != leader

    victim.start()
    _wait_isr(bootstrap, [1, 2, 3])
    second = [b"%06d" % i for i in range(200, 300)]
    _produce(bootstrap, second)  # min ISR 3 again: the restarted broker replicates too
    assert _read_all(bootstrap, 300) == first + second
