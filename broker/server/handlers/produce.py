"""Produce and InitProducerId."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer


async def handle_produce(server: KafkaServer, header: RequestHeader, req: Any) -> dict | None:
    acks = req.acks
    responses = []
    for topic in req.topic_data:
        partitions = []
        for pd in topic.partition_data:
            if acks not in (0, 1, -1):
                result = {"error_code": ErrorCode.invalid_required_acks}
            elif req.transactional_id is not None:
                result = {
                    "error_code": ErrorCode.transactional_id_authorization_failed,
                    "error_message": "transactions are not supported by this broker yet",
                }
            else:
                r = server.replicas.append(
                    topic.name,
                    pd.index,
                    pd.records,
                    acks=acks,
                    zstd_allowed=header.api_version >= 7,
                )
                result = {
                    "error_code": r.error,
                    "error_message": r.message,
                    "base_offset": r.base_offset,
                    "log_append_time": r.log_append_time,
                    "log_start_offset": r.log_start_offset,
                }
            result["index"] = pd.index
            result.setdefault("base_offset", -1)
            result.setdefault("log_append_time", -1)
            result.setdefault("log_start_offset", -1)
            partitions.append(result)
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        return None
    return {"responses": responses, "throttle_time": 0}


async def handle_init_producer_id(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    if req.transactional_id is not None:
        return {
            "error_code": ErrorCode.coordinator_not_available,
            "producer_id": -1,
            "producer_epoch": -1,
            "throttle_time": 0,
        }
    producer_id = await server.producer_ids.next_id()
    return {
        "error_code": ErrorCode.none,
        "producer_id": producer_id,
        "producer_epoch": 0,
        "throttle_time": 0,
    }
