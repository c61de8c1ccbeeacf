"""Process metrics under prometheus_client's names (``process_*``, ``python_gc_*``),
cheap per scrape.

prometheus_client's ProcessCollector lists ``/proc/self/fd`` on every scrape; a broker
keeps an fd per open segment file, so at 10,000 partitions that listing alone was a
large share of a scrape's CPU. Here the open-fd count is refreshed at most every
``FD_COUNT_EVERY_S``; CPU and memory are read each time (``os.times``,
``/proc/self/statm``).
"""

from __future__ import annotations

import gc
import os
import resource
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

FD_COUNT_EVERY_S = 10.0
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class ProcessMetrics(Collector):
    def __init__(self) -> None:
        self.start_time = time.time()
        self._fds, self._fds_at = 0, -FD_COUNT_EVERY_S

    def _open_fds(self) -> int:
        now = time.monotonic()
        if now - self._fds_at >= FD_COUNT_EVERY_S:
            self._fds, self._fds_at = len(os.listdir("/proc/self/fd")), now
        return self._fds

    def collect(self) -> Iterator[Metric]:
        t = os.times()
        yield CounterMetricFamily(
            "process_cpu_seconds_total",
            "User and system CPU time, seconds",
            value=t.user + t.system,
        )
        with open("/proc/self/statm", "rb") as f:
            vms_pages, rss_pages = (int(x) for x in f.read().split()[:2])
        yield GaugeMetricFamily(
            "process_resident_memory_bytes", "Resident memory, bytes", value=rss_pages * PAGE_SIZE
        )
        yield GaugeMetricFamily(
            "process_virtual_memory_bytes", "Virtual memory, bytes", value=vms_pages * PAGE_SIZE
        )
        yield GaugeMetricFamily(
            "process_open_fds", "Open file descriptors (counted every 10 s)", value=self._open_fds()
        )
        yield GaugeMetricFamily(
            "process_max_fds",
            "Limit of open file descriptors",
            value=resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        )
        yield GaugeMetricFamily(
            "process_start_time_seconds",
            "When the broker started, Unix time",
            value=self.start_time,
        )


class GcPauses:
    """Collections and their pause time per generation, from ``gc.callbacks`` (Python's
    counterpart of the JVM's GC pause metrics)."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.max_seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def install(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        gen = info["generation"]
        took = time.perf_counter() - self._started
        self.count[gen] += 1
        self.seconds[gen] += took
        if took > self.max_seconds[gen]:
            self.max_seconds[gen] = took


class GcMetrics(Collector):
    """CPython's collector: collections and their pauses per generation (GcPauses),
    and how many objects are frozen out of it (broker.server.heap)."""

    def __init__(self, pauses: GcPauses) -> None:
        self.pauses = pauses

    def collect(self) -> Iterator[Metric]:
        p = self.pauses
        count = CounterMetricFamily(
            "python_gc_collections", "Collections per generation", labels=["generation"]
        )
        seconds = CounterMetricFamily(
            "python_gc_pause_seconds",
            "Time the process stood still in collections, per generation",
            labels=["generation"],
        )
        longest = GaugeMetricFamily(
            "python_gc_pause_seconds_max",
            "Longest single collection since the broker started, per generation",
            labels=["generation"],
        )
        for gen in range(3):
            count.add_metric([str(gen)], p.count[gen])
            seconds.add_metric([str(gen)], p.seconds[gen])
            longest.add_metric([str(gen)], p.max_seconds[gen])
        yield count
        yield seconds
        yield longest
        yield GaugeMetricFamily(
            "python_gc_objects_frozen",
            "Long-lived objects frozen out of full collections (gc.freeze)",
            value=gc.get_freeze_count(),
        )
