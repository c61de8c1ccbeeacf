"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups and DeleteGroups: thin translations between the wire and GroupCoordinator.

``__consumer_offsets`` is created on the first FindCoordinator for a group, with
offsets.topic.num.partitions partitions and offsets.topic.replication.factor replicas,
capped by the live brokers so a small cluster gets a coordinator at all (Kafka instead
refuses until enough brokers are up).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ...coordinator.group import OFFSETS_TOPIC, JoinResult, SyncResult
from ...coordinator.transaction import TRANSACTION_STATE_TOPIC
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader, ms
from .. import request_context, topic_admin
from ..authorization_responses import every_operation_without_authorizer

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

log = logging.getLogger(__name__)
E = ErrorCode
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1
AUTH_OPS_UNKNOWN = -(2**31)


# -- FindCoordinator -----------------------------------------------------------------------
async def ensure_internal_topic(
    server: KafkaServer, name: str, lock: asyncio.Lock, partitions: int, rf: int, configs
) -> bool:
    """Create an internal topic if it does not exist yet and wait for its leaders; True
    once it exists (a partition without a leader is answered per key). ``rf`` is capped
    by the live brokers; ``configs(rf)`` gives the topic configs."""
    if name in server.cache.topics:
        return True
    async with lock:
        if name in server.cache.topics:
            return True
        rf = min(rf, max(len(server.cache.brokers), 1))
        try:
            await topic_admin.create_topic(
                server, name, partitions, rf, configs=configs(rf), timeout_ms=10000
            )
            log.info("created %s (%d partitions, RF %d)", name, partitions, rf)
        except KafkaError as exc:
            if exc.code != E.topic_already_exists:
                log.warning("could not create %s: %s", name, exc.message)
                return False
            await topic_admin.wait_for_leaders(server, name, partitions, 10000)
        return name in server.cache.topics


async def ensure_offsets_topic(server: KafkaServer) -> bool:
    config = server.group_coordinator.config
    return await ensure_internal_topic(
        server,
        OFFSETS_TOPIC,
        server.group_coordinator.offsets_topic_lock,
        config.num_partitions,
        config.replication_factor,
        lambda _rf: config.offsets_topic_configs(),
    )


async def ensure_transaction_topic(server: KafkaServer) -> bool:
    config = server.txn_coordinator.config
    return await ensure_internal_topic(
        server,
        TRANSACTION_STATE_TOPIC,
        server.txn_coordinator.topic_lock,
        config.num_partitions,
        config.replication_factor,
        config.topic_configs,
    )


def _no_coordinator(key: str, code: ErrorCode, message: str) -> dict:
    return {
        "key": key,
        "error_code": code,
        "error_message": message,
        "node_id": -1,
        "host": "",
        "port": -1,
    }


async def _find(server: KafkaServer, key_type: int, key: str) -> dict:
    if key_type == KEY_TYPE_TRANSACTION:
        if not key:
            return _no_coordinator(key, E.invalid_request, "empty transactional id")
        topic = TRANSACTION_STATE_TOPIC
        ready = await ensure_transaction_topic(server)
        partition = server.txn_coordinator.manager.partition_for(key)
    elif key_type == KEY_TYPE_GROUP:
        topic = OFFSETS_TOPIC
        ready = await ensure_offsets_topic(server)
        partition = server.group_coordinator.manager.partition_for(key)
    else:
        return _no_coordinator(key, E.invalid_request, f"unknown key type {key_type}")
    if not ready:
        return _no_coordinator(key, E.coordinator_not_available, f"{topic} is not ready")
    leader = server.cache.leader_of(topic, partition)
    broker = server.cache.brokers.get(leader)
    if broker is None:
        return _no_coordinator(
            key, E.coordinator_not_available, f"{topic}-{partition} has no leader"
        )
    listener = request_context.listener_name.get()
    address = broker.endpoint(listener)
    if address is None:
        return _no_coordinator(
            key, E.coordinator_not_available, f"broker {leader} has no {listener} listener"
        )
    return {
        "key": key,
        "error_code": E.none,
        "error_message": None,
        "node_id": broker.id,
        "host": address[0],
        "port": address[1],
    }


async def handle_find_coordinator(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    key_type = getattr(req, "key_type", KEY_TYPE_GROUP)
    if header.api_version >= 4:
        coordinators = [await _find(server, key_type, key) for key in req.coordinator_keys]
        return {"throttle_time": 0, "coordinators": coordinators}
    result = await _find(server, key_type, req.key)
    result["throttle_time"] = 0
    return result


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -----------------------------------------
def _future_callback() -> tuple[asyncio.Future, Any]:
    fut = asyncio.get_running_loop().create_future()

    def callback(result) -> None:
        if not fut.done():  # the client may have gone (the awaiting task was cancelled)
            fut.set_result(result)

    return fut, callback


async def handle_join_group(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    version = header.api_version
    session_ms = ms(req.session_timeout)
    fut, callback = _future_callback()
    server.group_coordinator.join_group(
        group_id=req.group_id,
        member_id=req.member_id,
        instance_id=getattr(req, "group_instance_id", None),
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        client_id=header.client_id or "",
        client_host=request_context.client_host.get(),
        rebalance_timeout_ms=ms(req.rebalance_timeout) if version >= 1 else session_ms,
        session_timeout_ms=session_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols],
        callback=callback,
    )
    result: JoinResult = await fut
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id or "",
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": result.members or [],
    }


async def handle_sync_group(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    fut, callback = _future_callback()
    server.group_coordinator.sync_group(
        req.group_id,
        req.generation_id,
        req.member_id,
        getattr(req, "protocol_type", None),
        getattr(req, "protocol_name", None),
        getattr(req, "group_instance_id", None),
        {a.member_id: a.assignment for a in req.assignments},
        callback,
    )
    result: SyncResult = await fut
    return {
        "throttle_time": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


async def handle_heartbeat(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    error = server.group_coordinator.liveness.heartbeat(
        req.group_id, req.member_id, getattr(req, "group_instance_id", None), req.generation_id
    )
    return {"throttle_time": 0, "error_code": error}


async def handle_leave_group(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    if header.api_version >= 3:
        leaving = [
            (m.member_id, m.group_instance_id, getattr(m, "reason", None)) for m in req.members
        ]
    else:
        leaving = [(req.member_id, None, None)]
    error, results = server.group_coordinator.liveness.leave_group(req.group_id, leaving)
    if header.api_version < 3 and error == E.none:
        error = next((e for _m, _i, e in results if e != E.none), E.none)
    return {
        "throttle_time": 0,
        "error_code": error,
        "members": [
            {"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in results
        ],
    }


# -- DescribeGroups / ListGroups / DeleteGroups ----------------------------------------------
async def handle_describe_groups(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    groups = []
    for group_id in req.groups:
        error, summary = server.group_coordinator.admin.describe_group(group_id)
        groups.append(
            {
                "error_code": error,
                "group_id": group_id,
                **summary,
                "authorized_operations": AUTH_OPS_UNKNOWN,
            }
        )
    body = {"throttle_time": 0, "groups": groups}
    return every_operation_without_authorizer(server, 15, req, body)


async def handle_list_groups(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    error, groups = server.group_coordinator.admin.list_groups(
        set(getattr(req, "states_filter", None) or ()),
        set(getattr(req, "types_filter", None) or ()),
    )
    return {"throttle_time": 0, "error_code": error, "groups": groups}


async def handle_delete_groups(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    errors = server.group_coordinator.admin.delete_groups(list(req.groups_names))
    return {
        "throttle_time": 0,
        "results": [{"group_id": g, "error_code": e} for g, e in errors.items()],
    }
