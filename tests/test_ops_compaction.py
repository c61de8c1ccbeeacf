"""Compaction on request (/admin/compact/<topic>, Quill's): every broker hosting a
requested partition rolls it, cleans it whatever its dirty ratio, and reports the figures
under results/<broker id>; consumers then see only the last value of each key."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.zk.znodes import CompactRequest, CompactRequestZNode, CompactResultZNode
from tests.ops_helpers import state, unique
from tests.wait_helpers import wait_until

pytestmark = pytest.mark.cluster

KEYS, VERSIONS, DELETED = 100, 100, 10


def _results(zk, topic: str, broker: int) -> dict | None:
    path = CompactResultZNode.path(topic, broker)
    if zk.exists(path) is None:
        return None
    return CompactResultZNode.decode(zk.get(path)[0])


def _request(zk, topic: str, request: CompactRequest) -> None:
    path = CompactRequestZNode.topic_path(topic)
    if zk.exists(path) is None:
        zk.create(path, CompactRequestZNode.encode(request), makepath=True)
    else:
        zk.set(path, CompactRequestZNode.encode(request))


def _wait_results(zk, topic: str, brokers, request_id: str) -> dict[int, dict]:
    def done():
        got = {b: _results(zk, topic, b) for b in brokers}
        return all(r is not None and r["id"] == request_id for r in got.values()) and got

    got = {}
    wait_until(lambda: got.update(done() or {}) or len(got) == len(brokers), timeout=90,
               what=f"results of {request_id}")  # fmt: skip
    return got


def _read(bootstrap: str, topic: str, partition: int) -> list[tuple[bytes, bytes | None]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("read"), "enable.auto.commit": False}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)
        consumer.assign([TopicPartition(topic, partition, low)])
        out, position = [], low
        while position < high:
            msg = consumer.poll(10)
            assert msg is not None, f"no record at {position} of [{low}, {high})"
            if msg.error():
                continue
            out.append((msg.key(), msg.value()))
            position = msg.offset() + 1
        return out
    finally:
        consumer.close()


def test_compact_now_keeps_the_last_value_of_each_key(cluster_factory):
    cluster = cluster_factory(3, **{"replica.lag.time.max.ms": "5000"})
    topic = unique("compact")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(
        topic,
        num_partitions=2,
        replica_assignment=[[1, 2], [2, 3]],
        config={"cleanup.policy": "compact"},
    )
    admin.create_topics([new])[topic].result(30)
    wait_until(lambda: len(state(cluster, topic, 0)["isr"]) == 2, what="partition 0 in sync")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for version in range(VERSIONS):
        for key in range(KEYS):
            producer.produce(topic, key=b"k%03d" % key, value=b"v%03d-%03d" % (key, version),
                             partition=0)  # fmt: skip
    for key in range(KEYS - DELETED, KEYS):
        producer.produce(topic, key=b"k%03d" % key, value=None, partition=0)
    for i in range(5):
        producer.produce(topic, key=b"same", value=b"%d" % i, partition=1)
    assert producer.flush(30) == 0
    zk = cluster.zk_client()

    _request(zk, topic, CompactRequest(id="job-1", partitions=[0], roll=True))
    results = first = _wait_results(zk, topic, (1, 2), "job-1")
    for broker, body in results.items():
        assert body["broker"] == broker and body["finished_ms"] > 0
        (p0,) = body["partitions"]
        assert p0["partition"] == 0 and p0["error"] is None
        assert p0["records_removed"] == KEYS * VERSIONS + DELETED - KEYS
        assert p0["tombstones_kept"] == DELETED
        assert p0["dirty_ratio_before"] == 1.0 and p0["dirty_ratio_after"] == 0.0
        assert 0 < p0["bytes_after"] < p0["bytes_before"] / 20
        assert p0["cleaned_up_to"] == KEYS * VERSIONS + DELETED
        assert p0["duration_ms"] >= 0 and p0["finished_ms"] > 0
        assert p0["last_clean_ms"] > 0 and p0["uncleanable"] is False
    assert _results(zk, topic, 3) is None  # broker 3 hosts no replica of partition 0

    records = _read(cluster.bootstrap, topic, 0)
    assert len(records) == KEYS
    expected = {b"k%03d" % k: b"v%03d-%03d" % (k, VERSIONS - 1) for k in range(KEYS - DELETED)}
    expected.update({b"k%03d" % k: None for k in range(KEYS - DELETED, KEYS)})
    assert dict(records) == expected
    assert len(_read(cluster.bootstrap, topic, 1)) == 5  # not requested: untouched

    # a new id over every partition: partition 0 has nothing left to remove, partition 1 does
    _request(zk, topic, CompactRequest(id="job-2", partitions=None, roll=True))
    results = _wait_results(zk, topic, (1, 2, 3), "job-2")
    by_partition = {
        (b, p["partition"]): p for b, body in results.items() for p in body["partitions"]
    }
    assert set(by_partition) == {(1, 0), (2, 0), (2, 1), (3, 1)}
    for broker in (1, 2):
        assert by_partition[(broker, 0)]["records_removed"] == 0
        assert by_partition[(broker, 0)]["dirty_ratio_before"] == 0.0
    for broker in (2, 3):
        assert by_partition[(broker, 1)]["records_removed"] == 4
    assert _read(cluster.bootstrap, topic, 1) == [(b"same", b"4")]

    # the standing figures only ("clean": false): nothing is cleaned or rolled
    _request(zk, topic, CompactRequest(id="status-1", partitions=[0], roll=False, clean=False))
    results = _wait_results(zk, topic, (1, 2), "status-1")
    for broker, body in results.items():
        (p0,) = body["partitions"]
        assert p0["dirty_ratio"] == 0.0 and p0["uncleanable"] is False
        assert p0["bytes"] == by_partition[(broker, 0)]["bytes_after"]
        # job-2 found nothing to clean in partition 0: its last clean is job-1's
        assert p0["last_clean_ms"] == first[broker]["partitions"][0]["last_clean_ms"]
        assert p0["cleaned_up_to"] == KEYS * VERSIONS + DELETED
        assert "records_removed" not in p0 and p0["finished_ms"] > 0
