"""Transactional producers against one broker: commit, abort, read_committed and
read_uncommitted consumers, the last stable offset (confluent-kafka, unmodified)."""

from __future__ import annotations

import pytest

from tests.group_helpers import create_topic, unique
from tests.txn_helpers import TXN_BROKER, end_offsets, read_all, txn_producer

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
