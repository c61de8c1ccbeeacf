"""Brokers came or went: new leaders and ISRs for the partitions they replicate.

Kafka's onBrokerFailure / onBrokerStartup with its partition state machine: for every
partition a changed broker replicates, move leadership off dead brokers, drop them
from ISRs, and bring offline partitions back when an in-sync replica returns. The
work is linear in those partitions and costs a few ZooKeeper round trips whatever
their number: the states are read in one pipelined batch, the new ones written in one
pipelined batch of conditional writes, and only those that lost a race (a leader
changed its ISR meanwhile) are read and decided again.
"""

from __future__ import annotations

import logging

from ..zk.znodes import LeaderAndIsr

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
ATTEMPTS = 3  # a conditional write that lost a race: re-read and decide again


def decide(state: LeaderAndIsr, replicas, live: set[int], unclean_ok, epoch: int):
    """(new state or None when nothing changes, unclean?)"""
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
    new = LeaderAndIsr(
        leader=leader,
        leader_epoch=state.leader_epoch + (1 if leader != state.leader else 0),
        isr=isr,
        controller_epoch=epoch,
        zk_version=state.zk_version,
    )
    return new, unclean


def reconcile(controller, keys: list[TopicPartition], live: set[int]) -> int:
    """Decide and write the states of ``keys``; the number of partitions changed."""
    zk, ctx = controller.zk, controller.ctx
    unclean_cache: dict[str, bool] = {}

    def unclean_ok(topic):
        return lambda: unclean_cache.setdefault(topic, controller.unclean_allowed(topic))

    changed, pending = 0, list(keys)
    for _attempt in range(ATTEMPTS):
        decided = {}
        for key, state in zk.get_partition_states(pending).items():
            new, unclean = decide(
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
