"""OffsetForLeaderEpoch: the leader's end offset for an epoch (KIP-101/279)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer


async def handle_offset_for_leader_epoch(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict:
    """The leader's end offset for a follower's (or client's) last epoch (KIP-101/279)."""
    topics = []
    for t in req.topics:
        partitions = []
        for p in t.partitions:
            entry = {"partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            try:
                part = server.replicas.get_partition(t.topic, p.partition)
                log = part.require_leader()
                part.check_leader_epoch(getattr(p, "current_leader_epoch", -1))  # v2+
                found = log.end_offset_for_epoch(p.leader_epoch)
                if found is not None:
                    entry["leader_epoch"], entry["end_offset"] = found
                entry["error_code"] = ErrorCode.none
            except KafkaError as exc:
                entry["error_code"] = exc.code
            partitions.append(entry)
        topics.append({"topic": t.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
