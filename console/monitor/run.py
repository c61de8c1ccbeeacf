"""The monitor process: kazoo watches feed a queue that is published at once (a ZooKeeper
change reaches open pages in milliseconds); a 1 s sampler publishes offset and lag
changes. Only cells whose text changed are sent; history goes to Redis."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from channels.layers import get_channel_layer

from broker.zk.security import zk_client
from cluster_client import clusters, state
from cluster_client.watcher import ClusterWatcher
from console.monitor import deltas as D
from console.monitor.brokers import BrokerMetricsSampler
from console.monitor.sampler import GroupSampler, OffsetSampler
from livefeed import history
from livefeed.groups import channel_group, message

log = logging.getLogger("console.monitor")
STATUS_TTL_S = 60


def raise_if_cancelled() -> None:
    """Raise CancelledError when this task was asked to stop. A library may turn a cancel
    into an ordinary error (an asyncio timeout that races it comes out as TimeoutError)
    or drop it; the loops below catch ordinary errors to keep going, so without this one
    swallowed cancel kept the monitor sampling and its shutdown waited for ever. Python
    3.11 counts the cancel requests on the task until one is taken back, so a swallowed
    one still shows here."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def merge(into: D.Deltas, more: D.Deltas) -> D.Deltas:
    for sub, d in more.items():
        target = into.setdefault(sub, {})
        if "set" in d:
            target.setdefault("set", {}).update(d["set"])
        if "events" in d:
            target.setdefault("events", []).extend(d["events"])
        if d.get("refresh"):
            target["refresh"] = True
        for name, points in d.get("series", {}).items():
            target.setdefault("series", {}).setdefault(name, []).extend(points)
    return into


