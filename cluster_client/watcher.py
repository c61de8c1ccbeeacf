"""ZooKeeper watches (kazoo DataWatch/ChildrenWatch, never polling) over Kafka's paths,
kept as an in-memory picture of the cluster. Every change is handed to `emit` as a
dict; kazoo calls watches on its own thread, so `emit` must be thread-safe.

Watched: /brokers/ids (children, then each broker's data on join), /controller,
/brokers/topics (children), /brokers/topics/<t> (assignment), each
/brokers/topics/<t>/partitions/<p>/state, /config/changes (children: config and quota
changes as kafka-configs and the console announce them).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.zk.znodes import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ConfigEntityZNode,
    ControllerZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)
from broker.zk.znodes import ConfigEntityChangeNotificationZNode as ConfigChanges
from cluster_client import redact

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class ClusterWatcher:
    def __init__(self, zk: KazooClient, emit: Callable[[dict], None]):
        self.zk = zk
        self.emit = emit
        self.lock = threading.RLock()
        self.brokers: dict[int, dict] = {}
        self.controller: int | None = None
        self.assignments: dict[str, dict[int, list[int]]] = {}
        self.states: dict[tuple[str, int], dict] = {}
        self.min_isr: dict[str, int] = {}
        self._watched_parts: set[tuple[str, int]] = set()
        self._topic_watches: set[str] = set()
        self._seen_changes: set[str] = set()
        self.started = False

    # ------------------------------------------------------------ start
    def start(self) -> None:
        for path in (BrokerIdsZNode.path, TopicsZNode.path, ConfigChanges.path):
            self.zk.ensure_path(path)
        ChildrenWatch(self.zk, BrokerIdsZNode.path, self._on_broker_ids)
        DataWatch(self.zk, ControllerZNode.path, self._on_controller)
        ChildrenWatch(self.zk, TopicsZNode.path, self._on_topics)
        ChildrenWatch(self.zk, ConfigChanges.path, self._on_config_changes)
        self.started = True

    def snapshot(self) -> dict:
        """A consistent copy for the sampler and summaries."""
        with self.lock:
            return {
                "brokers": {b: dict(i) for b, i in self.brokers.items()},
                "controller": self.controller,
                "assignments": {t: dict(a) for t, a in self.assignments.items()},
                "states": dict(self.states),
                "min_isr": dict(self.min_isr),
            }

    # ------------------------------------------------------------ brokers, controller
    def _on_broker_ids(self, children: list[str]) -> None:
        ids = {int(c) for c in children}
        with self.lock:
            joined = ids - set(self.brokers)
            left = set(self.brokers) - ids
            for b in sorted(joined):
                try:
                    info = BrokerIdZNode.decode(b, self.zk.get(BrokerIdZNode.path(b))[0])
                except NoNodeError:
                    continue
                self.brokers[b] = {"host": info.host, "port": info.port, "rack": info.rack}
            for b in left:
                self.brokers.pop(b, None)
        for b in sorted(joined):
            if b in self.brokers:
                self._emit("broker_up", broker=b, **self.brokers[b])
        for b in sorted(left):
            self._emit("broker_down", broker=b)

    def _on_controller(self, data, stat) -> None:
        new = None
        if data:
            try:
                new = int(json.loads(data)["brokerid"])
            except (ValueError, KeyError):
                new = None
        with self.lock:
            old, self.controller = self.controller, new
        if old != new:
            self._emit("controller_change", old=old, new=new)

    # ------------------------------------------------------------ topics, partitions
    def _on_topics(self, children: list[str]) -> None:
        names = set(children)
        with self.lock:
            gone = set(self.assignments) - names
            new = names - self._topic_watches
        for topic in sorted(new):
            with self.lock:
                self._topic_watches.add(topic)
            self._read_min_isr(topic)
            DataWatch(self.zk, TopicZNode.path(topic), self._topic_callback(topic))
        for topic in sorted(gone):
            self._forget_topic(topic)

    def _topic_callback(self, topic: str):
        def on_assignment(data, stat):
            if data is None:
                self._forget_topic(topic)
                return False  # stop watching: the topic is gone
            partitions = TopicZNode.decode(data).partitions
            with self.lock:
                old = self.assignments.get(topic)
                self.assignments[topic] = partitions
                fresh = [p for p in partitions if (topic, p) not in self._watched_parts]
                self._watched_parts.update((topic, p) for p in fresh)
            if old is None:
                self._emit("topic_created", topic=topic, partitions=len(partitions))
            elif len(partitions) > len(old):
                self._emit("partitions_added", topic=topic, before=len(old), after=len(partitions))
            for p in sorted(fresh):
                DataWatch(
                    self.zk,
                    TopicPartitionStateZNode.path(topic, p),
                    self._state_callback(topic, p),
                )
            return None

        return on_assignment

    def _state_callback(self, topic: str, partition: int):
        part = (topic, partition)

        def on_state(data, stat):
            with self.lock:
                if topic not in self._topic_watches:
                    self._watched_parts.discard(part)
                    return False
                old = self.states.get(part)
                if data is None:
                    return None  # not created yet (or being deleted)
                body = json.loads(data)
                new = {
                    "leader": body["leader"],
                    "leader_epoch": body["leader_epoch"],
                    "isr": list(body["isr"]),
                }
                self.states[part] = new
                replicas = self.assignments.get(topic, {}).get(partition, [])
            if old != new:
                self._emit(
                    "partition_state",
                    topic=topic,
                    partition=partition,
                    old=old,
                    new=new,
                    replicas=replicas,
                )
            return None

        return on_state

    def _forget_topic(self, topic: str) -> None:
        with self.lock:
            existed = topic in self.assignments
            self.assignments.pop(topic, None)
            self._topic_watches.discard(topic)
            self.min_isr.pop(topic, None)
            for part in [p for p in self.states if p[0] == topic]:
                del self.states[part]
        if existed:
            self._emit("topic_deleted", topic=topic)

    def _read_min_isr(self, topic: str) -> None:
        try:
            config = ConfigEntityZNode.decode(
                self.zk.get(ConfigEntityZNode.path("topics", topic))[0]
            )
        except NoNodeError:
            config = {}
        try:
            default = ConfigEntityZNode.decode(
                self.zk.get(ConfigEntityZNode.path("brokers", "<default>"))[0]
            )
        except NoNodeError:
            default = {}
        value = config.get("min.insync.replicas", default.get("min.insync.replicas", 1))
        with self.lock:
            self.min_isr[topic] = int(value)

    # ------------------------------------------------------------ config changes
    def _on_config_changes(self, children: list[str]) -> None:
        fresh = sorted(set(children) - self._seen_changes)
        first = not self._seen_changes and not self.started
        self._seen_changes.update(children)
        self._seen_changes &= set(children)  # forget notifications Kafka has purged
        if first:
            return  # old notifications are history, not news
        for name in fresh:
            try:
                body = json.loads(self.zk.get(f"{ConfigChanges.path}/{name}")[0])
            except (NoNodeError, ValueError):
                continue
            entity = body.get("entity_path", "")
            if entity.startswith("topics/"):
                self._read_min_isr(entity.split("/", 1)[1])
            try:
                config = ConfigEntityZNode.decode(self.zk.get(ConfigEntityZNode.entity(entity))[0])
            except NoNodeError:
                config = {}
            # SCRAM credentials never leave the monitor: mechanisms and iterations only
            self._emit("config_change", entity=entity, config=redact.config(config))

    def _emit(self, kind: str, **fields) -> None:
        try:
            self.emit({"kind": kind, "ts": now_ms(), "initial": not self.started, **fields})
        except Exception:  # noqa: BLE001 - a failing consumer must not kill kazoo's thread
            log.exception("monitor: could not hand on a %s change", kind)
