"""Helpers for the operations tests (reassignment, elections, throttles, compaction):
ZooKeeper reads with Kafka's paths, and dynamic configs through confluent-kafka."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kazoo.exceptions import NoNodeError

from broker.zk.znodes import ControllerZNode, TopicPartitionStateZNode, TopicZNode
from tests.wait_helpers import wait_until


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _zk(cluster):
    """One ZooKeeper client per cluster for these reads: ``zk_client()`` starts a new
    session on every call, and a wait polling every 0.1 s would open hundreds of them
    (ZooKeeper takes 60 connections per client address by default)."""
    client = getattr(cluster, "_ops_zk", None)
    if client is None or client not in cluster._zk_clients:  # none yet, or stopped with it
        client = cluster._ops_zk = cluster.zk_client()
    return client


def read_controller(zk) -> int | None:
    """The controller's broker id, None while there is none: a killed controller's
    /controller vanishes when its session expires, so a wait must read it as "not yet"."""
    try:
        data, _ = zk.get(ControllerZNode.path)
    except NoNodeError:
        return None
    return ControllerZNode.decode(data)


def controller_id(cluster) -> int | None:
    return read_controller(_zk(cluster))


def assignment(cluster, topic: str) -> dict:
    data, _ = _zk(cluster).get(TopicZNode.path(topic))
    return json.loads(data)


def state(cluster, topic: str, partition: int) -> dict:
    data, _ = _zk(cluster).get(TopicPartitionStateZNode.path(topic, partition))
    return json.loads(data)


def alter_configs(bootstrap: str, kind: str, name: str, configs: dict[str, str | None]) -> None:
    """Incremental SET (a value) or DELETE (None) of ``configs`` on one broker or topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(
        ConfigResource.Type.BROKER if kind == "broker" else ConfigResource.Type.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry(
                key,
                value,
                incremental_operation=AlterConfigOpType.SET
                if value is not None
                else AlterConfigOpType.DELETE,
            )
            for key, value in configs.items()
        ],
    )
    admin.incremental_alter_configs([res])[res].result(30)


def described(bootstrap: str, kind: str, name: str, key: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(
        ConfigResource.Type.BROKER if kind == "broker" else ConfigResource.Type.TOPIC, name
    )
    entry = admin.describe_configs([res])[res].result(30).get(key)
    return None if entry is None or entry.value is None else entry.value


def create_topic(
    cluster, prefix: str, replicas: list[list[int]], records: int = 0, one_per_batch: bool = False
) -> str:
    """A topic with this replica assignment, every replica in sync; ``records`` values of
    1000 zero bytes in partition 0 (acks=all); ``one_per_batch``: each record its own
    batch, so a follower's fetch (at least one whole batch) cannot take them all at once."""
    topic = unique(prefix)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, num_partitions=len(replicas), replica_assignment=replicas)
    admin.create_topics([new])[topic].result(30)
    wait_until(
        lambda: all(
            sorted(state(cluster, topic, p)["isr"]) == sorted(r) for p, r in enumerate(replicas)
        ),
        what=f"{topic}'s replicas in sync",
    )
    if records:
        config = {"bootstrap.servers": cluster.bootstrap, "acks": "all"}
        if one_per_batch:
            config |= {"batch.num.messages": 1, "linger.ms": 0}
        producer = Producer(config)
        for _ in range(records):
            producer.produce(topic, value=bytes(1000), partition=0)
        assert producer.flush(30) == 0
    return topic
