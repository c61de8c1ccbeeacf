"""BrokerMetrics: the stats one broker keeps, its registry, and the scrape text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest

from .collector import BrokerCollector
from .partitions import LogGaugeRenderer
from .process import GcMetrics, GcPauses, ProcessMetrics
from .runtime import LoopMonitor, ZkStats
from .stats import (
    NULL_PURGATORY_STATS,
    NULL_TOPIC_STATS,
    BrokerTopicStats,
    PurgatoryStats,
    RequestStats,
    Timer,
)

if TYPE_CHECKING:
    from ..server.kafka_server import KafkaServer


class BrokerMetrics:
    """Everything the endpoint serves for one broker. With ``enabled`` False the hot
    path gets do-nothing stats and nothing is served (``quill.metrics.port=0``)."""

    def __init__(self, server: KafkaServer, api_names: dict[int, str], enabled: bool) -> None:
        self.server = server
        self.enabled = enabled
        self.topics = BrokerTopicStats() if enabled else NULL_TOPIC_STATS
        self.purgatory = PurgatoryStats() if enabled else NULL_PURGATORY_STATS
        self.requests = RequestStats(api_names)
        self.leader_elections = Timer()
        self.zk = ZkStats()
        self.loop = LoopMonitor()
        self.gc = GcPauses()
        self.registry = CollectorRegistry(auto_describe=False)
        if enabled:
            self.gc.install()
            self.registry.register(ProcessMetrics())
            self.registry.register(GcMetrics(self.gc))
            self.registry.register(BrokerCollector(self))
        self._logs = LogGaugeRenderer()

    def render(self) -> bytes:
        """The Prometheus text of a scrape (call on the broker's event loop)."""
        text = generate_latest(self.registry)
        logs = self.server.logs
        if logs is None:
            return text
        return text + self._logs.render(logs.live_logs())
