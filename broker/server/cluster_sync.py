"""ClusterSync: keeps the metadata cache and this broker's replicas in step with ZooKeeper.

kazoo watches fire on kazoo's thread; each callback decodes the znode there and hands
a plain value to the event loop with ``call_soon_threadsafe``, where the cache and the
ReplicaManager are changed. Watches, not polling: a change in ZooKeeper reaches the
broker in milliseconds.

(Kafka's brokers learn partition states from the controller's LeaderAndIsr and
UpdateMetadata requests; until those exist here, the brokers read the very same
state znodes the controller writes.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..replica.manager import ReplicaManager
from ..replica.partition import PartitionState
from ..zk.client import KafkaZkClient
from ..zk.znodes import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ConfigEntityZNode,
    ControllerZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)
from .metadata_cache import MetadataCache, TopicMeta

log = logging.getLogger(__name__)


class ClusterSync:
    def __init__(
        self,
        zk: KafkaZkClient,
        cache: MetadataCache,
        replicas: ReplicaManager,
        loop: asyncio.AbstractEventLoop,
        on_topic_config: Callable[[str, dict[str, str]], None],
        on_broker_config: Callable[[str, dict[str, str]], None] | None = None,
    ) -> None:
        self.on_broker_config = on_broker_config
        self.zk = zk
        self.client = zk.zk
        self.cache = cache
        self.replicas = replicas
        self.loop = loop
        self.on_topic_config = on_topic_config
        self._topics_watched: set[str] = set()
        self._partitions_watched: set[tuple[str, int]] = set()
        self._brokers_watched: set[int] = set()
        self.changed = asyncio.Event()

    def start(self) -> None:
        if self.on_broker_config is not None:
            for entity in (str(self.cache.broker_id), "<default>"):
                DataWatch(
                    self.client,
                    ConfigEntityZNode.path("brokers", entity),
                    self._broker_config_watch(entity),
                )
        ChildrenWatch(self.client, BrokerIdsZNode.path, self._brokers_changed)
        DataWatch(self.client, ControllerZNode.path, self._controller_changed)
        ChildrenWatch(self.client, TopicsZNode.path, self._topics_changed)

    def _post(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def _notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    # -- brokers and controller (kazoo thread) -------------------------------------------
    def _brokers_changed(self, children: list[str]) -> None:
        ids = {int(c) for c in children}
        for broker_id in ids - self._brokers_watched:
            self._brokers_watched.add(broker_id)
            DataWatch(self.client, BrokerIdZNode.path(broker_id), self._broker_watch(broker_id))

    def _broker_watch(self, broker_id: int):
        def on_change(data, _stat):
            if data is None:
                self._brokers_watched.discard(broker_id)
                self._post(self._broker_gone, broker_id)
                return False
            self._post(self._broker_seen, BrokerIdZNode.decode(broker_id, data))
            return True

        return on_change

    def _controller_changed(self, data, _stat) -> None:
        controller = ControllerZNode.decode(data) if data else -1
        self._post(self._set_controller, controller)

    # -- topics and partitions (kazoo thread) ----------------------------------------------
    def _topics_changed(self, children: list[str]) -> None:
        for topic in set(children) - self._topics_watched:
            self._topics_watched.add(topic)
            DataWatch(self.client, TopicZNode.path(topic), self._topic_watch(topic))
            DataWatch(
                self.client, ConfigEntityZNode.path("topics", topic), self._config_watch(topic)
            )

    def _topic_watch(self, topic: str):
        def on_change(data, _stat):
            if data is None:
                self._topics_watched.discard(topic)
                self._post(self._topic_gone, topic)
                return False
            assignment = TopicZNode.decode(data)
            self._post(self._topic_seen, topic, assignment.topic_id, assignment.partitions)
            for partition in assignment.partitions:
                key = (topic, partition)
                if key not in self._partitions_watched:
                    self._partitions_watched.add(key)
                    DataWatch(
                        self.client,
                        TopicPartitionStateZNode.path(topic, partition),
                        self._state_watch(topic, partition),
                    )
            return True

        return on_change

    def _state_watch(self, topic: str, partition: int):
        def on_change(data, stat):
            if data is None:
                if topic not in self._topics_watched:
                    self._partitions_watched.discard((topic, partition))
                    return False
                return True
            decoded = TopicPartitionStateZNode.decode(data, stat.version)
            self._post(self._state_seen, topic, partition, decoded)
            return True

        return on_change

    def _broker_config_watch(self, entity: str):
        def on_change(data, _stat):
            self._post(self.on_broker_config, entity, ConfigEntityZNode.decode(data))
            return True

        return on_change

    def _config_watch(self, topic: str):
        def on_change(data, _stat):
            if topic not in self._topics_watched:
                return False
            self._post(self.on_topic_config, topic, ConfigEntityZNode.decode(data))
            return True

        return on_change

    # -- applied on the event loop -----------------------------------------------------------
    def _broker_seen(self, info) -> None:
        if info.id not in self.cache.brokers:
            log.info("broker %d is alive at %s:%d", info.id, info.host, info.port)
        self.cache.brokers[info.id] = info
        self._notify()

    def _broker_gone(self, broker_id: int) -> None:
        if self.cache.brokers.pop(broker_id, None) is not None:
            log.info("broker %d left the cluster", broker_id)
        self._notify()

    def _set_controller(self, controller: int) -> None:
        if controller != self.cache.controller_id:
            log.info("controller is now broker %d", controller)
        self.cache.controller_id = controller
        self._notify()

    def _topic_seen(self, topic: str, topic_id: str, partitions: dict[int, list[int]]) -> None:
        meta = self.cache.topics.get(topic)
        if meta is None or meta.topic_id != topic_id:
            meta = TopicMeta(topic, topic_id, dict(partitions))
            self.cache.topics[topic] = meta
        else:
            changed = [p for p, r in partitions.items() if meta.replicas.get(p) != r]
            meta.replicas = dict(partitions)
            for partition in changed:  # a reassignment: replicas join or leave
                state = meta.states.get(partition)
                if state is not None:
                    state.replicas = list(partitions[partition])
                    self._apply(topic, partition, state)
        self._notify()

    def _topic_gone(self, topic: str) -> None:
        meta = self.cache.topics.pop(topic, None)
        if meta is None:
            return
        log.info("topic %s was deleted; removing its local replicas", topic)
        for partition in meta.replicas:
            self.replicas.stop_replica(topic, partition, delete=True)
        self._notify()

    def _state_seen(self, topic: str, partition: int, zk_state) -> None:
        meta = self.cache.topics.get(topic)
        if meta is None:
            return
        state = PartitionState(
            leader=zk_state.leader,
            leader_epoch=zk_state.leader_epoch,
            isr=list(zk_state.isr),
            replicas=list(meta.replicas.get(partition, [])),
            controller_epoch=zk_state.controller_epoch,
            zk_version=zk_state.zk_version,
        )
        meta.states[partition] = state
        self._apply(topic, partition, state)
        self._notify()

    def _apply(self, topic: str, partition: int, state: PartitionState) -> None:
        try:
            self.replicas.apply_state(topic, partition, PartitionState(**vars(state)))
        except Exception:
            log.exception("could not apply the state of %s-%d", topic, partition)
