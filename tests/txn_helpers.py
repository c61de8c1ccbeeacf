"""Helpers of the transaction tests: broker settings, a transactional producer and
consumers that read everything a partition has under an isolation level."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.group_helpers import GROUP_BROKER

TXN_BROKER = {
    **GROUP_BROKER,
    "transaction.state.log.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


def txn_producer(bootstrap: str, txn_id: str, **config) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "linger.ms": 5,
            **config,
        }
    )
    p.init_transactions(30)
    return p


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, idle_s: float = 3.0
) -> list[bytes]:
    """Every record value the partitions return under ``isolation`` (read_committed or
    read_uncommitted), reading from the start until nothing new comes for ``idle_s``."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            msg = c.poll(0.2)
            if msg is None or msg.error():
                continue
            values.append(msg.value())
            last = time.monotonic()
        return values
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, int]:
    """ListOffsets LATEST per partition: the LSO under read_committed, else the HW."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "offsets", "isolation.level": isolation}
    )
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        c.close()
