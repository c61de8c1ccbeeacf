"""ClusterSync: the ZooKeeper watches a broker keeps for itself.

Partition states, replicas and live brokers come from the controller (LeaderAndIsr,
UpdateMetadata, StopReplica). What a broker watches directly, as Kafka's brokers do:
topic configs (``/config/topics/<t>``), its dynamic configs (``/config/brokers/<id>``
and ``<default>``), and ``/controller`` (so it knows whom to forward to at once).

kazoo watches fire on kazoo's thread; each callback decodes the znode there and hands
a plain value to the event loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..replica.manager import ReplicaManager
from ..zk.client import KafkaZkClient
from ..zk.znodes import ConfigEntityZNode, ConfigType, ControllerZNode, TopicsZNode
from .metadata_cache import MetadataCache

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
        self.zk = zk
        self.client = zk.zk
        self.cache = cache
        self.replicas = replicas
        self.loop = loop
        self.on_topic_config = on_topic_config
        self.on_broker_config = on_broker_config
        self._topics_watched: set[str] = set()
        self.changed = asyncio.Event()

    def start(self) -> None:
        if self.on_broker_config is not None:
            for entity in (str(self.cache.broker_id), "<default>"):
                DataWatch(
                    self.client,
                    ConfigEntityZNode.path(ConfigType.BROKER, entity),
                    self._broker_config_watch(entity),
                )
        DataWatch(self.client, ControllerZNode.path, self._controller_changed)
        ChildrenWatch(self.client, TopicsZNode.path, self._topics_changed)

    def _post(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def notify(self) -> None:
        """Wake whoever waits for the cluster picture to change (on the event loop)."""
        self.changed.set()
        self.changed = asyncio.Event()

    # -- kazoo thread ---------------------------------------------------------------------------
    def _controller_changed(self, data, _stat) -> None:
        controller = ControllerZNode.decode(data) if data else -1
        self._post(self._set_controller, controller)

    def _topics_changed(self, children: list[str]) -> None:
        current = set(children)
        for topic in current - self._topics_watched:
            self._topics_watched.add(topic)
            DataWatch(
                self.client,
                ConfigEntityZNode.path(ConfigType.TOPIC, topic),
                self._config_watch(topic),
            )
        self._topics_watched &= current

    def _config_watch(self, topic: str):
        def on_change(data, _stat):
            if topic not in self._topics_watched:
                return False
            self._post(self.on_topic_config, topic, ConfigEntityZNode.decode(data))
            return True

        return on_change

    def _broker_config_watch(self, entity: str):
        def on_change(data, _stat):
            self._post(self.on_broker_config, entity, ConfigEntityZNode.decode(data))
            return True

        return on_change

    # -- event loop ---------------------------------------------------------------------------
    def _set_controller(self, controller: int) -> None:
        if controller != self.cache.controller_id:
            log.info("controller is now broker %d", controller)
        self.cache.controller_id = controller
        self.notify()
