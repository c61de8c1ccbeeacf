"""Process metrics under prometheus_client's names (``process_*``), cheap per scrape.

prometheus_client's ProcessCollector lists ``/proc/self/fd`` on every scrape; a broker
keeps an fd per open segment file, so at 10,000 partitions that listing alone was a
large share of a scrape's CPU. Here the open-fd count is refreshed at most every
``FD_COUNT_EVERY_S``; CPU and memory are read each time (``os.times``,
``/proc/self/statm``).
"""

from __future__ import annotations

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
