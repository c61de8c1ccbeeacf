"""The ReplicaManager's partition counts (Kafka's ReplicaManager gauges), kept between
changes.

Walking 10,000 partitions on every metrics scrape was most of a scrape's cost. The
counts change only when a partition's state does: a LeaderAndIsr applied, a replica
stopped, an ISR change written, a log dir gone offline, a topic's config altered. The
ReplicaManager calls ``changed()`` at each of those; the next ``get()`` walks the
partitions once and the scrapes after it reuse the result until the next change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .manager import ReplicaManager


class Counts(NamedTuple):
    hosted: int = 0  # PartitionCount
    leaders: int = 0  # LeaderCount
    under_replicated: int = 0  # UnderReplicatedPartitions: led, ISR < replicas
    under_min_isr: int = 0  # UnderMinIsrPartitionCount: led, ISR < min.insync.replicas
    at_min_isr: int = 0  # AtMinIsrPartitionCount: led, ISR = min.insync.replicas
    offline: int = 0  # OfflineReplicaCount: no log, or its log dir is offline


class PartitionCounts:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        self._counts: Counts | None = None

    def changed(self) -> None:
        self._counts = None

    def get(self) -> Counts:
        if self._counts is None:
            self._counts = self._count()
        return self._counts

    def _count(self) -> Counts:
        hosted = leaders = under = under_min = at_min = offline = 0
        for part in list(self.replicas.partitions.values()):
            state = part.state
            if state is None:
                continue
            hosted += 1
            lg = part.log
            if lg is None or lg.offline:
                offline += 1
            elif part.is_leader:
                leaders += 1
                isr = len(state.isr)
                if isr < len(state.replicas):
                    under += 1
                min_isr = lg.config.min_insync_replicas
                if isr < min_isr:
                    under_min += 1
                elif isr == min_isr:
                    at_min += 1
        return Counts(hosted, leaders, under, under_min, at_min, offline)
