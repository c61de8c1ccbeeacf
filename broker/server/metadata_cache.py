"""MetadataCache: live brokers, topics and partition states, as this broker knows them.

Every broker answers Metadata from this cache, so clients can bootstrap from any of
them. It is fed by ``ClusterSync`` (ZooKeeper watches) and read on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol.internal_topics import INTERNAL_TOPICS
from ..replica.partition import PartitionState
from ..zk.znodes import BrokerInfo

__all__ = ["INTERNAL_TOPICS", "MetadataCache", "TopicMeta"]


@dataclass
class TopicMeta:
    name: str
    topic_id: str
    replicas: dict[int, list[int]]
    states: dict[int, PartitionState] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicMeta] = {}

    def alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def topic(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    def leader_of(self, topic: str, partition: int) -> int:
        meta = self.topics.get(topic)
        if meta is None or partition not in meta.states:
            return -1
        return meta.states[partition].leader

    def topic_by_id(self, topic_id: str) -> TopicMeta | None:
        for meta in self.topics.values():
            if meta.topic_id == topic_id:
                return meta
        return None
