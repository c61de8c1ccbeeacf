"""Requests brokers take from the controller: LeaderAndIsr, UpdateMetadata, StopReplica.

Each is fenced twice, as Kafka's KafkaApis does, and a fenced request changes nothing:

- by the broker epoch (KIP-380): a request carrying the epoch of an older registration
  of this broker (the czxid of an earlier ``/brokers/ids/<id>`` znode: sent to its
  previous life) gets STALE_BROKER_EPOCH; so does every request carrying one while our
  ZooKeeper session is lost and the registration gone (the next one is newer); -1
  (versions without the field) is taken;
- by the controller epoch: a request from an older controller than one this broker
  has already heard from gets STALE_CONTROLLER_EPOCH.

LeaderAndIsr with a leader epoch older than the partition's current one is refused
for that partition the same way, as Kafka does.
"""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader
from ...replica.partition import PartitionState
from ...zk.znodes import SECURITY_PROTOCOL_IDS, BrokerInfo

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

log = logging.getLogger(__name__)
PROTOCOL_NAMES = {i: name for name, i in SECURITY_PROTOCOL_IDS.items()}


def _fenced(server: KafkaServer, req: Any) -> ErrorCode | None:
    """The error a controller request is refused with, None when it is taken."""
    epoch = getattr(req, "broker_epoch", -1)
    if epoch >= 0 and (
        epoch < server.broker_epoch or (server.zk_session_lost and epoch <= server.broker_epoch)
    ):
        log.warning(
            "refused a request from controller %d for broker epoch %d: ours is %d%s",
            req.controller_id,
            epoch,
            server.broker_epoch,
            " (ZooKeeper session lost: registering again)" if server.zk_session_lost else "",
        )
        return ErrorCode.stale_broker_epoch
    if req.controller_epoch < server.controller_epoch_seen:
        log.warning(
            "refused a request from controller %d at epoch %d: the current epoch is %d",
            req.controller_id,
            req.controller_epoch,
            server.controller_epoch_seen,
        )
        return ErrorCode.stale_controller_epoch
    server.controller_epoch_seen = req.controller_epoch
    return None


def _partition_state(ps: Any) -> PartitionState:
    """A partition state of a LeaderAndIsr or UpdateMetadata request."""
    return PartitionState(
        leader=ps.leader,
        leader_epoch=ps.leader_epoch,
        isr=list(ps.isr),
        replicas=list(ps.replicas),
        controller_epoch=ps.controller_epoch,
        zk_version=ps.zk_version,
    )


async def handle_leader_and_isr(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    if (code := _fenced(server, req)) is not None:
        return {"error_code": code, "partition_errors": []}
    states = {
        (topic.topic_name, ps.partition_index): _partition_state(ps)
        for topic in req.topic_states
        for ps in topic.partition_states
    }
    async with server.replicas.state_change_lock:  # one LeaderAndIsr or StopReplica at a time
        await _create_logs(server, states)
        return _apply_leader_and_isr(server, states)


async def _create_logs(server: KafkaServer, states: dict) -> None:
    try:
        await server.replicas.create_logs(states)
    except Exception:  # noqa: BLE001 - apply_state creates them one by one instead
        log.exception("creating %d new logs at once failed", len(states))


def _apply_leader_and_isr(server: KafkaServer, states: dict) -> dict:
    errors = []
    for (topic, index), state in states.items():
        code = ErrorCode.none
        part = server.replicas.partitions.get((topic, index))
        current = part.state if part is not None else None
        if current is not None and state.leader_epoch < current.leader_epoch:
            code = ErrorCode.stale_controller_epoch
        else:
            try:
                server.replicas.apply_state(topic, index, state)
            except Exception:  # noqa: BLE001 - one bad partition must not stop the rest
                log.exception("could not apply %s-%d", topic, index)
                code = ErrorCode.kafka_storage_error
        errors.append({"topic_name": topic, "partition_index": index, "error_code": code})
    return {"error_code": ErrorCode.none, "partition_errors": errors}


async def handle_update_metadata(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    if (code := _fenced(server, req)) is not None:
        return {"error_code": code}
    cache = server.cache
    brokers = {}
    for b in req.live_brokers:
        endpoints = [f"{e.listener}://{e.host}:{e.port}" for e in b.endpoints]
        first = b.endpoints[0]
        protocols = {e.listener: PROTOCOL_NAMES.get(e.security_protocol, "") for e in b.endpoints}
        brokers[b.id] = BrokerInfo(
            b.id, first.host, first.port, endpoints, rack=b.rack, protocols=protocols
        )
    topics = []
    for t in req.topic_states:
        topic_id = (
            base64.urlsafe_b64encode(t.topic_id.bytes).rstrip(b"=").decode() if t.topic_id else ""
        )
        states = {ps.partition_index: _partition_state(ps) for ps in t.partition_states}
        topics.append((t.topic_name, topic_id, states))
    deleted = cache.update(req.controller_epoch, brokers, topics)
    server.metrics.topics.retain(cache.topics)  # deleted topics' metrics go, as in Kafka
    cache.controller_id = req.controller_id
    server.metadata_updated()
    if deleted and server.group_coordinator is not None:
        server.group_coordinator.admin.handle_deleted_partitions(deleted)
    return {"error_code": ErrorCode.none}


async def handle_stop_replica(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    if (code := _fenced(server, req)) is not None:
        return {"error_code": code, "partition_errors": []}
    async with server.replicas.state_change_lock:
        return _stop_replicas(server, req)


def _stop_replicas(server: KafkaServer, req: Any) -> dict:
    errors = []
    for topic in req.topic_states:
        for ps in topic.partition_states:
            server.replicas.stop_replica(
                topic.topic_name, ps.partition_index, delete=ps.delete_partition
            )
            log.info(
                "%s-%d: stopped by the controller%s",
                topic.topic_name,
                ps.partition_index,
                " and deleted" if ps.delete_partition else "",
            )
            errors.append(
                {
                    "topic_name": topic.topic_name,
                    "partition_index": ps.partition_index,
                    "error_code": ErrorCode.none,
                }
            )
    return {"error_code": ErrorCode.none, "partition_errors": errors}
