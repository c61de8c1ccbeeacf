"""ListOffsets v1+ (earliest, latest, max timestamp, by timestamp; v0 in list_offsets_v0)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.list_offsets_response import OffsetAnswer, encode_list_offsets_response
from ...protocol.messages import RequestHeader
from ..authorization import describe_denied

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


DEBUGGING_REPLICA_ID = -2


def _list_offset(
    server: KafkaServer, topic: str, index: int, p: Any, replica_id: int = -1, committed=False
) -> OffsetAnswer:
    part = server.replicas.get_partition(topic, index)
    ts = p.timestamp
    epoch = part.leader_epoch
    if replica_id == DEBUGGING_REPLICA_ID and part.log is not None:
        # Kafka's debugging replica id reads any replica, and "latest" is its own LEO
        # (no isolation level): how tools see each replica's log end offset
        log = part.log
        if ts == LATEST:
            return OffsetAnswer(index, 0, -1, log.log_end_offset, epoch)
    else:
        log = part.require_leader()
        part.check_leader_epoch(getattr(p, "current_leader_epoch", -1))
    if ts == EARLIEST:
        return OffsetAnswer(index, 0, -1, log.log_start_offset, epoch)
    if ts == LATEST:  # read_committed: the last stable offset
        latest = log.last_stable_offset if committed else log.high_watermark
        return OffsetAnswer(index, 0, -1, latest, epoch)
    if ts < 0 and ts != MAX_TIMESTAMP:
        raise KafkaError(ErrorCode.invalid_request, f"invalid timestamp {ts}")
    found = log.fetch_offset_by_timestamp(ts)
    bound = log.last_stable_offset if committed else log.high_watermark
    if found is None or found.offset >= bound:
        return OffsetAnswer(index, 0, -1, -1, -1)
    found_epoch = found.leader_epoch if found.leader_epoch is not None else -1
    return OffsetAnswer(index, 0, found.timestamp, found.offset, found_epoch)


async def handle_list_offsets(server: KafkaServer, header: RequestHeader, req: Any) -> bytes:
    replica_id = getattr(req, "replica_id", -1)
    committed = getattr(req, "isolation_level", 0) == 1
    denied = () if server.authorizer is None else describe_denied(server, req.topics)
    topics = []
    for t in req.topics:
        answers = []
        for p in t.partitions:
            try:
                if t.name in denied:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                answers.append(
                    _list_offset(server, t.name, p.partition_index, p, replica_id, committed)
                )
            except KafkaError as exc:
                answers.append(OffsetAnswer(p.partition_index, int(exc.code), -1, -1, -1))
        topics.append((t.name, answers))
    return encode_list_offsets_response(header.api_version, header.correlation_id, topics)
