"""The controller: one broker, elected through the ephemeral ``/controller`` znode.

Like Kafka's KafkaController it works through a single event thread (ZooKeeper
watches only enqueue events), so its decisions never race each other. It decides
partition leaders and writes ``/brokers/topics/<t>/partitions/<p>/state`` with
conditional writes, carrying its ``/controller_epoch``.

What it does today: elect itself, create the state of new topics and partitions,
carry out topic deletions, and move leadership off brokers that left when an in-sync
replica is alive (or bring an offline partition back when its in-sync replica
returns). Replication and ISR management grow here with the cluster issue.
"""

from __future__ import annotations

import logging
import queue
import threading

from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..zk.client import KafkaZkClient
from ..zk.znodes import (
    BrokerIdsZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    LeaderAndIsr,
    TopicsZNode,
    TopicZNode,
)

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, zk: KafkaZkClient, broker_id: int) -> None:
        self.zk = zk
        self.client = zk.zk
        self.broker_id = broker_id
        self.epoch: int | None = None
        self._events: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="controller", daemon=True)
        self._watching = False
        self._stopped = False
        self._topic_watches: set[str] = set()

    @property
    def is_active(self) -> bool:
        return self.epoch is not None

    def start(self) -> None:
        self._thread.start()
        DataWatch(self.client, ControllerZNode.path, lambda data, _s: self._events.put(("elect",)))
        self.client.add_listener(self._session_listener)

    def stop(self) -> None:
        self._stopped = True
        self._events.put(("stop",))
        self._thread.join(timeout=5)

    def _session_listener(self, state) -> None:
        if state == KazooState.LOST:
            self._events.put(("resign",))
        elif state == KazooState.CONNECTED:
            self._events.put(("elect",))

    # -- event thread --------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            event = self._events.get()
            if event[0] == "stop":
                return
            try:
                getattr(self, "_on_" + event[0])(*event[1:])
            except Exception:
                log.exception("controller event %s failed", event[0])

    def _on_resign(self) -> None:
        if self.epoch is not None:
            log.info("broker %d resigns as controller (ZooKeeper session lost)", self.broker_id)
        self.epoch = None

    def _on_elect(self) -> None:
        if self._stopped:
            return
        current = self.zk.get_controller_id()
        if current == self.broker_id and self.epoch is not None:
            return
        if current is not None and current != self.broker_id:
            self.epoch = None
            return
        epoch = self.zk.try_become_controller(self.broker_id)
        if epoch is None:
            return
        self.epoch = epoch
        log.info("broker %d is now the controller (epoch %d)", self.broker_id, epoch)
        if not self._watching:
            self._watching = True
            ChildrenWatch(self.client, TopicsZNode.path, lambda c: self._events.put(("topics", c)))
            ChildrenWatch(
                self.client, DeleteTopicsZNode.path, lambda c: self._events.put(("deletes", c))
            )
            ChildrenWatch(
                self.client, BrokerIdsZNode.path, lambda c: self._events.put(("brokers", c))
            )
        else:
            self._on_topics(self.zk.get_all_topics())

    def _on_topics(self, topics: list[str]) -> None:
        if self.epoch is None:
            return
        for topic in topics:
            if topic not in self._topic_watches:
                self._topic_watches.add(topic)
                DataWatch(self.client, TopicZNode.path(topic), self._topic_watch(topic))
            self._ensure_states(topic)
        self._topic_watches &= set(topics)

    def _topic_watch(self, topic: str):
        def on_change(data, _stat):
            if data is None:
                self._topic_watches.discard(topic)
                return False
            self._events.put(("assignment", topic))
            return True

        return on_change

    def _on_assignment(self, topic: str) -> None:
        if self.epoch is not None:
            self._ensure_states(topic)

    def _live_brokers(self) -> set[int]:
        return {int(b) for b in self.client.get_children(BrokerIdsZNode.path)}

    def _ensure_states(self, topic: str) -> None:
        """Give every partition of ``topic`` that has no state yet its first leader."""
        assignment = self.zk.get_topic_assignment(topic)
        if assignment is None:
            return
        live = self._live_brokers()
        missing = {}
        for partition, replicas in assignment.partitions.items():
            if self.zk.get_partition_state(topic, partition) is not None:
                continue
            leader = next((b for b in replicas if b in live), -1)
            missing[partition] = LeaderAndIsr(
                leader=leader,
                leader_epoch=0,
                isr=[leader] if leader >= 0 else list(replicas),
                controller_epoch=self.epoch,
            )
        if missing:
            self.zk.create_partition_states(topic, missing)
            log.info("created state for %d partition(s) of %s", len(missing), topic)

    def _on_deletes(self, topics: list[str]) -> None:
        if self.epoch is None:
            return
        for topic in topics:
            log.info("deleting topic %s", topic)
            self.zk.delete_topic_znodes(topic)

    def _on_brokers(self, children: list[str]) -> None:
        """Re-elect leaders of partitions whose leader left, from the live ISR."""
        if self.epoch is None:
            return
        live = {int(b) for b in children}
        for topic in self.zk.get_all_topics():
            assignment = self.zk.get_topic_assignment(topic)
            if assignment is None:
                continue
            for partition in assignment.partitions:
                state = self.zk.get_partition_state(topic, partition)
                if state is None or state.leader in live:
                    continue
                candidates = [b for b in state.isr if b in live]
                new_leader = candidates[0] if candidates else -1
                if new_leader == state.leader:
                    continue
                state.leader = new_leader
                state.leader_epoch += 1
                state.controller_epoch = self.epoch
                if self.zk.update_partition_state(topic, partition, state) is not None:
                    log.info(
                        "%s-%d: leader -> %d (epoch %d)",
                        topic,
                        partition,
                        new_leader,
                        state.leader_epoch,
                    )
