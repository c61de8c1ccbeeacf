"""Settings of the transaction coordinator: Kafka's TransactionConfig, with Kafka's
broker keys and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TransactionConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    replication_factor: int = 3  # transaction.state.log.replication.factor
    min_isr: int = 2  # transaction.state.log.min.isr
    segment_bytes: int = 104857600  # transaction.state.log.segment.bytes
    load_buffer_size: int = 5242880  # transaction.state.log.load.buffer.size
    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    abort_interval_ms: int = 10000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    remove_interval_ms: int = 3600000  # transaction.remove.expired.transaction.cleanup.interval.ms
    write_timeout_ms: int = 5000  # Kafka uses request.timeout.ms for txn log appends

    @classmethod
    def from_broker(cls, cfg: Mapping[str, Any] | Any) -> TransactionConfig:
        return cls(
            num_partitions=cfg["transaction.state.log.num.partitions"],
            replication_factor=cfg["transaction.state.log.replication.factor"],
            min_isr=cfg["transaction.state.log.min.isr"],
            segment_bytes=cfg["transaction.state.log.segment.bytes"],
            load_buffer_size=cfg["transaction.state.log.load.buffer.size"],
            max_timeout_ms=cfg["transaction.max.timeout.ms"],
            abort_interval_ms=cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            id_expiration_ms=cfg["transactional.id.expiration.ms"],
            remove_interval_ms=cfg["transaction.remove.expired.transaction.cleanup.interval.ms"],
        )

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        """Kafka's TransactionLog topic configs. min.insync.replicas is capped at the
        replication factor the topic gets, which is capped by the live brokers: a
        one-broker cluster would otherwise refuse every transaction."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.segment_bytes),
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(min(self.min_isr, replication_factor)),
        }
