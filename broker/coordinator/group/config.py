"""Settings of the group coordinator: Kafka's GroupConfig and OffsetConfig, with
Kafka's broker keys and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    num_partitions: int = 50  # offsets.topic.num.partitions
    replication_factor: int = 3  # offsets.topic.replication.factor
    segment_bytes: int = 104857600  # offsets.topic.segment.bytes
    load_buffer_size: int = 5242880  # offsets.load.buffer.size
    retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes (10080)
    retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms
    metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms

    @classmethod
    def from_broker(cls, cfg: Mapping[str, Any] | Any) -> GroupCoordinatorConfig:
        """From a BrokerConfig (typed values under Kafka's keys)."""
        return cls(
            num_partitions=cfg["offsets.topic.num.partitions"],
            replication_factor=cfg["offsets.topic.replication.factor"],
            segment_bytes=cfg["offsets.topic.segment.bytes"],
            load_buffer_size=cfg["offsets.load.buffer.size"],
            retention_ms=cfg["offsets.retention.minutes"] * 60_000,
            retention_check_interval_ms=cfg["offsets.retention.check.interval.ms"],
            commit_timeout_ms=cfg["offsets.commit.timeout.ms"],
            metadata_max_bytes=cfg["offset.metadata.max.bytes"],
            min_session_timeout_ms=cfg["group.min.session.timeout.ms"],
            max_session_timeout_ms=cfg["group.max.session.timeout.ms"],
            max_size=cfg["group.max.size"],
            initial_rebalance_delay_ms=cfg["group.initial.rebalance.delay.ms"],
        )

    def offsets_topic_configs(self) -> dict[str, str]:
        """Kafka's GroupCoordinator.offsetsTopicConfigs."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.segment_bytes),
            "compression.type": "producer",
        }
