"""Transactional producers against one broker (confluent-kafka, unmodified): commit,
abort, read_committed and read_uncommitted consumers, the last stable offset, fencing
by a second producer, the abort of a killed producer's transaction after its timeout,
and consume-transform-produce with send_offsets_to_transaction."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.group_helpers import (
    committed_offsets,
    create_topic,
    produce,
    topic_and_group,
    unique,
)
from tests.txn_helpers import (
    TXN_BROKER,
    committed_without_stability,
    end_offsets,
    read_all,
    txn_producer,
)
from tests.wait_helpers import wait_until
from tests.wire import WireClient

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(cluster_factory):
    return cluster_factory(1, **TXN_BROKER)


def _produce(producer, topic: str, prefix: str, count: int) -> list[bytes]:
    values = [f"{prefix}-{i}".encode() for i in range(count)]
    for i, v in enumerate(values):
        producer.produce(topic, v, partition=i % PARTITIONS)
    return values


def test_commit_is_seen_once_by_read_committed(cluster):
    topic = unique("t-commit")
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    p = txn_producer(cluster.bootstrap, unique("tx"))
    sent = []
    for round_ in range(3):
        p.begin_transaction()
        sent += _produce(p, topic, f"r{round_}", 20)
        p.commit_transaction(30)
    got = read_all(cluster.bootstrap, topic, PARTITIONS, "read_committed")
    assert sorted(got) == sorted(sent)  # each once, control batches invisible
    # 3 commits x 3 partitions: one marker per partition per transaction
    ends = end_offsets(cluster.bootstrap, topic, PARTITIONS, "read_committed")
    assert sum(ends.values()) == len(sent) + 3 * PARTITIONS


def test_abort_is_invisible_to_read_committed_only(cluster):
    topic = unique("t-abort")
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    p = txn_producer(cluster.bootstrap, unique("tx"))
    p.begin_transaction()
    aborted = _produce(p, topic, "aborted", 30)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    committed = _produce(p, topic, "committed", 12)
    p.commit_transaction(30)
    assert sorted(read_all(cluster.bootstrap, topic, PARTITIONS, "read_committed")) == sorted(
        committed
    )
    assert sorted(read_all(cluster.bootstrap, topic, PARTITIONS, "read_uncommitted")) == sorted(
        aborted + committed
    )


def test_open_transaction_holds_the_last_stable_offset(cluster):
    topic = unique("t-lso")
    create_topic(cluster.bootstrap, topic, 1)
    p = txn_producer(cluster.bootstrap, unique("tx"))
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"open-{i}".encode(), partition=0)
    p.flush(30)
    assert end_offsets(cluster.bootstrap, topic, 1, "read_committed") == {0: 0}
    assert end_offsets(cluster.bootstrap, topic, 1, "read_uncommitted") == {0: 5}
    assert read_all(cluster.bootstrap, topic, 1, "read_committed", idle_s=1.5) == []
    p.commit_transaction(30)
    assert end_offsets(cluster.bootstrap, topic, 1, "read_committed") == {0: 6}
    assert len(read_all(cluster.bootstrap, topic, 1, "read_committed")) == 5


def test_second_producer_with_the_same_id_fences_the_first(cluster):
    topic = unique("t-fence")
    create_topic(cluster.bootstrap, topic, 1)
    txn_id = unique("tx")
    zombie = txn_producer(cluster.bootstrap, txn_id)
    zombie.begin_transaction()
    for i in range(5):
        zombie.produce(topic, f"zombie-{i}".encode(), partition=0)
    zombie.flush(30)
    fresh = txn_producer(cluster.bootstrap, txn_id)  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as err:
        zombie.commit_transaction(30)
    assert err.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    fresh.begin_transaction()
    fresh.produce(topic, b"fresh", partition=0)
    fresh.commit_transaction(30)
    assert read_all(cluster.bootstrap, topic, 1, "read_committed") == [b"fresh"]
    assert len(read_all(cluster.bootstrap, topic, 1, "read_uncommitted")) == 6


CHILD = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
              "transaction.timeout.ms": 3000})
p.init_transactions(30)
p.begin_transaction()
for i in range(10):
    p.produce(sys.argv[3], b"doomed-%d" % i, partition=0)
p.flush(30)
print("ready", flush=True)
time.sleep(600)
"""


