"""The cluster as ZooKeeper watches keep it, for pages of big clusters.

Reading every partition's state znode costs a ZooKeeper round trip's share each
(kazoo: ~0.3 ms, 3 s and more at 10,000 partitions), on every page load. From
QUILL_WATCH_FROM_PARTITIONS partitions the console keeps the picture the monitor keeps
(cluster_client.watcher.ClusterWatcher: brokers, controller, assignments, leader and
ISR, min.insync.replicas, all by watch), started in the background the first time a
page sees that many partitions. A page uses it only when it is complete (every
partition has its state) and its topics and brokers are those ZooKeeper lists now (two
cheap reads); otherwise it reads afresh. Leader and ISR changes arrive by watch within
milliseconds of ZooKeeper's."""

from __future__ import annotations

import logging
import threading

from django.conf import settings

from cluster_client import clusters, zk
from cluster_client.watcher import ClusterWatcher

log = logging.getLogger(__name__)
_lock = threading.Lock()
# cluster name -> (its watcher, set when the watcher's first reads are done)
_watchers: dict[str, tuple[ClusterWatcher, threading.Event]] = {}


def wanted(partitions: int) -> bool:
    return partitions >= settings.QUILL_WATCH_FROM_PARTITIONS


def start() -> None:
    """Start the current cluster's watches in the background (once per ZooKeeper client)."""
    client = zk.client()
    name = clusters.current().name
    with _lock:
        known = _watchers.get(name)
        if known is not None and known[0].zk is client:
            return
        watcher, ready = ClusterWatcher(client, lambda change: None), threading.Event()
        _watchers[name] = (watcher, ready)
    threading.Thread(
        target=_start, args=(watcher, ready), name="quill-picture", daemon=True
    ).start()


def _start(watcher: ClusterWatcher, ready: threading.Event) -> None:
    try:
        watcher.start()  # kazoo's watches read every znode once, one after another
    except Exception:  # noqa: BLE001 - pages read afresh until a later start works
        log.exception("console: could not start the ZooKeeper watches")
        return
    ready.set()


def snapshot() -> dict | None:
    """The current cluster's watched picture if complete and current, else None."""
    with _lock:
        known = _watchers.get(clusters.current().name)
    if known is None or not known[1].is_set():
        return None
    watcher = known[0]
    client = zk.client()
    if watcher.zk is not client:
        return None
    snap = watcher.snapshot()
    if not wanted(sum(len(a) for a in snap["assignments"].values())):
        return None  # small enough to read afresh, exactly
    if set(snap["assignments"]) != set(zk.topic_names()):
        return None
    if set(snap["brokers"]) != set(zk.broker_ids()):
        return None
    states = snap["states"]
    for t, a in snap["assignments"].items():
        if any((t, p) not in states for p in a):
            return None
    return snap


def brokers(snap: dict) -> list[dict]:
    """The snapshot's brokers as zk.brokers() lists them."""
    return [{"id": b, **info} for b, info in sorted(snap["brokers"].items())]
