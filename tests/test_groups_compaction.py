"""__consumer_offsets is compacted by the log cleaner while the broker runs, and a
restarted broker loads the same committed offsets from the compacted log."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from broker.coordinator.group import codec
from tests.group_helpers import GROUP_BROKER, create_topic, read_partition, unique
from tests.wait_helpers import wait_until

COMMITS = 300
OFFSETS_PARTITIONS = 10


def _records_of(bootstrap: str, group: str) -> list[tuple[bytes, bytes | None]]:
    """Every record of the group's __consumer_offsets partition, read from its start."""
    partition = codec.partition_for(group, OFFSETS_PARTITIONS)
    return [(k, v) for _, k, v in read_partition(bootstrap, "__consumer_offsets", partition)]


def _ours(records, group: str):
    return [(k, v) for k, v in records if codec.read_key(k) == codec.OffsetKey(group, *_TP)]


_TP = ("compacted", 0)


def test_offsets_topic_is_compacted_and_reloads(cluster_factory):
    cluster = cluster_factory(
        1,
        **GROUP_BROKER,
        **{"offsets.topic.segment.bytes": "4096", "log.cleaner.backoff.ms": "100"},
    )
    bootstrap = cluster.bootstrap
    group = unique("compact")
    create_topic(bootstrap, _TP[0], 1)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    for i in range(1, COMMITS + 1):
        c.commit(offsets=[TopicPartition(*_TP, i)], asynchronous=False)
    c.close()
    # the cleaner keeps the latest commit per key, except in the active segment
    wait_until(
        lambda: len(_ours(_records_of(bootstrap, group), group)) < COMMITS // 3,
        what="the cleaner to compact __consumer_offsets",
        interval=0.5,
    )
    records = _ours(_records_of(bootstrap, group), group)
    values = [codec.read_offset_value(v).offset for _k, v in records]
    assert values == sorted(values) and values[-1] == COMMITS
    cluster.brokers[0].kill()
    cluster.brokers[0].start()
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = reader.committed([TopicPartition(*_TP)], timeout=30)
    reader.close()
    assert committed[0].offset == COMMITS
