"""ListOffsets v0 (Kafka's handleListOffsetRequestV0): up to max_num_offsets offsets
per partition, newest first. Latest (-1) is the high watermark for clients, earliest
(-2) the log start offset; a timestamp gives the first offset at or after it."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ...protocol import list_offsets_v0 as v0
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import ProtocolError
from ..authorization import describe_denied

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

LATEST, EARLIEST = -1, -2


def _offsets(server: KafkaServer, topic: str, p: v0.PartitionRequest, replica: bool) -> list[int]:
    part = server.replicas.get_partition(topic, p.partition)
    log = part.require_leader()
    if p.max_num_offsets < 0:
        raise KafkaError(ErrorCode.invalid_request, "negative max_num_offsets")
    if p.timestamp == LATEST:
        offsets = [log.log_end_offset if replica else log.high_watermark]
    elif p.timestamp == EARLIEST:
        offsets = [log.log_start_offset]
    else:
        found = log.fetch_offset_by_timestamp(p.timestamp)
        offsets = [found.offset] if found is not None and found.offset < log.high_watermark else []
    return offsets[: p.max_num_offsets]


async def handle(server: KafkaServer, frame: bytes) -> bytes:
    try:
        req = v0.parse_request(frame)
    except (ValueError, struct.error) as exc:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(f"malformed ListOffsets v0: {exc}") from None
    topics = []
    denied = () if server.authorizer is None else describe_denied(server, req.topics)
    for name, parts in req.topics:
        answers = []
        for p in parts:
            try:
                if name in denied:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                answers.append((p.partition, 0, _offsets(server, name, p, req.replica_id >= 0)))
            except KafkaError as exc:
                answers.append((p.partition, int(exc.code), []))
        topics.append((name, answers))
    return v0.encode_response(req.correlation_id, topics)
