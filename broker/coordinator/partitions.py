"""What the group and transaction coordinators share: the partitions of their internal
topic this broker leads, loaded and unloaded one job at a time, in order, on one
worker task (Kafka's single-threaded scheduler), guarded by the leader epoch.

``CoordinatorPartitions`` is a collaborator each state manager owns
(``GroupMetadataManager.partitions``, ``TransactionStateManager.partitions``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class CoordinatorPartitions:
    """``loading``, ``owned`` and ``epochs`` per partition of ``topic``, and the job
    queue that loads and unloads them."""

    def __init__(self, topic: str, replicas, load_buffer_size: int) -> None:
        self.topic = topic
        self.replicas = replicas
        self.load_buffer_size = load_buffer_size
        self.loading: set[int] = set()
        self.owned: set[int] = set()
        self.epochs: dict[int, int] = {}
        self._jobs: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None

    def start(self) -> None:
        self._jobs = asyncio.Queue()
        self._worker = asyncio.ensure_future(self._run_jobs())

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()

    def update_epoch(self, partition: int, epoch: int | None) -> bool:
        """Record a newer epoch; False if ``epoch`` is stale (a late job)."""
        current = self.epochs.get(partition)
        if epoch is not None and (current is None or epoch > current):
            self.epochs[partition] = current = epoch
        return epoch is None or epoch == current

    def begin_load(self, partition: int) -> bool:
        """Mark the partition loading; False if it is loaded or loading already."""
        if partition in self.owned or partition in self.loading:
            return False
        self.loading.add(partition)
        return True

    def finish_load(self, partition: int) -> None:
        """The load ended: the partition is owned, unless it was released meanwhile."""
        if partition in self.loading:
            self.loading.discard(partition)
            self.owned.add(partition)

    def release(self, partition: int) -> None:
        """Leadership moved: neither loading nor owned any more."""
        self.loading.discard(partition)
        self.owned.discard(partition)

    async def _run_jobs(self) -> None:
        while True:
            job = await self._jobs.get()
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s load/unload job failed", self.topic)

    def enqueue(self, job: Callable) -> None:
        """Run the coroutine function ``job`` after the jobs queued before it."""
        self._jobs.put_nowait(job)

    async def read_from_start(self, partition: int, epoch: int, replay) -> bool:
        """Feed the partition, from its log start to its end, to ``replay(data, pos) ->
        next pos``; False if the load went stale (leadership moved) meanwhile."""
        pos = None
        while True:
            part = self.replicas.partitions.get((self.topic, partition))
            if part is None or part.log is None or not part.is_leader:
                return False
            if self.epochs.get(partition) != epoch or partition not in self.loading:
                return False
            lg = part.log
            pos = lg.log_start_offset if pos is None else max(pos, lg.log_start_offset)
            if pos >= lg.log_end_offset:
                return True
            data = lg.read_bytes(pos, self.load_buffer_size)
            if not data:
                return True
            pos = replay(data, pos)
            await asyncio.sleep(0)
