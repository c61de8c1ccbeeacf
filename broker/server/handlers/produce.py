"""Produce and InitProducerId."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader, ms
from ...replica.partition import DelayedProduce
from ..authorization import produce_denied
from ..metadata_cache import INTERNAL_TOPICS

ADMIN_CLIENT_ID = "__admin_client"  # Kafka's AdminUtils.AdminClientId may write them

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer


def _replication_outcome(server: KafkaServer, topic: str, result: dict, committed: bool) -> None:
    """acks=all: the error a partition's DelayedProduce ends with, if any."""
    part = server.replicas.partitions.get((topic, result["index"]))
    if not committed:
        if part is None or not part.is_leader:
            result["error_code"] = ErrorCode.not_leader_or_follower
        else:
            result["error_code"] = ErrorCode.request_timed_out
        result["error_message"] = "the append was not replicated to the ISR in time"
    elif (
        part is not None
        and part.log is not None
        and len(part.isr) < part.log.config.min_insync_replicas
    ):
        result["error_code"] = ErrorCode.not_enough_replicas_after_append
        result["error_message"] = (
            f"the ISR shrank to {part.isr}, below min.insync.replicas={part.log.config.min_insync_replicas}"
        )


def _replication_outcomes(
    server: KafkaServer, body: dict, waits: list[tuple[str, dict, int]], flags: list[bool]
) -> dict:
    for (topic, result, _off), committed in zip(waits, flags, strict=True):
        _replication_outcome(server, topic, result, committed)
    return body


async def handle_produce(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict | DelayedProduce | None:
    """Every partition is appended before this returns. With acks=all the answer is a
    DelayedProduce, whose future is of the response body: the connection serves its
    next requests while this one waits for the ISR, and still answers them in order
    (see network.Connection)."""
    acks = req.acks
    responses = []
    waits = []
    refused_all, denied = (None, ()) if server.authorizer is None else produce_denied(server, req)
    for topic in req.topic_data:
        partitions = []
        for pd in topic.partition_data:
            if acks not in (0, 1, -1):
                result = {"error_code": ErrorCode.invalid_required_acks}
            elif refused_all is not None or topic.name in denied:
                result = {"error_code": refused_all or ErrorCode.topic_authorization_failed}
            elif topic.name in INTERNAL_TOPICS and header.client_id != ADMIN_CLIENT_ID:
                result = {  # as Kafka: only the broker itself writes its internal topics
                    "error_code": ErrorCode.invalid_topic_exception,
                    "error_message": f"Cannot append to internal topic {topic.name}",
                }
            else:
                r = server.replicas.append(
                    topic.name,
                    pd.index,
                    pd.records,
                    acks=acks,
                    zstd_allowed=header.api_version >= 7,
                    legacy_allowed=header.api_version < 3,
                )
                server.metrics.topics.produced(topic.name, r, len(pd.records or b""))
                result = {
                    "error_code": r.error,
                    "error_message": r.message,
                    "base_offset": r.base_offset,
                    "log_append_time": r.log_append_time,
                    "log_start_offset": r.log_start_offset,
                }
                if r.record_errors:
                    result["record_errors"] = [
                        {"batch_index": i, "batch_index_error_message": m}
                        for i, m in r.record_errors
                    ]
                if acks == -1 and r.error == ErrorCode.none:
                    waits.append((topic.name, result, r.last_offset))
            result["index"] = pd.index
            result.setdefault("base_offset", -1)
            result.setdefault("log_append_time", -1)
            result.setdefault("log_start_offset", -1)
            partitions.append(result)
        responses.append({"name": topic.name, "partition_responses": partitions})
    body = {"responses": responses, "throttle_time": 0}
    if waits:
        timeout_s = max(ms(req.timeout), 0) / 1000.0
        answer = server.replicas.delayed_produce(
            [(t, res["index"], off) for t, res, off in waits],
            timeout_s,
            finish=partial(_replication_outcomes, server, body, waits),  # the body, when done
        )
        server.metrics.purgatory.track("Produce", answer.future)
        return answer
    if acks == 0:
        return None
    return body


async def handle_init_producer_id(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    if req.transactional_id is not None:
        from .txn import init_transactional_producer_id

        return await init_transactional_producer_id(server, header, req)
    producer_id = await server.producer_ids.next_id()
    return {
        "error_code": ErrorCode.none,
        "producer_id": producer_id,
        "producer_epoch": 0,
        "throttle_time": 0,
    }
