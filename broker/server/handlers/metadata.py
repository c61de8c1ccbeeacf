"""Metadata (with topic auto-creation) and DescribeCluster, answered from the cache."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader
from ...zk.znodes import BrokerInfo, topic_id_bytes
from .. import authorization, request_context, topic_admin
from ..authorization_responses import every_operation_without_authorizer
from ..metadata_cache import INTERNAL_TOPICS, TopicMeta

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

log = logging.getLogger(__name__)
AUTH_OPS_UNKNOWN = -(2**31)


def _address(broker: BrokerInfo | None) -> tuple[str, int] | None:
    """The broker's (host, port) on the listener the current request came in on."""
    return broker.endpoint(request_context.listener_name.get()) if broker else None


def _brokers_on_listener(cache) -> list[tuple[BrokerInfo, tuple[str, int]]]:
    """Live brokers with an endpoint on the client's listener, as Kafka lists them: a
    client that connected on EXTERNAL is told only EXTERNAL addresses."""
    brokers = sorted(cache.brokers.values(), key=lambda b: b.id)
    return [(b, address) for b in brokers if (address := _address(b)) is not None]


def _topic_entry(server: KafkaServer, meta: TopicMeta) -> dict:
    cache = server.cache
    partitions = []
    for index in sorted(meta.replicas):
        replicas = meta.replicas[index]
        state = meta.states.get(index)
        leader = state.leader if state else -1
        error = ErrorCode.none
        if state is None or leader < 0 or not cache.alive(leader):
            error = ErrorCode.leader_not_available
            leader = -1
        elif _address(cache.brokers.get(leader)) is None:
            error = ErrorCode.listener_not_found  # alive, but not on this client's listener
            leader = -1
        partitions.append(
            {
                "error_code": error,
                "partition_index": index,
                "leader_id": leader,
                "leader_epoch": state.leader_epoch if state else -1,
                "replica_nodes": replicas,
                "isr_nodes": state.isr if state else [],
                "offline_replicas": [b for b in replicas if not cache.alive(b)],
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": meta.name,
        "topic_id": topic_id_bytes(meta.topic_id),
        "is_internal": meta.is_internal,
        "partitions": partitions,
        "topic_authorized_operations": AUTH_OPS_UNKNOWN,
    }


async def _auto_create(server: KafkaServer, name: str) -> dict:
    try:
        topic_admin.validate_topic_name(name)
    except KafkaError as exc:
        return {"error_code": exc.code, "name": name, "is_internal": False, "partitions": []}
    try:
        await topic_admin.create_topic(server, name, -1, -1, timeout_ms=2000)
        log.info("auto-created topic %s", name)
    except KafkaError as exc:
        if exc.code != ErrorCode.topic_already_exists:
            log.warning("auto-creation of topic %s failed: %s", name, exc.message)
            code = exc.code
            if code == ErrorCode.invalid_replication_factor:
                code = ErrorCode.leader_not_available
            return {"error_code": code, "name": name, "is_internal": False, "partitions": []}
    meta = server.cache.topics.get(name)
    if meta is None or len(meta.states) < len(meta.replicas):
        return {
            "error_code": ErrorCode.leader_not_available,
            "name": name,
            "is_internal": False,
            "partitions": [],
        }
    return _topic_entry(server, meta)


def _authorized(server: KafkaServer, name: str | None, allow_auto: bool) -> bool:
    """Describe on the topic; and Create (topic or cluster) if asking would create it."""
    if name is None:
        return True  # by topic id: checked once the name is known
    if not authorization.may_describe_topic(server, name):
        return False
    creates = (
        name not in server.cache.topics
        and allow_auto
        and server.config["auto.create.topics.enable"]
        and name not in INTERNAL_TOPICS
    )
    return not creates or authorization.may_create_topic(server, name)


def _refused(name: str) -> dict:
    return {
        "error_code": ErrorCode.topic_authorization_failed,
        "name": name,
        "is_internal": False,
        "partitions": [],
    }


async def handle_metadata(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    await server.wait_metadata()
    cache = server.cache
    version = header.api_version
    requested = req.topics
    if requested is not None and version == 0 and len(requested) == 0:
        requested = None  # v0: an empty list means all topics
    allow_auto = getattr(req, "allow_auto_topic_creation", True)
    topics = []
    if requested is None:
        names = sorted(cache.topics)
        if server.authorizer is not None:  # topics it may not Describe are not listed
            names = [n for n in names if authorization.may_describe_topic(server, n)]
        topics = [_topic_entry(server, cache.topics[n]) for n in names]
    else:
        for item in requested:
            if server.authorizer is not None and not _authorized(server, item.name, allow_auto):
                topics.append(_refused(item.name))
                continue
            name = item.name
            if name is None and getattr(item, "topic_id", None) is not None:
                meta = next(
                    (
                        m
                        for m in cache.topics.values()
                        if topic_id_bytes(m.topic_id) == item.topic_id.bytes
                    ),
                    None,
                )
                if meta is not None and (
                    server.authorizer is None or authorization.may_describe_topic(server, meta.name)
                ):
                    topics.append(_topic_entry(server, meta))
                elif meta is not None:
                    topics.append(_refused(meta.name))
                else:
                    topics.append(
                        {"error_code": ErrorCode.unknown_topic_id, "name": None, "partitions": []}
                    )
                continue
            meta = cache.topics.get(name)
            if meta is not None:
                topics.append(_topic_entry(server, meta))
            elif (
                allow_auto
                and server.config["auto.create.topics.enable"]
                and name not in INTERNAL_TOPICS
            ):
                topics.append(await _auto_create(server, name))
            else:
                try:
                    topic_admin.validate_topic_name(name)
                    code = ErrorCode.unknown_topic_or_partition
                except KafkaError as exc:
                    code = exc.code
                topics.append(
                    {"error_code": code, "name": name, "is_internal": False, "partitions": []}
                )
    body = {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.id, "host": host, "port": port, "rack": b.rack}
            for b, (host, port) in _brokers_on_listener(cache)
        ],
        "cluster_id": cache.cluster_id,
        "controller_id": await server.controller_id(),
        "topics": topics,
        "cluster_authorized_operations": AUTH_OPS_UNKNOWN,
    }
    return every_operation_without_authorizer(server, 3, req, body)


async def handle_describe_cluster(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    await server.wait_metadata()
    cache = server.cache
    body = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": 1,
        "cluster_id": cache.cluster_id,
        "controller_id": await server.controller_id(),
        "brokers": [
            {"broker_id": b.id, "host": host, "port": port, "rack": b.rack}
            for b, (host, port) in _brokers_on_listener(cache)
        ],
        "cluster_authorized_operations": AUTH_OPS_UNKNOWN,
    }
    return every_operation_without_authorizer(server, 60, req, body)
