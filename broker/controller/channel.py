"""ControllerChannel: the controller's ordered request queues to every live broker.

The controller decides on its own thread; requests travel on the broker's event loop,
one queue and one connection per broker, in order. An UpdateMetadata still waiting in
a queue is merged into the next one (the newer state of a partition wins), so a
broker busy with a burst of events gets one request carrying all their changes. A request whose connection fails is retried on a
new connection until the broker leaves the cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from ..client.connection import BrokerConnection
from ..client.security import ClientSecurity

log = logging.getLogger(__name__)


class _BrokerQueue:
    def __init__(
        self, channel: ControllerChannel, broker_id: int, endpoint: tuple[str, int]
    ) -> None:
        self.channel = channel
        self.broker_id = broker_id
        self.endpoint = endpoint
        self.items: deque = deque()
        self.ready = asyncio.Event()
        self.conn: BrokerConnection | None = None
        self.task = asyncio.ensure_future(self._run())

    def put(self, api_key: int, version: int, body: dict, coalesce: str | None) -> None:
        if coalesce is not None:
            waiting = [i[2] for i in self.items if i[3] == coalesce]
            if waiting:
                self.items = deque(i for i in self.items if i[3] != coalesce)
                body = merge_update_metadata(waiting + [body])
        self.items.append((api_key, version, body, coalesce))
        self.ready.set()

    async def _run(self) -> None:
        while True:
            if not self.items:
                self.ready.clear()
                await self.ready.wait()
                continue
            api_key, version, body, _ = self.items[0]
            try:
                if self.conn is None or not self.conn.connected:
                    self.conn = BrokerConnection(
                        *self.endpoint,
                        client_id=f"controller-{self.channel.controller_id}",
                        security=self.channel.security,
                    )
                    await self.conn.connect()
                resp = await self.conn.request(api_key, version, body, timeout_s=30)
            except asyncio.CancelledError:
                break
            except (ConnectionError, OSError, TimeoutError) as exc:
                log.debug("controller channel to broker %d: %r; retrying", self.broker_id, exc)
                if self.conn is not None:
                    await self.conn.close()
                    self.conn = None
                await asyncio.sleep(0.2)
                continue
            if self.items and self.items[0][2] is body:
                self.items.popleft()
            code = getattr(resp, "error_code", 0)
            if code:
                log.warning(
                    "broker %d refused controller request %d: %s",
                    self.broker_id,
                    api_key,
                    code.name,
                )
        if self.conn is not None:
            await self.conn.close()


class ControllerChannel:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        controller_id: int,
        security: ClientSecurity | None = None,
    ) -> None:
        self.loop = loop
        self.controller_id = controller_id
        self.security = security  # the inter-broker listener's TLS/SASL
        self.queues: dict[int, _BrokerQueue] = {}

    # -- called from the controller thread -------------------------------------------------
    def send(
        self,
        broker_id: int,
        endpoint: tuple[str, int],
        api_key: int,
        version: int,
        body: dict,
        coalesce: str | None = None,
    ) -> None:
        self.loop.call_soon_threadsafe(
            self._put, broker_id, endpoint, api_key, version, body, coalesce
        )

    def remove_broker(self, broker_id: int) -> None:
        self.loop.call_soon_threadsafe(self._remove, broker_id)

    def close(self) -> None:
        for broker_id in list(self.queues):
            self.loop.call_soon_threadsafe(self._remove, broker_id)

    async def aclose(self) -> None:
        """Stop every queue (on the event loop, at broker shutdown)."""
        queues, self.queues = list(self.queues.values()), {}
        for queue in queues:
            queue.task.cancel()
        if queues:
            await asyncio.wait([q.task for q in queues], timeout=2.0)

    # -- on the event loop ---------------------------------------------------------------------
    def _put(self, broker_id, endpoint, api_key, version, body, coalesce) -> None:
        queue = self.queues.get(broker_id)
        if queue is None or queue.endpoint != endpoint or queue.task.done():
            if queue is not None:
                queue.task.cancel()
            queue = self.queues[broker_id] = _BrokerQueue(self, broker_id, endpoint)
        queue.put(api_key, version, body, coalesce)

    def _remove(self, broker_id: int) -> None:
        queue = self.queues.pop(broker_id, None)
        if queue is not None:
            queue.task.cancel()


def merge_update_metadata(bodies: list[dict]) -> dict:
    """One UpdateMetadata body carrying ``bodies`` (oldest first): the live brokers and
    epoch of the last, each partition as the last body that names it says."""
    topics: dict[str, tuple[bytes, dict[int, dict]]] = {}
    for body in bodies:
        for topic in body["topic_states"]:
            _id, parts = topics.get(topic["topic_name"], (None, {}))
            for ps in topic["partition_states"]:
                parts[ps["partition_index"]] = ps
            topics[topic["topic_name"]] = (topic["topic_id"], parts)
    merged = dict(bodies[-1])
    merged["topic_states"] = [
        {
            "topic_name": name,
            "topic_id": topic_id,
            "partition_states": [parts[p] for p in sorted(parts)],
        }
        for name, (topic_id, parts) in sorted(topics.items())
    ]
    return merged
