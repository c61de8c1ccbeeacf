"""Helpers for the operations tests (reassignment, elections, throttles, compaction):
ZooKeeper reads with Kafka's paths, and dynamic configs through confluent-kafka."""

from __future__ import annotations

import json
import uuid

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from broker.zk.znodes import ControllerZNode, TopicPartitionStateZNode, TopicZNode


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def controller_id(cluster) -> int:
    data, _ = cluster.zk_client().get(ControllerZNode.path)
    return ControllerZNode.decode(data)


def assignment(cluster, topic: str) -> dict:
    data, _ = cluster.zk_client().get(TopicZNode.path(topic))
    return json.loads(data)


def state(cluster, topic: str, partition: int) -> dict:
    data, _ = cluster.zk_client().get(TopicPartitionStateZNode.path(topic, partition))
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
