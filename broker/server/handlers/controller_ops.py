"""Requests the controller answers: ControlledShutdown (and, as it grows, elections
and reassignments). Another broker answers NOT_CONTROLLER."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ...controller.controller import NotControllerError
from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer


async def handle_controlled_shutdown(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    controller = server.controller
    if controller is None or not controller.is_active:
        return {"error_code": ErrorCode.not_controller, "remaining_partitions": []}
    try:
        remaining = await asyncio.wrap_future(
            controller.submit("controlled_shutdown", req.broker_id)
        )
    except NotControllerError:
        return {"error_code": ErrorCode.not_controller, "remaining_partitions": []}
    return {
        "error_code": ErrorCode.none,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }
