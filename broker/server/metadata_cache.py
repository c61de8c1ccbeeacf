"""MetadataCache: live brokers, topics and partition states, as this broker knows them.

Every broker answers Metadata from this cache, so clients can bootstrap from any of
them. The controller feeds it with UpdateMetadata (``update``), ``ClusterSync`` with the
controller's id (a ZooKeeper watch); it is read on the event loop.

As Kafka's MetadataCache, an UpdateMetadata names only the partitions that changed:
those are replaced, the others kept, and a partition whose leader is -2 (Kafka's
LeaderDuringDelete) is removed. The live broker list is always complete. The first
UpdateMetadata of a newer controller epoch is the new controller's full picture (it
sends everything to every broker on election), so topics it does not name are removed
too (deletions the old controller could not tell).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol.internal_topics import INTERNAL_TOPICS
from ..replica.partition import PartitionState
from ..zk.znodes import BrokerInfo

LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete

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
        self.metadata_epoch = -1  # the controller epoch of the last UpdateMetadata applied

    def update(
        self,
        controller_epoch: int,
        brokers: dict[int, BrokerInfo],
        topics: list[tuple[str, str, dict[int, PartitionState]]],
    ) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata: the live brokers, and ``topics`` as (name, topic id,
        {partition: state}); returns the partitions removed (deleted topics)."""
        removed = []
        if controller_epoch > self.metadata_epoch:  # a new controller: its full picture
            named = {name for name, _id, _states in topics}
            for name in [n for n in self.topics if n not in named]:
                removed.extend((name, p) for p in self.topics.pop(name).replicas)
        self.metadata_epoch = controller_epoch
        self.brokers = brokers
        for name, topic_id, states in topics:
            meta = self.topics.get(name)
            if meta is None or (topic_id and meta.topic_id != topic_id):
                if meta is not None:  # deleted and created again: the old one is gone
                    removed.extend((name, p) for p in meta.replicas if p not in states)
                meta = self.topics[name] = TopicMeta(name, topic_id, {})
            for partition, state in states.items():
                if state.leader == LEADER_DURING_DELETE:
                    if meta.replicas.pop(partition, None) is not None:
                        removed.append((name, partition))
                    meta.states.pop(partition, None)
                else:
                    meta.replicas[partition] = list(state.replicas)
                    meta.states[partition] = state
            if not meta.replicas:
                del self.topics[name]
        return removed

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
