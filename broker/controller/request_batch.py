"""ControllerBrokerRequestBatch: what one controller event changed, sent once at its end.

As Kafka's ControllerBrokerRequestBatch: while an event runs, the controller marks the
partitions whose state it wrote, the topics whose assignment it wrote (created,
reassigned, deleted), the partitions whose metadata it learned of (ISR notifications),
and the brokers that joined. At the end of the event ``send`` turns that into:

- LeaderAndIsr to the replicas of the changed partitions (every partition it hosts to
  a broker that just joined);
- UpdateMetadata to every live broker with only the changed partitions, as Kafka's
  ``sendUpdateMetadataRequest(brokers, partitions)``; a broker that just (re)joined, or
  every broker after a controller election, gets the full metadata. A deleted
  topic's partitions travel with Kafka's deletion sentinel leader -2
  (LeaderDuringDelete), so brokers drop them from their metadata cache;
- StopReplica (delete) to replicas that lost a partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..zk.znodes import LeaderAndIsr
from .context import ControllerContext

if TYPE_CHECKING:
    from .controller import Controller

TopicPartition = tuple[str, int]

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = (4, 4), (5, 3), (6, 7)  # (api key, version)


class ControllerBrokerRequestBatch:
    def __init__(self) -> None:
        self.partitions: set[TopicPartition] = set()  # state written: LeaderAndIsr + metadata
        #: the states this event wrote, as written (new zk version): no read back needed
        self.written: dict[TopicPartition, LeaderAndIsr] = {}
        self.topics: set[str] = set()  # assignment written, created or deleted
        self.metadata: set[TopicPartition] = set()  # states learned of: metadata only
        self.new_brokers: set[int] = set()  # joined: everything, the full metadata first
        self.brokers_changed = False  # the live broker list every broker gets changed
        # brokers sent the full metadata at controller epoch ``synced_epoch``: the first
        # UpdateMetadata of an epoch to a broker is always the full one (brokers rely on it)
        self.synced: set[int] = set()
        self.synced_epoch: int | None = None

    def __bool__(self) -> bool:
        return bool(self.partitions or self.topics or self.metadata or self.brokers_changed)

    # -- marking (the controller thread, during an event) -----------------------------------
    def partitions_changed(self, keys) -> None:
        self.partitions.update(keys)

    def states_written(self, states: dict[TopicPartition, LeaderAndIsr]) -> None:
        """States this event wrote (with their new zk version): sent as written, as
        Kafka's controller updates its context with what it wrote."""
        self.written.update(states)
        self.partitions.update(states)

    def states_lost(self, keys) -> None:
        """Conditional writes that lost a race: what this event wrote of them before is
        stale (a partition already marked is read afresh at the send)."""
        for key in keys:
            self.written.pop(key, None)

    def topics_changed(self, topics) -> None:
        self.topics.update(topics)

    def metadata_changed(self, keys) -> None:
        self.metadata.update(keys)

    def brokers_joined(self, brokers) -> None:
        self.new_brokers.update(brokers)
        self.brokers_changed = True

    def live_brokers_changed(self) -> None:
        self.brokers_changed = True

    def clear(self) -> None:
        self.partitions.clear()
        self.written.clear()
        self.topics.clear()
        self.metadata.clear()
        self.new_brokers.clear()
        self.brokers_changed = False

    # -- sending (the end of the event) -----------------------------------------------------
    def send(self, controller: Controller) -> None:
        ctx, cid, epoch = controller.ctx, controller.broker_id, controller.epoch
        before = {t: ctx.assign[t] for t in self.topics if t in ctx.assign}
        dropped = ctx.refresh_topics(sorted(self.topics))
        deleted = {  # Kafka's LeaderDuringDelete in the metadata of every broker
            (t, p): old.topic_id
            for t, old in before.items()
            if t not in ctx.assign
            for p in old.partitions
        }
        keys = set(self.partitions)
        for topic in self.topics:
            assignment = ctx.assign.get(topic)
            keys |= {(topic, p) for p in (assignment.partitions if assignment else {})}
        # a joining broker gets every partition: read them all afresh (leaders change
        # ISRs without the controller, which hears of it a few seconds later)
        if self.new_brokers:
            ctx.refresh_states(list(ctx.states))
        else:
            ctx.states.update((k, v) for k, v in self.written.items() if k[0] in ctx.assign)
            ctx.refresh_states(self.partitions.difference(self.written))
        new = self.new_brokers & set(ctx.brokers)
        if self.synced_epoch != epoch:
            self.synced, self.synced_epoch = set(), epoch
        unsynced = new | (set(ctx.brokers) - self.synced)
        if unsynced:
            # as Kafka's onBrokerStartup: metadata before LeaderAndIsr, so that a broker
            # asked about a partition it will host says NOT_LEADER_OR_FOLLOWER meanwhile
            full = ctx.update_metadata(cid, epoch, None, deleted)
            for broker in unsynced:
                controller.send_request(broker, *UPDATE_METADATA, full, "update_metadata")
            self.synced |= unsynced
        requests = ctx.leader_and_isr(keys, cid, epoch)
        if new:
            everything = ctx.leader_and_isr(list(ctx.states), cid, epoch)
            requests.update({b: everything[b] for b in new if b in everything})
        for broker, body in requests.items():
            controller.send_request(broker, *LEADER_AND_ISR, body)
        others = set(ctx.brokers) - unsynced
        changed = keys | self.metadata
        partial = ctx.update_metadata(cid, epoch, changed, deleted) if others else None
        if partial is not None and (partial["topic_states"] or self.brokers_changed):
            for broker in others:
                controller.send_request(broker, *UPDATE_METADATA, partial, "update_metadata")
        for broker, parts in dropped.items():
            body = ControllerContext.stop_replica(parts, cid, epoch)
            controller.send_request(broker, *STOP_REPLICA, body)
