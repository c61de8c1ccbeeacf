"""A broker asked about a partition it does not host: Kafka's two answers.

Kafka's ReplicaManager answers NOT_LEADER_OR_FOLLOWER for a partition its metadata
cache knows but that it holds no state for (it is another broker's, or a restarted
broker's LeaderAndIsr has not arrived yet: clients refresh metadata and retry), and
UNKNOWN_TOPIC_OR_PARTITION only when the metadata knows no such partition. Checked on
the wire for Produce, Fetch, ListOffsets and OffsetForLeaderEpoch on a real 2-broker
cluster, and that a restarted broker hears its metadata (UpdateMetadata) before its
partition states (LeaderAndIsr), as Kafka's controller sends them.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.records import build_batch
from tests.wait_helpers import wait_until
from tests.wire import WireClient

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def two(cluster_factory):
    return cluster_factory(2)


def _metadata(w: WireClient, topic: str):
    resp = w.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return resp.topics[0]


def _leader(w: WireClient, topic: str) -> int:
    parts = _metadata(w, topic).partitions
    return parts[0].leader_id if parts else -1


def _errors(w: WireClient, topic: str, partition: int) -> dict[str, ErrorCode]:
    """The error code of each API for one partition, asked of the broker behind ``w``."""
    batch = build_batch([(None, b"v", [], int(time.time() * 1000))])
    epochs = w.request(
        23,
        4,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": partition, "current_leader_epoch": -1, "leader_epoch": 0}
                    ],
                }
            ],
        },
    )
    return {
        "produce": w.produce(topic, partition, batch).error_code,
        "fetch": w.fetch(topic, partition, 0).error_code,
        "list_offsets": w.list_offset(topic, partition, -1).error_code,
        "offset_for_leader_epoch": epochs.topics[0].partitions[0].error_code,
    }


def _everywhere(code: ErrorCode) -> dict[str, ErrorCode]:
    return dict.fromkeys(("produce", "fetch", "list_offsets", "offset_for_leader_epoch"), code)


def test_a_partition_of_another_broker_is_not_leader_or_follower(two):
    topic = f"nh-{uuid.uuid4().hex[:6]}"
    clients = {b: WireClient.for_bootstrap(two.broker(b).address) for b in (1, 2)}
    try:
        assert clients[1].create_topic(topic, 1, rf=1).error_code == ErrorCode.none
        # both brokers' metadata name the leader: one hosts the partition, one does not
        wait_until(lambda: all(_leader(c, topic) >= 0 for c in clients.values()), what="leader")
        leader = _leader(clients[1], topic)
        other = clients[2 if leader == 1 else 1]
        assert _errors(clients[leader], topic, 0) == _everywhere(ErrorCode.none)
        assert _errors(other, topic, 0) == _everywhere(ErrorCode.not_leader_or_follower)
        # what the metadata does not know stays unknown
        unknown = _everywhere(ErrorCode.unknown_topic_or_partition)
        assert _errors(other, topic, 7) == unknown
        assert _errors(other, f"{topic}-absent", 0) == unknown
    finally:
        for c in clients.values():
            c.close()


def test_a_restarted_broker_answers_not_leader_until_its_partitions_arrive(two):
    """Its replica comes back after a restart: from the first answer that knows the
    topic on, the broker says NOT_LEADER_OR_FOLLOWER or serves it, never
    UNKNOWN_TOPIC_OR_PARTITION (the metadata arrives before the partition states)."""
    topic = f"nh-{uuid.uuid4().hex[:6]}"
    w = WireClient.for_bootstrap(two.broker(1).address)
    try:
        assert w.create_topic(topic, 4, rf=2).error_code == ErrorCode.none
        wait_until(lambda: all(p.leader_id >= 0 for p in _metadata(w, topic).partitions))
    finally:
        w.close()
    two.broker(2).restart()
    seen: list[ErrorCode] = []
    deadline = time.monotonic() + 60
    w = WireClient.for_bootstrap(two.broker(2).address)
    try:
        while time.monotonic() < deadline:
            known = _metadata(w, topic).error_code == ErrorCode.none
            codes = [w.list_offset(topic, p, -2, replica_id=-2).error_code for p in range(4)]
            if known:
                seen.extend(codes)
            if known and all(c == ErrorCode.none for c in codes):
                break
            time.sleep(0.05)
    finally:
        w.close()
    assert seen and seen[-4:] == [ErrorCode.none] * 4
    assert set(seen) <= {ErrorCode.none, ErrorCode.not_leader_or_follower}
