"""Requests the controller answers: ControlledShutdown (and, as it grows, elections
and reassignments). Another broker answers NOT_CONTROLLER."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ...client.connection import BrokerConnection
from ...controller.controller import NotControllerError
from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer


async def _controller_here(server: KafkaServer, wait_s: float = 5.0) -> bool:
    """True if this broker's controller is active. While ZooKeeper already names us
    but the controller thread is still taking office, wait a little."""
    deadline = asyncio.get_running_loop().time() + wait_s
    while True:
        controller = server.controller
        if controller is not None and controller.is_active:
            return True
        if server.cache.controller_id != server.config.broker_id:
            return False
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)


async def forward_to_controller(server: KafkaServer, header: RequestHeader, req: Any) -> Any | None:
    """Send a controller request on to the active controller (as Kafka's forwarding does);
    None if no controller is known. Returns the controller's response entity."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5.0
    while True:  # a broker that just started, or a controller moving: wait for one
        controller_id = server.cache.controller_id
        endpoint = server._broker_endpoint(controller_id)
        if endpoint is not None and controller_id != server.config.broker_id:
            break
        if loop.time() > deadline:
            return None
        await asyncio.sleep(0.05)
    conn = BrokerConnection(*endpoint, client_id=f"broker-{server.config.broker_id}-forward")
    await conn.connect()
    try:
        return await conn.request(header.api_key, header.api_version, req)
    finally:
        await conn.close()


async def handle_controlled_shutdown(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    controller = server.controller
    if not await _controller_here(server):
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


async def handle_elect_leaders(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    controller = server.controller
    if controller is None or not controller.is_active:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.not_controller,
            "replica_election_results": [],
        }
    wanted = None
    if req.topic_partitions is not None:
        wanted = [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    election_type = getattr(req, "election_type", 0)
    try:
        results = await asyncio.wrap_future(
            controller.submit("elect_leaders", election_type, wanted)
        )
    except NotControllerError:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.not_controller,
            "replica_election_results": [],
        }
    by_topic: dict[str, list] = {}
    for (topic, partition), (code, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            {"partition_id": partition, "error_code": code, "error_message": message}
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "replica_election_results": [
            {"topic": t, "partition_result": r} for t, r in by_topic.items()
        ],
    }


async def _controller_call(server: KafkaServer, header: RequestHeader, req: Any, name: str, *args):
    """(result, forwarded response, error code): run on our controller or forward."""
    if not await _controller_here(server):
        forwarded = await forward_to_controller(server, header, req)
        return None, forwarded, ErrorCode.not_controller
    try:
        return (
            await asyncio.wrap_future(server.controller.submit(name, *args)),
            None,
            ErrorCode.none,
        )
    except NotControllerError:
        return None, None, ErrorCode.not_controller


async def handle_alter_partition_reassignments(
    server: KafkaServer, header: RequestHeader, req: Any
) -> Any:
    requests = {
        (t.name, p.partition_index): (list(p.replicas) if p.replicas is not None else None)
        for t in req.topics
        for p in t.partitions
    }
    results, forwarded, code = await _controller_call(server, header, req, "reassign", requests)
    if forwarded is not None:
        return forwarded
    if results is None:
        return {
            "throttle_time": 0,
            "error_code": code,
            "error_message": "not the controller",
            "responses": [],
        }
    by_topic: dict[str, list] = {}
    for (topic, partition), (err, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "error_code": err, "error_message": message}
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }


async def handle_list_partition_reassignments(
    server: KafkaServer, header: RequestHeader, req: Any
) -> Any:
    listing, forwarded, code = await _controller_call(server, header, req, "list_reassignments")
    if forwarded is not None:
        return forwarded
    if listing is None:
        return {
            "throttle_time": 0,
            "error_code": code,
            "error_message": "not the controller",
            "topics": [],
        }
    wanted = None
    if req.topics is not None:
        wanted = {(t.name, p) for t in req.topics for p in t.partition_indexes}
    by_topic: dict[str, list] = {}
    for (topic, partition), (replicas, adding, removing) in sorted(listing.items()):
        if wanted is None or (topic, partition) in wanted:
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "replicas": replicas,
                    "adding_replicas": adding,
                    "removing_replicas": removing,
                }
            )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
