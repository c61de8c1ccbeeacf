"""ClusterSync: the ZooKeeper watches a broker keeps for itself.

Partition states, replicas and live brokers come from the controller (LeaderAndIsr,
UpdateMetadata, StopReplica). What a broker watches directly, as Kafka's brokers do:
topic configs (``/config/topics/<t>``), its dynamic configs (``/config/brokers/<id>``
and ``<default>``), and ``/controller`` (so it knows whom to forward to at once).

The controller a broker names to clients (Metadata, DescribeCluster) is never "none"
while ZooKeeper names one: between the old ``/controller``'s deletion and the watch
that brings the new one, ZooKeeper is asked, and during an election the answer waits
for it (``controller_id``). librdkafka's admin client told "no controller" once its
brokers are up waits for a broker state change that never comes (issue 27: a
CreateTopics right after a controller failover never completed).

kazoo watches fire on kazoo's thread; each callback decodes the znode there and hands
a plain value to the event loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kazoo.exceptions import KazooException
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..replica.manager import ReplicaManager
from ..zk.client import KafkaZkClient
from ..zk.znodes import ConfigEntityZNode, ConfigType, ControllerZNode, TopicsZNode
from .metadata_cache import MetadataCache

log = logging.getLogger(__name__)

# how long a Metadata request waits for an election in progress to name a controller:
# an election takes milliseconds; a client asks again after its own timeout anyway
CONTROLLER_WAIT_S = 5.0


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

    async def controller_id(self, timeout_s: float = CONTROLLER_WAIT_S) -> int:
        """The controller to name to a client: the known one; while none is known,
        ZooKeeper's (the watch may lag behind it), and while ZooKeeper names none (an
        election in progress) the one elected, waiting up to ``timeout_s`` for it. -1
        when ZooKeeper cannot be reached or the wait ends without a controller."""
        if self.cache.controller_id >= 0 or not self.client.connected:
            return self.cache.controller_id  # cut off from ZooKeeper, no election ends
        deadline = self.loop.time() + timeout_s
        try:
            found = await asyncio.wait_for(asyncio.to_thread(self.zk.get_controller_id), timeout_s)
        except (KazooException, TimeoutError):
            return self.cache.controller_id
        if found is not None and found >= 0:
            return found
        while self.cache.controller_id < 0 and (remaining := deadline - self.loop.time()) > 0:
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                break
        return self.cache.controller_id

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
