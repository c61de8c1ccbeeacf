"""DeleteRecords: move a partition's log start offset up (KIP-107), on its leader."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer


async def handle_delete_records(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    topics = []
    for t in req.topics:
        partitions = []
        for p in t.partitions:
            try:
                part = server.replicas.get_partition(t.name, p.partition_index)
                log = part.require_leader()
                offset = log.high_watermark if p.offset == -1 else p.offset
                low = log.delete_records_before(offset)
                partitions.append(
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": low,
                        "error_code": ErrorCode.none,
                    }
                )
            except KafkaError as exc:
                partitions.append(
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": -1,
                        "error_code": exc.code,
                    }
                )
        topics.append({"name": t.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
