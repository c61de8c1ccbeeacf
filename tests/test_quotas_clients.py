"""Client quotas against a real broker with librdkafka: configs in ZooKeeper as
kafka-configs writes them (znode + /config/changes notification), rates measured from
the broker's LogAppendTime of each record (produce) or the consumer's receipt times,
throttling seen in librdkafka's statistics (``brokers.*.throttle``)."""

from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.zk.client import KafkaZkClient
from tests.wait_helpers import wait_log

from .quota_helpers import Throttles

QUOTA = 100_000  # bytes/s
RECORD = 1000
# The rate is measured over 3 one-second samples (Kafka's default: 11), so the burst a
# fresh rate lets through is ~0.2 MB instead of ~1 MB, and 0.8 MB written by a throttled
# client (0.5 MB past the burst, ~5 s) show its rate as well as 2 MB did (~10 s).
WINDOWS = 3
BURST = WINDOWS * QUOTA  # what Kafka's rate lets through at once: quota x (num - 1), + slack
THROTTLED = 800 * RECORD  # what a throttled client writes or reads
FREE = 2 * 1024 * 1024  # what a client no quota holds writes


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1, **{"quota.window.num": str(WINDOWS)})


@pytest.fixture(scope="module")
def zk(broker):
    client = KafkaZkClient(broker.zk_connect)
    client.start()
    yield client
    client.close()


def _set_quota(broker, zk, entity_type: str, name: str, config: dict) -> None:
    """As kafka-configs --alter does: the entity znode, then a change notification."""
    zk.set_entity_config(entity_type, name, {k: str(v) for k, v in config.items()})
    shown = {k: float(v) for k, v in config.items()} or "unset"
    wait_log(broker, f"quotas of {entity_type}/{name} are now {shown}")


