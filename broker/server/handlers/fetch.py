"""Fetch: long poll on min bytes / max wait, size limits, record data by sendfile,
fetch sessions (KIP-227, see ../fetch_session.py), fetch from follower (KIP-392: from v11
a consumer may read from a follower, and a leader with a replica selector may point it
to one with preferred_read_replica), and down-conversion to message format v0/v1 for
Fetch v0-v3 (Kafka's KafkaApis.maybeConvertFetchedData)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.fetch_response import PartitionData, encode_fetch_response
from ...protocol.legacy_records import down_convert
from ...protocol.messages import RequestHeader, ms
from ...replica.manager import FetchResult
from ...replica.partition import now_ms
from ..authorization import fetch_denied
from ..fetch_session import FetchSession
from ..network import FileRegion
from ..quotas import fetch_throttle
from .follower_fetch import FAST_VERSION, serve_follower_fetch

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

INT32_MAX = 2**31 - 1  # Fetch v0-v2 have no max_bytes: no response limit, as Kafka
ZSTD_FETCH_VERSION = 10  # Fetch v10+ may carry zstd batches (KIP-110)
V2_FETCH_VERSION = 4  # Fetch v4+ carries record batch v2; older ones are down-converted


def _old_fetcher_records(
    server: KafkaServer, topic: str, fetch_offset: int, version: int, region: Any
) -> tuple[ErrorCode, bytes | None]:
    """For a consumer's Fetch below v10 (zstd) or v4 (message format v0/v1), what Kafka's
    maybeConvertFetchedData does: (error for the partition, the records converted down,
    or None when nothing is to be converted)."""
    config = server.replicas.topic_config(topic)
    if version < ZSTD_FETCH_VERSION and config.compression_type == "zstd":
        return ErrorCode.unsupported_compression_type, None
    if version >= V2_FETCH_VERSION:
        return ErrorCode.none, None
    if not config.message_downconversion_enable:  # message.downconversion.enable=false
        return ErrorCode.unsupported_version, None
    if region is None or not region.size:
        return ErrorCode.none, b""
    data = os.pread(region.fd, region.size, region.position)
    try:
        return ErrorCode.none, down_convert(data, 0 if version <= 1 else 1, fetch_offset)
    except KafkaError as exc:
        return exc.code, None


FETCH_FROM_FOLLOWER_VERSION = 11  # KIP-392: rack_id and preferred_read_replica


def _follower_log_start(p: Any) -> int:
    """The follower's log start offset: its session's record of it, or the request's."""
    told = getattr(p, "fetcher_log_start", None)
    return told if told is not None else getattr(p, "log_start_offset", -1)


def _read_all(
    server: KafkaServer,
    req: Any,
    wanted: list,
    named: set | None = None,
    session: FetchSession | None = None,
    client_rack: str | None = None,
    version: int = V2_FETCH_VERSION,
) -> tuple[list, int, bool]:
    """One pass over ``wanted`` ((topic, partitions) with the request's partition fields:
    the request's own, or its session's); returns (topics, bytes, answer now: an
    error, a preferred read replica, or a HW the follower has not heard).
    ``client_rack``: a consumer's rack_id (v11+), None for older versions.
    ``version``: the request's; below v4 a consumer's records are converted down.
    ``named``: a follower's incremental fetch, with the partitions it named; the others
    with nothing new for it (ReplicaManager.follower_idle) are skipped, as the session
    would leave them out of the answer anyway, and rest in ``session`` from then on (not
    even visited until touched)."""
    req_max_bytes = getattr(req, "max_bytes", INT32_MAX)
    budget = min(req_max_bytes, server.config["fetch.max.bytes"]) if req_max_bytes > 0 else 0
    total = 0
    at_once = False
    topics = []
    committed = getattr(req, "isolation_level", 0) == 1
    idle = server.replicas.follower_idle if named is not None else None
    now = now_ms()
    for topic, partitions in wanted:
        parts = []
        for p in partitions:
            if (
                idle is not None
                and (topic, p.partition) not in named
                and idle(req.replica_id, topic, p, now, session)
            ):
                continue
            remaining = budget - total
            limit = min(p.partition_max_bytes, remaining) if remaining > 0 else 0
            max_bytes = limit if total > 0 else max(limit, 1)
            if req.replica_id >= 0:
                r = server.replicas.read_for_follower(
                    req.replica_id,
                    topic,
                    p.partition,
                    p.fetch_offset,
                    max_bytes,
                    getattr(p, "current_leader_epoch", -1),  # Fetch v9+
                    _follower_log_start(p),
                    now,
                )
            else:
                r = server.replicas.read(
                    topic,
                    p.partition,
                    p.fetch_offset,
                    max_bytes,
                    current_leader_epoch=getattr(p, "current_leader_epoch", -1),  # Fetch v9+
                    isolation_committed=committed,
                    min_one_message=total == 0,
                    client_rack=client_rack,
                )
            if r.error != ErrorCode.none or r.preferred_read_replica >= 0 or r.hw_news:
                at_once = True

            region = r.region
            records: Any = b""
            if req.replica_id < 0 and version < ZSTD_FETCH_VERSION and r.error == ErrorCode.none:
                error, converted = _old_fetcher_records(
                    server, topic, p.fetch_offset, version, region
                )
                if error != ErrorCode.none:  # Kafka's partitionResponse(tp, error)
                    at_once = True
                    r = FetchResult(error)
                elif converted is not None:
                    records, region = converted, None
                    total += len(converted)
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
                    records_size=r.size if region is not None else len(records),
                    aborted_transactions=r.aborted,
                    preferred_read_replica=r.preferred_read_replica,
                )
            )
        topics.append((topic, parts))
    return topics, total, at_once


