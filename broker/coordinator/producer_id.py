"""ProducerIdManager: unique producer ids, claimed from ZooKeeper a block at a time."""

from __future__ import annotations

import asyncio

from ..zk.client import KafkaZkClient


class ProducerIdManager:
    def __init__(self, zk: KafkaZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._next = 0
        self._end = -1
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                self._next, self._end = await asyncio.to_thread(
                    self.zk.allocate_producer_id_block, self.broker_id
                )
            producer_id = self._next
            self._next += 1
            return producer_id
