"""Requests the controller answers: ControlledShutdown, ElectLeaders,
AlterPartitionReassignments and ListPartitionReassignments. Another broker answers
NOT_CONTROLLER (Kafka in ZooKeeper mode); clients find the controller in Metadata."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ...controller.controller import NotControllerError, StaleBrokerEpochError
from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

log = logging.getLogger(__name__)


async def controller_here(server: KafkaServer, wait_s: float = 5.0) -> bool:
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


async def handle_controlled_shutdown(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    controller = server.controller
    if not await controller_here(server):
        return {"error_code": ErrorCode.not_controller, "remaining_partitions": []}
    try:
        remaining = await asyncio.wrap_future(
            controller.submit("controlled_shutdown", req.broker_id, req.broker_epoch)
        )
    except NotControllerError:
        return {"error_code": ErrorCode.not_controller, "remaining_partitions": []}
    except StaleBrokerEpochError as exc:
        log.warning("refused a controlled shutdown: %s", exc)
        return {"error_code": ErrorCode.stale_broker_epoch, "remaining_partitions": []}
    return {
        "error_code": ErrorCode.none,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }


async def handle_elect_leaders(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    wanted = None
    if req.topic_partitions is not None:
        wanted = [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    election_type = getattr(req, "election_type", 0)  # v0 has only preferred elections
    results, code = await _controller_call(server, "elect_leaders", election_type, wanted)
    if results is None:
        return {"throttle_time": 0, "error_code": code, "replica_election_results": []}
    if wanted is None:  # as Kafka: an election over all partitions leaves out the no-ops
        results = {k: v for k, v in results.items() if v[0] != ErrorCode.election_not_needed}
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


async def _controller_call(server: KafkaServer, name: str, *args):
    """(result, error code): run ``name`` on this broker's active controller; another
    broker answers NOT_CONTROLLER, as Kafka's do, and clients retry on the controller."""
    if not await controller_here(server):
        return None, ErrorCode.not_controller
    try:
        return await asyncio.wrap_future(server.controller.submit(name, *args)), ErrorCode.none
    except NotControllerError:
        return None, ErrorCode.not_controller


NOT_CONTROLLER_MESSAGE = "This broker is not the controller."


async def handle_alter_partition_reassignments(
    server: KafkaServer, header: RequestHeader, req: Any
) -> Any:
    requests = {
        (t.name, p.partition_index): (list(p.replicas) if p.replicas is not None else None)
        for t in req.topics
        for p in t.partitions
    }
    results, code = await _controller_call(server, "reassign", requests)
    if results is None:
        return {
            "throttle_time": 0,
            "error_code": code,
            "error_message": NOT_CONTROLLER_MESSAGE,
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
    listing, code = await _controller_call(server, "list_reassignments")
    if listing is None:
        return {
            "throttle_time": 0,
            "error_code": code,
            "error_message": NOT_CONTROLLER_MESSAGE,
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
