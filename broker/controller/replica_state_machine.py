"""ReplicaStateMachine: Kafka's replica states, for the controller.

A replica (a broker's copy of a partition) is, as in Kafka's ReplicaStateMachine:

- NewReplica: assigned (a new topic, or a reassignment's adding replica), before its
  broker took the LeaderAndIsr;
- OnlineReplica: its broker is live and was sent the partition's LeaderAndIsr;
- OfflineReplica: its broker stops (controlled shutdown) or lost the replica's log dir:
  it leaves the leadership and the ISR (``make_offline``), at the next leader epoch;
- ReplicaDeletionStarted: no longer assigned (its topic deleted, or reassigned away):
  the ControllerBrokerRequestBatch sends it StopReplica with delete_partition and the
  deletion sentinel epoch -2; then NonExistentReplica.

Here: OnlineReplica -> OfflineReplica, with Kafka's controlled shutdown partition
leader election (the leadership goes to the next live in-sync replica; a partition
with no other live in-sync replica stays as it is).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from ..zk.znodes import LeaderAndIsr

if TYPE_CHECKING:
    from .controller import Controller

TopicPartition = tuple[str, int]


class ReplicaState(enum.Enum):
    NewReplica = "NewReplica"
    OnlineReplica = "OnlineReplica"
    OfflineReplica = "OfflineReplica"
    ReplicaDeletionStarted = "ReplicaDeletionStarted"
    ReplicaDeletionSuccessful = "ReplicaDeletionSuccessful"
    ReplicaDeletionIneligible = "ReplicaDeletionIneligible"
    NonExistentReplica = "NonExistentReplica"


def make_offline(
    controller: Controller, broker_id: int, keys: list[TopicPartition]
) -> dict[TopicPartition, int | None]:
    """The replicas of ``broker_id`` in ``keys`` become OfflineReplica: out of the
    leadership and ISR where another live in-sync replica can take over;
    {key: new zk version, or None when a conditional write lost a race}."""
    live = controller.live_brokers()
    updates = {}
    for key, state in controller.zk.get_partition_states(keys).items():
        new = controlled_shutdown_leader_election(state, broker_id, live, controller.epoch)
        if new is not None:
            updates[key] = new
    return controller.zk.update_partition_states(updates)


def controlled_shutdown_leader_election(
    state: LeaderAndIsr, broker_id: int, live: set[int], epoch: int
) -> LeaderAndIsr | None:
    """``state`` with ``broker_id`` out of the leadership and the ISR, the leadership
    going to the next live in-sync replica; None when no live in-sync replica is left
    to take over (the partition stays as it is)."""
    if broker_id not in (state.leader, *state.isr):
        return None
    others = [b for b in state.isr if b != broker_id and b in live]
    if not others:
        return None
    moved = state.leader == broker_id
    return LeaderAndIsr(  # a new leader epoch either way (Kafka's removeReplicasFromIsr)
        leader=others[0] if moved else state.leader,
        leader_epoch=state.leader_epoch + 1,
        isr=others if moved else [b for b in state.isr if b != broker_id],
        controller_epoch=epoch,
        zk_version=state.zk_version,
    )
