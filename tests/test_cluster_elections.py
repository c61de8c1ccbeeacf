"""Preferred-replica election: on demand (ElectLeaders, /admin/preferred_replica_election)
and automatic (auto.leader.rebalance.enable)."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster_helpers import FAST, partition_state
from tests.wait_helpers import wait_until

pytestmark = pytest.mark.cluster


def _elect(admin, partitions, attempts: int = 3):
    """ElectLeaders, retried on NOT_CONTROLLER as Kafka's own admin client does: right
    after a controller move, librdkafka may still address the old one."""
    for attempt in range(attempts):
        try:
            return admin.elect_leaders(ElectionType.PREFERRED, partitions).result(30)
        except Exception as exc:  # noqa: BLE001
            if attempt == attempts - 1 or "NOT_CONTROLLER" not in str(exc):
                raise
            time.sleep(1.0)


def _move_leadership_off_preferred(cluster, topic):
    """Kill and restart the preferred leader of partition 0; return it."""
    preferred = partition_state(cluster, topic, 0)["leader"]
    cluster.broker(preferred).kill()
    wait_until(
        lambda: partition_state(cluster, topic, 0)["leader"] not in (-1, preferred), what="failover"
    )
    cluster.broker(preferred).start()
    wait_until(
        lambda: preferred in partition_state(cluster, topic, 0)["isr"], what="preferred back in ISR"
    )
    return preferred


def _topic(cluster, partitions=3):
    name = f"elect-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    wait_until(
        lambda: all(len(partition_state(cluster, name, p)["isr"]) == 3 for p in range(partitions)),
        what="ISR",
    )
    return name, admin


def test_elect_leaders_api_and_znode(cluster_factory):
    cluster = cluster_factory(3, **FAST, **{"auto.leader.rebalance.enable": "false"})
    topic, admin = _topic(cluster)
    preferred = _move_leadership_off_preferred(cluster, topic)
    assert partition_state(cluster, topic, 0)["leader"] != preferred
    result = _elect(admin, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    assert result[TopicPartition(topic, 0)] is None
    err = result[TopicPartition(topic, 1)]
    assert err is not None and err.name() == "ELECTION_NOT_NEEDED"
    assert partition_state(cluster, topic, 0)["leader"] == preferred

    preferred = _move_leadership_off_preferred(cluster, topic)
    zk = cluster.zk_client()
    zk.create(
        "/admin/preferred_replica_election",
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0}]}).encode(),
    )
    wait_until(
        lambda: partition_state(cluster, topic, 0)["leader"] == preferred,
        what="znode-driven election",
    )
    wait_until(
        lambda: zk.exists("/admin/preferred_replica_election") is None, what="request znode removed"
    )


def test_auto_leader_rebalance(cluster_factory):
    cluster = cluster_factory(3, **FAST, **{"leader.imbalance.check.interval.seconds": "1"})
    topic, _admin = _topic(cluster, partitions=1)
    preferred = _move_leadership_off_preferred(cluster, topic)
    wait_until(
        lambda: partition_state(cluster, topic, 0)["leader"] == preferred,
        timeout=30,
        what="automatic rebalance",
    )