def _topic(broker, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.create_topics(
        [NewTopic(name, 1, 1, config={"message.timestamp.type": "LogAppendTime"})]
    )[name]
    fut.result(timeout=30)
    return name


def _produce(broker, topic: str, client_id: str, total: int) -> Throttles:
    throttles = Throttles()
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 65536,
            "statistics.interval.ms": 200,
            "stats_cb": throttles,
        }
    )
    for _ in range(total // RECORD):
        producer.produce(topic, value=os.urandom(RECORD), partition=0)
        producer.poll(0)
    assert producer.flush(120) == 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # one more statistics round
        producer.poll(0.1)
    return throttles


def _append_times(broker, topic: str) -> list[int]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "client.id": "reader",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    times: list[int] = []
    deadline = time.monotonic() + 60
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    while len(times) < high - low and time.monotonic() < deadline:
        for msg in consumer.consume(1000, timeout=1.0):
            if msg.error():
                raise KafkaException(msg.error())
            times.append(msg.timestamp()[1])
    consumer.close()
    return times


def _rate_after(times_ms: list[float], skip_bytes: int) -> float:
    """Bytes per second from the first record to the last, not counting ``skip_bytes``
    (the burst a fresh rate allows at once)."""
    span_ms = max(times_ms[-1] - times_ms[0], 1)
    return max(len(times_ms) * RECORD - skip_bytes, 0) / (span_ms / 1000.0)


def test_producer_over_its_quota_is_held_to_it(broker, zk):
    topic = _topic(broker, "q-slow")
    _set_quota(broker, zk, "clients", "slow", {"producer_byte_rate": QUOTA})
    try:
        throttles = _produce(broker, topic, "slow", THROTTLED)
    finally:
        _set_quota(broker, zk, "clients", "slow", {})
    times = _append_times(broker, topic)
    assert len(times) == THROTTLED // RECORD
    rate = _rate_after(times, BURST)
    print(f"client-id slow: {rate:,.0f} B/s after the burst, quota {QUOTA:,} B/s")
    assert rate < 1.5 * QUOTA, f"{rate:,.0f} B/s against a quota of {QUOTA:,}"
    assert throttles.max_ms > 0, "no produce response carried throttle_time_ms"
    assert "throttling user 'ANONYMOUS' client-id 'slow'" in broker.brokers[0].log_tail(2000)


def test_other_client_ids_and_removed_quotas_are_not_slowed(broker, zk):
    _set_quota(broker, zk, "clients", "slow2", {"producer_byte_rate": QUOTA})
    topic = _topic(broker, "q-fast")
    throttles = _produce(broker, topic, "fast", FREE)
    rate = _rate_after(_append_times(broker, topic), 0)
    print(f"client-id fast beside a quota: {rate:,.0f} B/s")
    assert rate > 5 * QUOTA and throttles.max_ms == 0
    # now slow2 has had its quota removed: nothing holds it back either
    _set_quota(broker, zk, "clients", "slow2", {})
    topic = _topic(broker, "q-freed")
    throttles = _produce(broker, topic, "slow2", FREE)
    rate = _rate_after(_append_times(broker, topic), 0)
    print(f"client-id slow2 after its quota was removed: {rate:,.0f} B/s")
    assert rate > 5 * QUOTA and throttles.max_ms == 0


def test_default_client_quota_applies_to_unknown_clients(broker, zk):
    _set_quota(broker, zk, "clients", "<default>", {"producer_byte_rate": QUOTA})
    topic = _topic(broker, "q-default")
    try:
        throttles = _produce(broker, topic, f"stranger-{uuid.uuid4().hex[:6]}", THROTTLED)
    finally:
        _set_quota(broker, zk, "clients", "<default>", {})
    rate = _rate_after(_append_times(broker, topic), BURST)
    print(f"unknown client-id under clients/<default>: {rate:,.0f} B/s")
    assert rate < 1.5 * QUOTA and throttles.max_ms > 0


def test_consumer_over_its_quota_is_held_to_it(broker, zk):
    topic = _topic(broker, "q-consume")
    _produce(broker, topic, "loader", THROTTLED)
    _set_quota(broker, zk, "clients", "slowc", {"consumer_byte_rate": QUOTA})
    throttles = Throttles()
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "client.id": "slowc",
            "enable.auto.commit": False,
            "fetch.max.bytes": 65536,
            "message.max.bytes": 65536,
            "max.partition.fetch.bytes": 65536,
            "statistics.interval.ms": 200,
            "stats_cb": throttles,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received: list[float] = []
    deadline = time.monotonic() + 90
    try:
        while len(received) < THROTTLED // RECORD and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.5):
                if msg.error():
                    raise KafkaException(msg.error())
                received.append(time.monotonic() * 1000.0)
        consumer.poll(0.5)
    finally:
        consumer.close()
        _set_quota(broker, zk, "clients", "slowc", {})
    assert len(received) == THROTTLED // RECORD
    rate = _rate_after(received, BURST)
    print(f"consumer slowc: {rate:,.0f} B/s after the burst, quota {QUOTA:,} B/s")
    assert rate < 1.5 * QUOTA and throttles.max_ms > 0


def test_bad_quota_values_in_zookeeper_are_ignored(broker, zk):
    zk.set_entity_config("clients", "odd", {"producer_byte_rate": "-5", "consumer_byte_rate": "x"})
    wait_log(broker, "ignoring quota producer_byte_rate='-5' of clients/odd")
    wait_log(broker, "ignoring quota consumer_byte_rate='x' of clients/odd")
    for garbage in (b"{not json", b'{"version":1,"config":5}', b"[1]"):
        zk.zk.set("/config/clients/odd", garbage)
        zk.zk.create(
            "/config/changes/config_change_",
            b'{"version":2,"entity_path":"clients/odd"}',
            sequence=True,
        )
    zk.zk.create("/config/changes/config_change_", b"garbage", sequence=True)
    zk.set_entity_config("clients", "after-odd", {"producer_byte_rate": "12345"})
    wait_log(broker, "quotas of clients/after-odd are now {'producer_byte_rate': 12345.0}")
    topic = _topic(broker, "q-alive")
    wait_log(broker, "ignoring config of clients/odd: not Kafka's JSON")
    wait_log(broker, "ignoring config change config_change_")
    _produce(broker, topic, "odd", 10_000)  # the broker still serves
    assert len(_append_times(broker, topic)) == 10
