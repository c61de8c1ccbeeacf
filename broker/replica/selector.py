"""Replica selectors (KIP-392, fetch from follower): which replica a consumer should
read a partition from, told to it as ``preferred_read_replica`` in the leader's Fetch
response (v11+).

Kafka loads ``replica.selector.class`` as a Java class; we cannot, so the classes Kafka
ships are known here by their names:

- unset (Kafka's default, null), or ``org.apache.kafka.common.replica.LeaderSelector``:
  consumers read from the leader;
- ``org.apache.kafka.common.replica.RackAwareReplicaSelector``: a replica in the
  consumer's rack (its ``client.rack``, the Fetch request's rack_id), the leader when it
  is in that rack, else the most caught-up one there (the highest log end offset, then
  the shortest time since it was last caught up); the leader when the consumer has no
  rack or no replica is in it.

The leader offers only the replicas Kafka offers: in the ISR, alive, and holding the
fetch offset (log start <= offset <= log end).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """Kafka's ReplicaView: what a selector knows of one replica."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


def _most_caught_up(view: ReplicaView) -> tuple[int, int]:
    """Kafka's ReplicaView.comparator: higher log end offset first, then the one
    caught up most recently."""
    return (view.log_end_offset, -view.time_since_caught_up_ms)


def select_rack_aware(rack: str, leader: ReplicaView, replicas: list[ReplicaView]) -> ReplicaView:
    """Kafka's RackAwareReplicaSelector: ``replicas`` includes the leader."""
    if not rack:
        return leader
    same_rack = [r for r in replicas if r.rack == rack]
    if not same_rack:
        return leader
    if leader in same_rack:
        return leader
    return max(same_rack, key=_most_caught_up)


Selector = Callable[[str, ReplicaView, list[ReplicaView]], ReplicaView]

#: replica.selector.class values we honour -> the selector (None: leader only)
SELECTORS: dict[str, Selector | None] = {
    LEADER_SELECTOR: None,
    RACK_AWARE_SELECTOR: select_rack_aware,
}


def selector_for(class_name: str | None) -> Selector | None:
    """The selector ``replica.selector.class`` names (None: consumers read from the
    leader). ValueError for a class we do not have, naming the ones we do."""
    if class_name is None or not class_name.strip():
        return None
    name = class_name.strip()
    if name not in SELECTORS:
        raise ValueError(
            f"Quill cannot load Java classes; the replica selectors it has are "
            f"{', '.join(sorted(SELECTORS))} (or leave it unset: consumers read from "
            f"the leader)"
        )
    return SELECTORS[name]