def test_killed_producer_is_aborted_after_its_timeout(cluster):
    topic = unique("t-killed")
    create_topic(cluster.bootstrap, topic, 1)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, cluster.bootstrap, unique("tx"), topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(30)
    assert end_offsets(cluster.bootstrap, topic, 1, "read_committed") == {0: 0}
    wait_until(
        lambda: end_offsets(cluster.bootstrap, topic, 1, "read_committed") == {0: 11},
        timeout=30,
        what="the timed-out transaction to be aborted",
    )
    assert read_all(cluster.bootstrap, topic, 1, "read_committed", idle_s=1.5) == []
    assert len(read_all(cluster.bootstrap, topic, 1, "read_uncommitted", idle_s=1.5)) == 10


def test_consume_transform_produce_commits_offsets_with_the_output(cluster):
    source, group = topic_and_group(cluster.bootstrap, "ctp", PARTITIONS)
    sink = unique("t-sink")
    create_topic(cluster.bootstrap, sink, PARTITIONS)
    inputs = produce(cluster.bootstrap, source, 30, PARTITIONS)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = txn_producer(cluster.bootstrap, unique("tx"))
    wire = WireClient.for_bootstrap(cluster.bootstrap)
    try:
        consumer.assign([TopicPartition(source, p, 0) for p in range(PARTITIONS)])
        seen = []
        while len(seen) < len(inputs):
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                seen.append(msg)
        producer.begin_transaction()
        for msg in seen:
            producer.produce(sink, msg.value().upper(), partition=msg.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.flush(30)
        before = committed_without_stability(wire, group, source, PARTITIONS)
        assert set(before.values()) == {-1}  # pending until the commit marker
        producer.commit_transaction(30)
    finally:
        consumer.close()
        wire.close()
    expected = {p: 10 for p in range(PARTITIONS)}
    assert committed_offsets(cluster.bootstrap, group, source, PARTITIONS) == expected
    out = read_all(cluster.bootstrap, sink, PARTITIONS, "read_committed")
    assert sorted(out) == sorted(v.upper() for v in inputs)


def test_aborted_send_offsets_leaves_no_commit(cluster):
    source, group = topic_and_group(cluster.bootstrap, "ctp-abort", 1)
    produce(cluster.bootstrap, source, 4, 1)
    producer = txn_producer(cluster.bootstrap, unique("tx"))
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 4)], consumer.consumer_group_metadata(), 30
        )
        producer.abort_transaction(30)
    finally:
        consumer.close()
    assert committed_offsets(cluster.bootstrap, group, source, 1) == {0: -1001}


def test_open_transaction_survives_a_broker_restart(cluster):
    """Producer state snapshots keep the open transaction (LSO held after restart) and
    the coordinator reloads the id from __transaction_state: the commit goes through."""
    topic = unique("t-restart")
    create_topic(cluster.bootstrap, topic, 1)
    p = txn_producer(cluster.bootstrap, unique("tx"), **{"transaction.timeout.ms": 60000})
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"kept-{i}".encode(), partition=0)
    p.flush(30)
    cluster.broker(1).restart()
    wait_until(
        lambda: _end_offsets_or_none(cluster.bootstrap, topic, "read_uncommitted") == {0: 4},
        what="the partition back",
    )
    assert end_offsets(cluster.bootstrap, topic, 1, "read_committed") == {0: 0}
    p.commit_transaction(60)
    assert end_offsets(cluster.bootstrap, topic, 1, "read_committed") == {0: 5}
    assert len(read_all(cluster.bootstrap, topic, 1, "read_committed")) == 4


def _end_offsets_or_none(bootstrap: str, topic: str, isolation: str):
    try:
        return end_offsets(bootstrap, topic, 1, isolation)
    except KafkaException:
        return None
