"""A follower's incremental Fetch in its fetch session: the leader's short path (issue 24).

With acks=all every record costs each follower about one round trip, so this is the
replication hot path. It does what handle_fetch's general path does for exactly this
shape of request (a follower, an incremental fetch in a live session, Fetch v12), and
the response bytes are the same (tests/test_follower_fetch_fast.py pins them), in fewer
steps: one pass over the session's partitions per read, plain tuples in place of
PartitionData, the session's news check folded into the encoding pass, and the answer
written by ``encode_follower_fetch_response`` (one struct call per partition).
Everything else (a full fetch, a consumer, an older version, a refused session) takes
the general path.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ...protocol.fetch_response import encode_follower_fetch_response
from ...protocol.messages import ms
from ...replica.partition import now_ms
from ..fetch_session import FetchSession
from ..network import FileRegion

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

FAST_VERSION = 12  # the version our followers send (protocol/fetch_request.py)
_NONE = ErrorCode.none


def _read_pass(
    server: KafkaServer, req: Any, session: FetchSession, named: set, budget: int, now: int
) -> tuple[list, list, int, bool]:
    """handle_fetch's _read_all for a follower's session: (topics of (name, [(partition,
    error, hw, last stable, log start, records, size)]), the keys read or rested, bytes,
    answer now)."""
    replica_id = req.replica_id
    read = server.replicas.read_for_follower
    idle = server.replicas.follower_idle
    total = 0
    at_once = False
    topics = []
    keys = []
    for topic, partitions in session.by_topic():
        parts = []
        for p in partitions:
            index = p.partition
            keys.append((topic, index))
            if (topic, index) not in named and idle(replica_id, topic, p, now, session):
                continue
            remaining = budget - total
            limit = min(p.partition_max_bytes, remaining) if remaining > 0 else 0
            r = read(
                replica_id,
                topic,
                index,
                p.fetch_offset,
                limit if total > 0 else max(limit, 1),
                p.current_leader_epoch,
                p.fetcher_log_start,
                now,
            )
            error = r.error
            if error != _NONE or r.hw_news or r.preferred_read_replica >= 0:
                at_once = True
            region = r.region
            size = r.size if region is not None else 0
            if size:
                records: Any = FileRegion(region.fd, region.position, size)
                total += size
            else:
                records = b""
            parts.append(
                (
                    index,
                    int(error),
                    r.high_watermark,
                    r.last_stable_offset if error == _NONE else -1,
                    r.log_start_offset,
                    records,
                    size,
                )
            )
        topics.append((topic, parts))
    return topics, keys, total, at_once


def _news(session: FetchSession, topics: list) -> list:
    """handle_fetch's _news_only for an incremental fetch: the partitions that bring the
    follower something it has not heard; those that returned records go last."""
    out = []
    served = []
    held = session.partitions
    for topic, parts in topics:
        kept = []
        for part in parts:
            index, error, hw, lso, start, _records, size = part
            sp = held.get((topic, index))
            if sp is None:
                continue
            if (
                size > 0
                or error != 0
                or hw != sp.high_watermark
                or lso != sp.last_stable_offset
                or start != sp.log_start_offset
            ):
                sp.high_watermark = hw
                sp.last_stable_offset = lso
                sp.log_start_offset = start
                kept.append(part)
            if size:
                served.append((topic, index))
        if kept:
            out.append((topic, kept))
    for key in served:
        session.served(key)
    return out


async def serve_follower_fetch(
    server: KafkaServer, correlation_id: int, req: Any, session: FetchSession
) -> list:
    """Answer follower ``req``'s incremental fetch in ``session`` (begun by the cache)."""
    named = {(t.topic, p.partition) for t in req.topics for p in t.partitions}
    session.follower_round(req.replica_id, now_ms())
    req_max_bytes = req.max_bytes
    budget = min(req_max_bytes, server.config["fetch.max.bytes"]) if req_max_bytes > 0 else 0
    deadline = time.monotonic() + max(0, ms(req.max_wait)) / 1000.0
    while True:
        topics, keys, total, at_once = _read_pass(server, req, session, named, budget, now_ms())
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or at_once or remaining <= 0:
            break
        with server.metrics.purgatory.parked("Fetch"):
            await server.replicas.wait_for_data(keys, remaining, session, follower=True)
    return encode_follower_fetch_response(correlation_id, session.id, _news(session, topics))
