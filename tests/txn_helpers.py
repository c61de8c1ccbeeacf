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
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    idle_s: float = 3.0,
    first_wait_s: float = 20.0,
) -> list[bytes]:
    """Every record value the partitions return under ``isolation`` (read_committed or
    read_uncommitted), reading from the start until nothing new comes for ``idle_s``;
    before the first record that wait is ``first_wait_s`` (a loaded machine, or a client
    still finding the leaders after a broker died, can take seconds to fetch at all),
    unless the consumer is known to have fetched up to what it may see (``_read_through``:
    then only ``idle_s`` is waited for an empty answer)."""
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
        through = False
        while time.monotonic() - last < (
            idle_s if values or through else max(idle_s, first_wait_s)
        ):
            msg = c.poll(0.2)
            if msg is None and not values and not through:
                through = _read_through(c, bootstrap, topic, partitions, isolation)
            if msg is None or msg.error():
                continue
            values.append(msg.value())
            last = time.monotonic()
        return values
    finally:
        c.close()


def _read_through(consumer, bootstrap: str, topic: str, partitions: int, isolation: str) -> bool:
    """The consumer has had a fetch answered for every partition (its cached watermarks
    are known) and its position is at the end it may see under `isolation` (the last
    stable offset for read_committed, else the high watermark): nothing it can read now
    is still to come."""
    for p in range(partitions):
        if consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1] < 0:
            return False
    visible = end_offsets(bootstrap, topic, partitions, isolation)
    at = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
    return all(max(tp.offset, 0) >= visible[tp.partition] for tp in at)


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


def find_txn_coordinator(client, txn_id: str):
    """FindCoordinator v3, key type 1 (transaction)."""
    return client.request(10, 3, {"key": txn_id, "key_type": 1})


def wait_txn_coordinator(client, txn_id: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        resp = find_txn_coordinator(client, txn_id)
        if resp.error_code == 0 or time.monotonic() > deadline:
            return resp
        time.sleep(0.2)


def init_pid(client, txn_id: str, timeout_ms: int = 60000, version: int = 4, retries: int = 100):
    """InitProducerId for a transactional id, retried while the coordinator loads."""
    for _ in range(retries):
        resp = client.request(
            22,
            version,
            {
                "transactional_id": txn_id,
                "transaction_timeout": timeout_ms,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        if int(resp.error_code) not in (14, 15, 51):  # loading, not available, concurrent
            return resp
        time.sleep(0.1)
    return resp


def committed_without_stability(client, group: str, topic: str, partitions: int) -> dict:
    """OffsetFetch v6 (no require_stable): the committed offsets, pending ones not shown."""
    resp = client.request(
        9,
        6,
        {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": list(range(partitions))}],
        },
    )
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