class Monitor:
    """One cluster's monitor (`cluster`: its name; default: the current cluster). All it
    reads and writes (ZooKeeper, brokers, Redis keys, channel groups) is that cluster's:
    its coroutines and threads run with the cluster current."""

    def __init__(self, interval: float = 1.0, cluster: str | None = None):
        self.interval = interval
        self.cluster = clusters.current_name() if cluster is None else cluster
        self.layer = get_channel_layer()
        self.sent: dict[tuple[str, str], dict] = {}
        self._groups_pool = ThreadPoolExecutor(1, thread_name_prefix="quill-monitor-groups")
        self.samples = 0
        self.last_sample_s = 0.0
        self.broker_metrics = BrokerMetricsSampler()

    # ------------------------------------------------------------ start
    async def run(self, samples: int | None = None) -> None:
        with clusters.activate(self.cluster) as cluster:  # this task's context and threads
            await self._run(cluster, samples)

    async def _run(self, cluster: clusters.Cluster, samples: int | None) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.zk = zk_client(cluster.zookeeper_connect, 10, cluster.zookeeper_credentials)
        await asyncio.to_thread(lambda: self.zk.start(timeout=30))
        self.watcher = ClusterWatcher(self.zk, self._emit)
        await asyncio.to_thread(self.watcher.start)
        snap = self.watcher.snapshot()
        log.info(
            "monitor: cluster %s: watching %d brokers, %d topics, %d partitions",
            cluster.name,
            len(snap["brokers"]),
            len(snap["assignments"]),
            len(snap["states"]),
        )
        publisher = asyncio.create_task(self._publisher())
        try:
            await self._sampler(samples)
        finally:
            publisher.cancel()
            await asyncio.to_thread(self._stop_zk)

    def _stop_zk(self) -> None:
        self.zk.stop()
        self.zk.close()

    def _emit(self, change: dict) -> None:
        """Called on kazoo's thread."""
        self.loop.call_soon_threadsafe(self.queue.put_nowait, change)

    # ------------------------------------------------------------ ZooKeeper changes
    async def _publisher(self) -> None:
        while True:
            raise_if_cancelled()
            batch = [await self.queue.get()]
            while not self.queue.empty():
                batch.append(self.queue.get_nowait())
            try:
                await self.publish_changes(batch)
            except Exception:  # noqa: BLE001 - keep publishing whatever one batch did
                raise_if_cancelled()
                log.exception("monitor: could not publish %d changes", len(batch))

    async def publish_changes(self, batch: list[dict]) -> None:
        snap = self.watcher.snapshot()
        live = set(snap["brokers"])
        events, out = [], {}
        for change in batch:
            e, d = D.for_change(change, live, snap["min_isr"])
            events += e
            merge(out, d)
        summary = state.summarize(
            [{"id": b, **i} for b, i in snap["brokers"].items()],
            live,
            snap["controller"],
            snap["assignments"],
            snap["states"],
            snap["min_isr"],
        )
        merge(out, D.summary_cells(summary))
        if events:
            await asyncio.to_thread(self._record_events, events)
        await self.send(out)

    @staticmethod
    def _record_events(events: list[dict]) -> None:
        for e in events:
            history.add_event(e)
            log.debug("event: %s", e["text"])
        log.info("monitor: %d event(s), e.g. %s", len(events), events[0]["text"])

    async def send(self, out: D.Deltas) -> None:
        for sub, d in out.items():
            d = self._only_changes(sub, d)
            group = channel_group(sub, self.cluster)
            if d and group:
                await self.layer.group_send(group, message(d))

    def _only_changes(self, sub: str, d: dict) -> dict:
        cells = {}
        sent = self.sent
        for key, cell in d.get("set", {}).items():
            if sent.get((sub, key)) != cell:  # cells are fresh dicts, never mutated
                sent[(sub, key)] = cell
                cells[key] = cell
        d = {k: v for k, v in d.items() if k != "set"}
        if cells:
            d["set"] = cells
        return d

    # ------------------------------------------------------------ 1 s samples
    async def _sampler(self, samples: int | None) -> None:
        offsets, groups = OffsetSampler(), GroupSampler()
        while samples is None or self.samples < samples:
            raise_if_cancelled()
            started = time.monotonic()
            try:
                out = await asyncio.to_thread(self.sample_once, offsets, groups)
                await self.send(out)
            except Exception:  # noqa: BLE001 - a failed sample is logged, the next one runs
                raise_if_cancelled()
                log.exception("monitor: sample failed")
            self.samples += 1
            self.last_sample_s = time.monotonic() - started
            await asyncio.sleep(max(0.05, self.interval - self.last_sample_s))

    def sample_once(self, offsets: OffsetSampler, groups: GroupSampler) -> D.Deltas:
        now = time.time()
        snap = self.watcher.snapshot()
        fetching = self._groups_pool.submit(
            clusters.in_context(groups.fetch)
        )  # meanwhile, ask for offsets
        s, out = offsets.sample(snap, now)
        statuses, group_deltas, consumed = groups.sample(s, now, fetching.result())
        merge(out, group_deltas)
        for t, info in offsets.rates.items():  # no group consuming it: no out rate
            rate = info["out"] = consumed.get(t)
            for sub in ("topics", f"topic:{t}"):
                D.add(out, sub, f"t:{t}:out", {"t": D.fmt.rate(rate, ""), "v": rate or 0})
        self._record(offsets.rates, statuses, now, out)
        merge(out, self.broker_metrics.sample(snap["brokers"], now))  # each broker's /metrics
        return out

    def _record(self, rates: dict, statuses: dict, now: float, out: D.Deltas) -> None:
        pipe = history.client().pipeline()
        pipe.delete(history.key(history.TOPIC_RATES))
        if rates:
            pipe.hset(
                history.key(history.TOPIC_RATES),
                mapping={t: json.dumps(r) for t, r in rates.items()},
            )
        for gid, status in statuses.items():
            pipe.set(history.group_key(gid), json.dumps(status), ex=STATUS_TTL_S)
            point = [round(now, 3), status["lag"], status["lag_ms"]]
            pipe.lpush(history.lag_key(gid), json.dumps(point))
            pipe.ltrim(history.lag_key(gid), 0, history.LAG_KEEP - 1)
            D.add(out, f"group:{gid}", series={"lag": [point]})
        pipe.set(history.key(history.HEARTBEAT), now)
        pipe.execute()
