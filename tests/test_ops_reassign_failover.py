"""Reassignments survive what operations meet: the controller killed mid-move (the new
controller resumes from ZooKeeper), and a destination broker that dies stalls only the
moves onto it; each finishes once its cause is gone."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import KafkaConnectionError

from tests.ops_helpers import alter_configs, assignment, controller_id, create_topic, described
from tests.wait_helpers import wait_until

pytestmark = pytest.mark.cluster

SETTINGS = {
    "zookeeper.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}


def _fill(cluster, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for _ in range(records):
        producer.produce(topic, value=bytes(1000), partition=0)
    assert producer.flush(30) == 0


def _throttle(cluster, broker: int, topic: str, rate: str | None) -> None:
    """Hold (or, with None, release) ``broker`` following partition 0 of ``topic``."""
    entry = f"0:{broker}" if rate is not None else None
    alter_configs(
        cluster.bootstrap, "topic", topic, {"follower.replication.throttled.replicas": entry}
    )
    alter_configs(
        cluster.bootstrap, "broker", str(broker), {"follower.replication.throttled.rate": rate}
    )
    if rate is not None:
        wait_until(
            lambda: described(cluster.bootstrap, "broker", str(broker),
                              "follower.replication.throttled.rate") == rate,
            what=f"broker {broker}'s throttle",
        )  # fmt: skip


def _admin(cluster) -> KafkaAdminClient:
    """kafka-python gives up on a dead bootstrap server: bootstrap from the live ones."""
    live = [b for b in cluster.brokers if b.alive()]
    return KafkaAdminClient(
        bootstrap_servers=",".join(b.address for b in live), request_timeout_ms=30000
    )


def _reassign(cluster, moves: dict[str, list[int]]) -> None:
    admin = _admin(cluster)
    try:
        request = {KTopicPartition(t, 0): r for t, r in moves.items()}
        assert admin.alter_partition_reassignments(request) == dict.fromkeys(request)
    finally:
        admin.close()


def _listing(cluster) -> dict:
    """ListPartitionReassignments; retried while kafka-python still tries a dead broker
    it knew from metadata."""
    for attempt in range(10):
        admin = _admin(cluster)
        try:
            return {tp.topic: r for tp, r in admin.list_partition_reassignments().items()}
        except KafkaConnectionError:
            if attempt == 9:
                raise
            time.sleep(1.0)
        finally:
            admin.close()
    raise AssertionError("unreachable")


def _done(cluster, topic: str, target: list[int]) -> bool:
    body = assignment(cluster, topic)
    return body["adding_replicas"] == {} and body["partitions"]["0"] == target


def test_new_controller_resumes_and_a_dead_destination_stalls_only_its_moves(cluster_factory):
    cluster = cluster_factory(3, **SETTINGS)
    c = controller_id(cluster)
    x, y = (b for b in (1, 2, 3) if b != c)

    # 1. the controller dies mid-move: its successor carries the move on
    moving = create_topic(cluster, "resume", [[x]], records=2000)
    _throttle(cluster, y, moving, "2000")
    _reassign(cluster, {moving: [x, y]})
    cluster.broker(c).kill()
    wait_until(lambda: controller_id(cluster) in (x, y), timeout=60, what="a new controller")
    wait_until(lambda: moving in _listing(cluster), timeout=60, what="the move to be listed")
    assert _listing(cluster)[moving]["adding_replicas"] == [y]
    _throttle(cluster, y, moving, None)
    wait_until(lambda: _done(cluster, moving, [x, y]), timeout=90, what="the resumed move")
    cluster.broker(c).start()

    # 2. a destination dies: only the moves onto it wait, and finish once it is back
    stalled = create_topic(cluster, "stalled", [[x]], records=2000)
    free = create_topic(cluster, "free", [[x]], records=200)
    _throttle(cluster, c, stalled, "2000")
    _reassign(cluster, {stalled: [x, c], free: [x, y]})
    cluster.broker(c).kill()
    wait_until(lambda: _done(cluster, free, [x, y]), timeout=90, what="the move onto a live broker")
    assert _listing(cluster)[stalled]["adding_replicas"] == [c]
    cluster.broker(c).start()
    _throttle(cluster, c, stalled, None)
    wait_until(lambda: _done(cluster, stalled, [x, c]), timeout=90, what="the stalled move")
