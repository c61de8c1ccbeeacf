"""PartitionStateMachine: Kafka's partition states and leader elections, for the controller.

A partition is, as in Kafka's PartitionStateMachine:

- NonExistentPartition: not in any topic's assignment (never created, or deleted);
- NewPartition: assigned (``/brokers/topics/<t>``), no state znode yet;
- OnlinePartition: a state znode whose leader is a live broker;
- OfflinePartition: a state znode whose leader is dead (or -1).

Transitions the controller runs here (its thread, at the end of an event the
ControllerBrokerRequestBatch sends what they wrote):

- NewPartition -> OnlinePartition (``new_partitions``): the first live replica leads,
  the live replicas are the ISR (all replicas, led by none, when none is live);
- OnlinePartition/OfflinePartition -> OnlinePartition on a broker change
  (``broker_change``, Kafka's onBrokerFailure / onBrokerStartup): the offline
  partition leader election (the first live in-sync replica; with
  unclean.leader.election.enable a live out-of-sync replica; otherwise leader -1 and
  the ISR kept so a returning member can lead), dead brokers leave the ISR. Either
  change writes the next leader epoch (Kafka's LeaderAndIsr.newLeaderAndIsr).

The other elections Kafka names live beside it: the preferred replica and unclean
elections of ElectLeaders in ``election.py``, the controlled shutdown election in
``replica_state_machine.py`` (OfflineReplica), the reassignment election in
``reassignment.py``.

The work is linear in the partitions that change and costs a few ZooKeeper round trips
whatever their number: the states are read in one pipelined batch, the new ones
written in one pipelined batch of conditional writes, and only those that lost a race
(a leader changed its ISR meanwhile) are read and decided again.
"""

from __future__ import annotations

import enum
import logging

from ..zk.znodes import LeaderAndIsr

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ATTEMPTS = 3  # a conditional write that lost a race: re-read and decide again


class PartitionState(enum.Enum):
    NonExistentPartition = "NonExistentPartition"
    NewPartition = "NewPartition"
    OnlinePartition = "OnlinePartition"
    OfflinePartition = "OfflinePartition"


def partition_state(assigned: bool, state: LeaderAndIsr | None, live: set[int]) -> PartitionState:
    """Which of Kafka's partition states a partition is in."""
    if not assigned:
        return PartitionState.NonExistentPartition
    if state is None:
        return PartitionState.NewPartition
    if state.leader in live:
        return PartitionState.OnlinePartition
    return PartitionState.OfflinePartition


def new_partition_leader_election(
    replicas: list[int], live: set[int], controller_epoch: int
) -> LeaderAndIsr:
    """NewPartition -> OnlinePartition: the first live replica leads, the live replicas
    are the ISR (no live replica: leader -1, every replica in the ISR)."""
    alive = [b for b in replicas if b in live]
    return LeaderAndIsr(
        leader=alive[0] if alive else -1,
        leader_epoch=0,
        isr=alive if alive else list(replicas),
        controller_epoch=controller_epoch,
    )


def offline_partition_leader_election(
    state: LeaderAndIsr, replicas, live: set[int], unclean_ok, epoch: int
):
    """A broker change: (new state or None when nothing changes, unclean?)."""
    live_isr = [b for b in state.isr if b in live]
    leader, isr, unclean = state.leader, list(state.isr), False
    if state.leader not in live:
        if live_isr:
            leader, isr = live_isr[0], live_isr
        elif any(b in live for b in replicas) and unclean_ok():
            leader = next(b for b in replicas if b in live)
            isr, unclean = [leader], True
        else:
            leader = -1  # offline: the ISR is kept so a returning member can lead
    elif len(live_isr) != len(state.isr) and live_isr:
        isr = live_isr
    if leader == state.leader and isr == state.isr:
        return None, False
    new = LeaderAndIsr(  # a new leader or a smaller ISR: a new leader epoch, as Kafka's
        leader=leader,  # LeaderAndIsr.newLeaderAndIsr (followers and clients see the change)
        leader_epoch=state.leader_epoch + 1,
        isr=isr,
        controller_epoch=epoch,
        zk_version=state.zk_version,
    )
    return new, unclean


def new_partitions(controller, topic: str) -> None:
    """NewPartition -> OnlinePartition for every partition of ``topic`` that has no
    state yet."""
    zk = controller.zk
    assignment = zk.get_topic_assignment(topic)
    if assignment is None:
        return
    live = controller.live_brokers()
    existing = zk.get_topic_partition_states(topic)
    missing = {
        partition: new_partition_leader_election(replicas, live, controller.epoch)
        for partition, replicas in assignment.partitions.items()
        if partition not in existing
    }
    if missing:
        zk.create_partition_states(topic, missing)
        log.info("created state for %d partition(s) of %s", len(missing), topic)


def broker_change(controller, keys: list[TopicPartition], live: set[int]) -> int:
    """Elect and write the states of ``keys`` after brokers came or went (Kafka's
    triggerOnlinePartitionStateChange); the number of partitions changed."""
    zk, ctx = controller.zk, controller.ctx
    unclean_cache: dict[str, bool] = {}

    def unclean_ok(topic):
        return lambda: unclean_cache.setdefault(topic, controller.unclean_allowed(topic))

    changed, pending = 0, list(keys)
    for _attempt in range(ATTEMPTS):
        decided = {}
        for key, state in zk.get_partition_states(pending).items():
            new, unclean = offline_partition_leader_election(
                state, ctx.replicas(key), live, unclean_ok(key[0]), controller.epoch
            )
            if new is not None:
                decided[key] = (state, new, unclean)
        written = zk.update_partition_states({k: new for k, (_s, new, _u) in decided.items()})
        for key, version in written.items():
            if version is not None:
                changed += 1
                _log(controller, key, *decided[key])
        pending = [k for k, v in written.items() if v is None]
        if not pending:
            break
    return changed


def _log(controller, key: TopicPartition, state, new, unclean) -> None:
    topic, partition = key
    if unclean:
        controller.unclean_elections += 1
        log.warning(
            "%s-%d: UNCLEAN leader election: broker %d (out of sync) leads at epoch %d; "
            "records acknowledged only by %s may be lost (unclean elections so far: %d)",
            topic,
            partition,
            new.leader,
            new.leader_epoch,
            state.isr,
            controller.unclean_elections,
        )
    elif new.leader != state.leader:
        log.info(
            "%s-%d: leader %d -> %d (epoch %d, ISR %s)",
            topic,
            partition,
            state.leader,
            new.leader,
            new.leader_epoch,
            new.isr,
        )
    else:
        log.debug("%s-%d: ISR %s -> %s (brokers left)", topic, partition, state.isr, new.isr)
