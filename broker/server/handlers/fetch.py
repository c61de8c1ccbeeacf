"""Fetch: long poll on min bytes / max wait, size limits, record data by sendfile."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ...protocol.fetch_response import PartitionData, encode_fetch_response
from ...protocol.messages import RequestHeader, ms
from ..network import FileRegion
from ..quotas import fetch_throttle

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer


def _read_all(server: KafkaServer, req: Any) -> tuple[list, int, bool]:
    """One pass over the requested partitions; returns (topics, bytes, any error)."""
    budget = min(req.max_bytes, server.config["fetch.max.bytes"]) if req.max_bytes > 0 else 0
    total = 0
    errors = False
    topics = []
    committed = getattr(req, "isolation_level", 0) == 1
    for t in req.topics:
        parts = []
        for p in t.partitions:
            remaining = budget - total
            limit = min(p.partition_max_bytes, remaining) if remaining > 0 else 0
            max_bytes = limit if total > 0 else max(limit, 1)
            if req.replica_id >= 0:
                r = server.replicas.read_for_follower(
                    req.replica_id,
                    t.topic,
                    p.partition,
                    p.fetch_offset,
                    max_bytes,
                    getattr(p, "current_leader_epoch", -1),  # Fetch v9+
                )
            else:
                r = server.replicas.read(
                    t.topic,
                    p.partition,
                    p.fetch_offset,
                    max_bytes,
                    current_leader_epoch=getattr(p, "current_leader_epoch", -1),  # Fetch v9+
                    isolation_committed=committed,
                    min_one_message=total == 0,
                )
            if r.error != ErrorCode.none:
                errors = True

            region = r.region
            records: Any = b""
            if region is not None and r.size:
                records = FileRegion(region.fd, region.position, region.size)
                total += r.size
            parts.append(
                PartitionData(
                    partition=p.partition,
                    error_code=int(r.error),
                    high_watermark=r.high_watermark,
                    last_stable_offset=r.last_stable_offset if r.error == ErrorCode.none else -1,
                    log_start_offset=r.log_start_offset,
                    records=records,
                    records_size=r.size,
                    aborted_transactions=r.aborted,
                )
            )
        topics.append((t.topic, parts))
    return topics, total, errors


async def handle_fetch(server: KafkaServer, header: RequestHeader, req: Any) -> list:
    max_wait_s = max(0, ms(req.max_wait)) / 1000.0
    deadline = time.monotonic() + max_wait_s
    keys = [(t.topic, p.partition) for t in req.topics for p in t.partitions]
    while True:
        topics, total, errors = _read_all(server, req)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or errors or remaining <= 0 or not keys:
            break
        with server.metrics.purgatory.parked("Fetch"):
            await server.replicas.wait_for_data(keys, remaining)
    throttle_ms = 0
    if req.replica_id < 0:  # consumers; followers have the replication throttles
        throttle_ms = fetch_throttle(server.quotas, header.client_id, total)
        if throttle_ms > 0:
            topics = []  # as Kafka: a throttled fetch is answered empty
        server.metrics.topics.fetched(topics)
    return encode_fetch_response(
        header.api_version, header.correlation_id, topics, throttle_ms=throttle_ms
    )