def _news_only(session: FetchSession, topics: list, incremental: bool) -> list:
    """What the session's fetcher has not heard: every partition on a full fetch, only
    the changed ones on an incremental one. The session remembers what it answered,
    and (as Kafka) moves the partitions that returned records to the end of its order,
    so the next fetch's byte budget goes to the others first."""
    out = []
    served = []
    for topic, parts in topics:
        kept = []
        for p in parts:
            key = (topic, p.partition)
            sp = session.partitions.get(key)
            if sp is None:
                continue
            if not incremental or sp.changed(p):
                sp.heard(p)
                kept.append(p)
            if p.records_size:
                served.append(key)
        if kept:
            out.append((topic, kept))
    for key in served:
        session.served(key)
    return out


async def handle_fetch(server: KafkaServer, header: RequestHeader, req: Any) -> list:
    error, session, incremental = server.fetch_sessions.begin(req)
    if error != ErrorCode.none:  # the fetcher starts over with a full fetch
        return encode_fetch_response(
            header.api_version, header.correlation_id, [], error_code=error
        )
    if incremental and req.replica_id >= 0 and header.api_version == FAST_VERSION:
        return await serve_follower_fetch(server, header.correlation_id, req, session)
    named = None
    follower_session = None  # a follower's incremental fetch: its resting partitions skipped
    if incremental and req.replica_id >= 0:
        named = {(t.topic, p.partition) for t in req.topics for p in t.partitions}
        follower_session = session
        session.follower_round(req.replica_id, now_ms())
    if session is not None:
        wanted = session.by_topic()
    else:
        wanted = [(t.topic, t.partitions) for t in req.topics]
    refused = []
    if server.authorizer is not None and req.replica_id < 0:  # followers: ClusterAction, before
        wanted, refused = fetch_denied(server, wanted)
    client_rack = None
    if header.api_version >= FETCH_FROM_FOLLOWER_VERSION and req.replica_id < 0:
        client_rack = req.rack_id or ""
    max_wait_s = max(0, ms(req.max_wait)) / 1000.0
    deadline = time.monotonic() + max_wait_s
    while True:
        topics, total, at_once = _read_all(
            server, req, wanted, named, follower_session, client_rack, header.api_version
        )
        keys = [(topic, p.partition) for topic, parts in wanted for p in parts]
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or at_once or remaining <= 0:
            break
        if not keys and follower_session is None:
            break
        with server.metrics.purgatory.parked("Fetch"):
            await server.replicas.wait_for_data(
                keys, remaining, follower_session, follower=req.replica_id >= 0
            )
        if follower_session is not None:  # a resting partition may have woken it
            wanted = session.by_topic()
    throttle_ms = 0
    if req.replica_id < 0:  # consumers; followers have the replication throttles
        throttle_ms = fetch_throttle(server.quotas, header.client_id, total)
        if throttle_ms > 0:
            topics = []  # as Kafka: a throttled fetch is answered empty
        server.metrics.topics.fetched(topics)
    if refused:
        topics = topics + refused
    session_id = 0
    if session is not None:
        session_id = session.id
        topics = _news_only(session, topics, incremental)
    return encode_fetch_response(
        header.api_version,
        header.correlation_id,
        topics,
        throttle_ms=throttle_ms,
        session_id=session_id,
    )
