"""Compaction on request: the broker's side of ``/admin/compact/<topic>`` (Quill's; Kafka
has no API for "compact now", people lower ``min.cleanable.dirty.ratio`` by hand).

Every broker watches ``/admin/compact``. For a request ``{"version":1,"partitions":[...]
|null,"id":..,"roll":true}`` each broker takes the replicas of those partitions it hosts
(leader or follower: every replica compacts its own log, as in Kafka), rolls the active
segment if asked (so the last records become cleanable), waits until the high watermark
reaches the roll (only what is committed is cleaned), runs the cleaner on it whatever its
dirty ratio, and writes what it did to ``/admin/compact/<topic>/results/<broker id>``.
With ``"clean": false`` a broker only reports the cleaner's standing figures per
partition (dirty ratio, bytes, cleaned-up-to offset, last clean, uncleanable), which is
what the console's topic page shows. A broker that already wrote a result for the
request's id does nothing again, so a restart or a repeated watch event does not clean
twice. The JSON is in docs/internal-interfaces.md.

kazoo watches fire on kazoo's thread; the work runs on the event loop, like the
periodic cleaner (``LogManager.tick``), so the log is never touched by two threads.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..log.manager import LogManager
from ..zk.client import KafkaZkClient
from ..zk.znodes import CompactRequest, CompactRequestZNode, CompactResultZNode

log = logging.getLogger(__name__)

HW_WAIT_S = 30.0  # how long a rolled replica waits for its high watermark to reach the roll


class CompactionRequests:
    def __init__(
        self, zk: KafkaZkClient, logs: LogManager, broker_id: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.zk = zk
        self.client = zk.zk
        self.logs = logs
        self.broker_id = broker_id
        self.loop = loop
        self._watched: set[str] = set()
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()

    # -- kazoo thread ----------------------------------------------------------------------
    def start(self) -> None:
        self.client.ensure_path(CompactRequestZNode.path)
        ChildrenWatch(self.client, CompactRequestZNode.path, self._topics_changed)

    def _topics_changed(self, children: list[str]) -> None:
        for topic in set(children) - self._watched:
            self._watched.add(topic)
            DataWatch(
                self.client, CompactRequestZNode.topic_path(topic), self._request_watch(topic)
            )
        self._watched &= set(children)

    def _request_watch(self, topic: str):
        def on_change(data, _stat):
            if data is None:
                self._watched.discard(topic)
                return False
            try:
                request = CompactRequestZNode.decode(data)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                log.error("ignoring a malformed compaction request for %s: %s", topic, exc)
                return True
            self.loop.call_soon_threadsafe(self._schedule, topic, request)
            return True

        return on_change

    # -- event loop ------------------------------------------------------------------------
    def _schedule(self, topic: str, request: CompactRequest) -> None:
        task = self.loop.create_task(self.handle(topic, request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def handle(self, topic: str, request: CompactRequest) -> None:
        async with self._lock:  # one request at a time, in the order they came
            try:
                if await asyncio.to_thread(self._already_done, topic, request.id):
                    return
                results = await self.compact(topic, request)
                if results:
                    await asyncio.to_thread(self._write_results, topic, request.id, results)
            except Exception:
                log.exception("compaction request %s for %s failed", request.id, topic)

    async def compact(self, topic: str, request: CompactRequest) -> list[dict]:
        """One entry per local replica the request names (a partition named that does not
        exist on this broker is simply not ours)."""
        local = sorted(p for (t, p), _ in self.logs.all_logs() if t == topic)
        wanted = local if request.partitions is None else sorted(set(request.partitions))
        results = []
        for partition in wanted:
            lg = self.logs.get_log(topic, partition)
            if lg is None:
                continue
            entry: dict = {"partition": partition, "error": None}
            if not lg.config.compact:
                entry["error"] = (
                    f"{topic} has cleanup.policy={','.join(lg.config.cleanup_policy)}, not compact."
                )
                results.append(entry)
                continue
            cleaner = self.logs.cleaner
            if not request.clean:  # the standing figures only; nothing rolled or cleaned
                entry.update(cleaner.status((topic, partition), lg))
                entry["finished_ms"] = int(time.time() * 1000)
                results.append(entry)
                continue
            cleaner.requested.add((topic, partition))
            try:
                if request.roll and lg.active_segment.size > 0:
                    rolled_at = lg.roll().base_offset
                    log.info("%s-%d: rolled at %d for compaction %s", topic, partition,
                             rolled_at, request.id)  # fmt: skip
                    await self._wait_committed(lg, rolled_at)
                entry.update(cleaner.clean_now((topic, partition), lg))
            except Exception as exc:  # noqa: BLE001 - reported per partition, the broker goes on
                log.exception("compacting %s-%d failed", topic, partition)
                entry["error"] = f"Cleaning failed: {exc}"
            finally:
                cleaner.requested.discard((topic, partition))
            entry["finished_ms"] = int(time.time() * 1000)
            results.append(entry)
        return results

    @staticmethod
    async def _wait_committed(lg, offset: int) -> None:
        deadline = time.monotonic() + HW_WAIT_S
        while lg.high_watermark < offset and time.monotonic() < deadline and not lg.closed:
            await asyncio.sleep(0.1)

    # -- ZooKeeper (worker threads) ----------------------------------------------------------
    def _already_done(self, topic: str, request_id: str) -> bool:
        try:
            data, _ = self.client.get(CompactResultZNode.path(topic, self.broker_id))
        except NoNodeError:
            return False
        try:
            return CompactResultZNode.decode(data).get("id") == request_id
        except ValueError:
            return False

    def _write_results(self, topic: str, request_id: str, partitions: list[dict]) -> None:
        path = CompactResultZNode.path(topic, self.broker_id)
        data = CompactResultZNode.encode(
            request_id, self.broker_id, int(time.time() * 1000), partitions
        )
        try:
            self.client.create(path, data, makepath=True)
        except NodeExistsError:
            self.client.set(path, data)
        except NoNodeError:  # the request was deleted meanwhile
            return
        log.info("compaction %s of %s: %d partition(s) reported", request_id, topic,
                 len(partitions))  # fmt: skip
