"""Partition reassignment (KIP-455 on ZooKeeper), run by the controller.

For a target replica set TRS of a partition whose replicas are ORS:
1. the assignment becomes ORS + TRS, with ``adding_replicas`` (TRS - ORS) and
   ``removing_replicas`` (ORS - TRS) in ``/brokers/topics/<t>``: new replicas start
   following;
2. once every TRS member is in the ISR, leadership moves into TRS if needed, the ISR
   drops the removed replicas, the assignment becomes TRS and the removed replicas
   delete their logs;
3. the partition leaves ``/admin/reassign_partitions`` (the znode goes when empty).

Progress is kept in ZooKeeper, so a new controller resumes where the old one stopped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kazoo.exceptions import NoNodeError

from ..protocol.errors import ErrorCode
from ..zk.znodes import LeaderAndIsr, ReassignPartitionsZNode

if TYPE_CHECKING:
    from .controller import Controller

log = logging.getLogger(__name__)
REASSIGN_PATH = ReassignPartitionsZNode.path
RESTORE_ATTEMPTS = 10  # conditional writes of the state a cancel restores
TopicPartition = tuple[str, int]


class Reassigner:
    def __init__(self, controller: Controller) -> None:
        self.c = controller
        self.pending: dict[TopicPartition, list[int]] = {}

    # -- requests -------------------------------------------------------------------------
    def submit(
        self, requests: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        zk, live = self.c.zk, self.c.live_brokers()
        results = {}
        for (topic, partition), target in requests.items():
            assignment = zk.get_topic_assignment(topic)
            if assignment is None or partition not in assignment.partitions:
                results[(topic, partition)] = (
                    ErrorCode.unknown_topic_or_partition,
                    f"{topic}-{partition} does not exist.",
                )
                continue
            adding = assignment.adding_replicas.get(partition, [])
            original = [b for b in assignment.partitions[partition] if b not in adding]
            if target is None:
                results[(topic, partition)] = self._cancel(topic, partition, assignment, original)
                continue
            problem = self._invalid(target, live)
            if problem:
                results[(topic, partition)] = (ErrorCode.invalid_replica_assignment, problem)
                continue
            assignment.partitions[partition] = original + [b for b in target if b not in original]
            assignment.adding_replicas[partition] = [b for b in target if b not in original]
            assignment.removing_replicas[partition] = [b for b in original if b not in target]
            for d in (assignment.adding_replicas, assignment.removing_replicas):
                if not d[partition]:
                    del d[partition]
            zk.set_topic_assignment(topic, assignment)
            self.pending[(topic, partition)] = list(target)
            log.info("reassignment of %s-%d: %s -> %s started", topic, partition, original, target)
            results[(topic, partition)] = (ErrorCode.none, None)
        self._write_request_znode()
        return results

    @staticmethod
    def _invalid(target: list[int], live: set[int]) -> str | None:
        if not target:
            return "The target replica list is empty."
        if len(set(target)) != len(target):
            return f"Duplicate brokers in the target replicas {target}."
        unknown = [b for b in target if b not in live]
        if unknown:
            return f"Unknown or offline broker(s) {unknown} in the target replicas {target}."
        return None

    def _cancel(self, topic, partition, assignment, original) -> tuple[ErrorCode, str | None]:
        if (
            (topic, partition) not in self.pending
            and partition not in assignment.adding_replicas
            and partition not in assignment.removing_replicas
        ):
            return (
                ErrorCode.no_reassignment_in_progress,
                f"No reassignment in progress for {topic}-{partition}.",
            )
        self._restore_state(topic, partition, original)
        assignment.partitions[partition] = original
        assignment.adding_replicas.pop(partition, None)
        assignment.removing_replicas.pop(partition, None)
        self.c.zk.set_topic_assignment(topic, assignment)
        self.pending.pop((topic, partition), None)
        log.info("reassignment of %s-%d cancelled; replicas back to %s", topic, partition, original)
        return ErrorCode.none, None

    def _restore_state(self, topic: str, partition: int, original: list[int]) -> None:
        """On cancel, as Kafka: the added replicas leave the ISR, and a leader that is not
        one of the original replicas hands over to an in-sync original one (if any is
        live; otherwise the partition has no leader until one comes back). The write is
        conditional: when the leader's own ISR write lands between our read and it, read
        again and decide again (Kafka's controller retries the same way)."""
        for _ in range(RESTORE_ATTEMPTS):
            state = self.c.zk.get_partition_state(topic, partition)
            if state is None:
                return
            isr = [b for b in state.isr if b in original]
            leader = state.leader
            if leader not in original:
                live = self.c.live_brokers()
                leader = next((b for b in isr if b in live), -1)
            # written even when leader and ISR stay: the next leader epoch fences the
            # replicas the cancel takes away (a leader keeps a follower of its epoch fetching)
            new = LeaderAndIsr(
                leader,
                state.leader_epoch + 1,  # a new ISR is a new epoch: the removed are fenced
                isr or list(state.isr),
                self.c.epoch,
                state.zk_version,
            )
            if self.c.zk.update_partition_state(topic, partition, new) is not None:
                return
        log.warning(
            "cancelling the reassignment of %s-%d: its state changed under every one of "
            "%d writes; the added replicas may still be in its ISR",
            topic,
            partition,
            RESTORE_ATTEMPTS,
        )

    def from_znode(self) -> None:
        try:
            data, _ = self.c.client.get(REASSIGN_PATH)
        except NoNodeError:
            return
        wanted = {
            k: v
            for k, v in ReassignPartitionsZNode.decode(data).items()
            if self.pending.get(k) != v
        }
        if wanted:
            for key, (code, message) in self.submit(wanted).items():
                if code != ErrorCode.none:
                    log.error("reassignment of %s-%d refused: %s", key[0], key[1], message)

    def resume(self) -> None:
        """A new controller: pick up reassignments recorded in the topic znodes."""
        for topic in self.c.zk.get_all_topics():
            assignment = self.c.zk.get_topic_assignment(topic)
            if assignment is None:
                continue
            for partition in set(assignment.adding_replicas) | set(assignment.removing_replicas):
                removing = assignment.removing_replicas.get(partition, [])
                self.pending[(topic, partition)] = [
                    b for b in assignment.partitions[partition] if b not in removing
                ]

    def listing(self) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        out = {}
        for topic, partition in self.pending:
            assignment = self.c.zk.get_topic_assignment(topic)
            if assignment is not None:
                out[(topic, partition)] = (
                    assignment.partitions.get(partition, []),
                    assignment.adding_replicas.get(partition, []),
                    assignment.removing_replicas.get(partition, []),
                )
        return out

    # -- progress (controller thread, on a timer) -----------------------------------------
    def tick(self) -> None:
        done = [
            key for key, target in list(self.pending.items()) if self._try_complete(key, target)
        ]
        for key in done:
            self.pending.pop(key, None)
        if done:
            self._write_request_znode()

    def _try_complete(self, key: TopicPartition, target: list[int]) -> bool:
        topic, partition = key
        zk = self.c.zk
        state = zk.get_partition_state(topic, partition)
        assignment = zk.get_topic_assignment(topic)
        if state is None or assignment is None:
            return True  # the topic went away
        if not all(b in state.isr for b in target):
            return False
        live = self.c.live_brokers()
        leader = state.leader
        if leader not in target:
            leader = next((b for b in target if b in state.isr and b in live), -1)
            if leader < 0:
                return False
        # As Kafka's controller on completion: the leader epoch moves on even when the
        # leader stays, so the removed replicas' fetches and anything that still names the
        # old replica set are fenced (FENCED_LEADER_EPOCH) rather than answered.
        new_isr = [b for b in state.isr if b in target]
        new = LeaderAndIsr(leader, state.leader_epoch + 1, new_isr, self.c.epoch, state.zk_version)
        if zk.update_partition_state(topic, partition, new) is None:
            return False
        assignment.partitions[partition] = list(target)
        assignment.adding_replicas.pop(partition, None)
        assignment.removing_replicas.pop(partition, None)
        zk.set_topic_assignment(topic, assignment)
        log.info(
            "reassignment of %s-%d completed: replicas %s, leader %d",
            topic,
            partition,
            target,
            leader,
        )
        return True

    def _write_request_znode(self) -> None:
        client = self.c.client
        try:
            if self.pending:
                if client.exists(REASSIGN_PATH):
                    client.set(REASSIGN_PATH, ReassignPartitionsZNode.encode(self.pending))
                else:
                    client.create(
                        REASSIGN_PATH, ReassignPartitionsZNode.encode(self.pending), makepath=True
                    )
            elif client.exists(REASSIGN_PATH):
                client.delete(REASSIGN_PATH)
        except NoNodeError:
            pass
