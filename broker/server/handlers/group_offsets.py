"""OffsetCommit, OffsetFetch and OffsetDelete: committed offsets of groups.

A commit is answered once its record in ``__consumer_offsets`` is committed
(acks=all); partitions of topics this cluster does not have answer
UNKNOWN_TOPIC_OR_PARTITION and are not written, as in Kafka. OffsetCommit v0 and
OffsetFetch v0 (clients of Kafka 0.8.1) use ZooKeeper's
``/consumers/<group>/offsets/<topic>/<partition>`` instead, as Kafka 3.x in ZooKeeper
mode still does.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ...coordinator.group import OffsetAndMetadata
from ...coordinator.group.group import now_ms
from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader, ms

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

E = ErrorCode
DEFAULT_RETENTION_TIME = -1


def _known(server: KafkaServer, topic: str, partition: int) -> bool:
    meta = server.cache.topics.get(topic)
    return meta is not None and partition in meta.replicas


def _by_topic(errors: dict[tuple[str, int], ErrorCode], order: list[tuple[str, int]]) -> list:
    topics: dict[str, list] = {}
    for tp in order:
        topics.setdefault(tp[0], []).append({"partition_index": tp[1], "error_code": errors[tp]})
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def offsets_of_request(server: KafkaServer, topics, expire_timestamp: int | None = None):
    """(errors, offsets, order) of an OffsetCommit or TxnOffsetCommit: partitions of
    topics this cluster does not have get UNKNOWN_TOPIC_OR_PARTITION."""
    now = now_ms()
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    order = []
    for topic in topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            order.append(tp)
            if not _known(server, *tp):
                errors[tp] = E.unknown_topic_or_partition
                continue
            epoch = getattr(p, "committed_leader_epoch", -1)
            stamp = getattr(p, "commit_timestamp", -1)  # v1 only; -1: now, as Kafka
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=None if epoch is None or epoch < 0 else epoch,
                metadata=p.committed_metadata if p.committed_metadata is not None else "",
                commit_timestamp=now if stamp == -1 else stamp,
                expire_timestamp=expire_timestamp,
            )
    return errors, offsets, order


def _commit_to_zookeeper(server: KafkaServer, req: Any) -> list:
    """OffsetCommit v0: each offset to ZooKeeper (Kafka's setOrCreateConsumerOffset)."""
    errors: dict[tuple[str, int], ErrorCode] = {}
    order = []
    for topic in req.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            order.append(tp)
            if not _known(server, *tp):
                errors[tp] = E.unknown_topic_or_partition
            elif len(p.committed_metadata or "") > server.config["offset.metadata.max.bytes"]:
                errors[tp] = E.offset_metadata_too_large
            else:
                server.zk.set_consumer_offset(req.group_id, *tp, p.committed_offset)
                errors[tp] = E.none
    return _by_topic(errors, order)


def _fetch_from_zookeeper(server: KafkaServer, req: Any) -> list:
    """OffsetFetch v0: offsets OffsetCommit v0 wrote; none, or an unknown partition, is
    Kafka's UNKNOWN_PARTITION answer (offset -1, UNKNOWN_TOPIC_OR_PARTITION)."""
    topics = []
    for t in req.topics or ():
        parts = []
        for index in t.partition_indexes:
            offset = None
            if _known(server, t.name, index):
                offset = server.zk.get_consumer_offset(req.group_id, t.name, index)
            parts.append(
                {
                    "partition_index": index,
                    "committed_offset": -1 if offset is None else offset,
                    "metadata": "",
                    "error_code": E.unknown_topic_or_partition if offset is None else E.none,
                }
            )
        topics.append({"name": t.name, "partitions": parts})
    return topics


async def handle_offset_commit(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    version = header.api_version
    if version == 0:
        topics = await asyncio.to_thread(_commit_to_zookeeper, server, req)
        return {"throttle_time": 0, "topics": topics}
    retention = getattr(req, "retention_time", None)
    retention_ms = ms(retention) if retention is not None else DEFAULT_RETENTION_TIME
    expire = None
    if version <= 4 and retention_ms != DEFAULT_RETENTION_TIME:
        expire = now_ms() + retention_ms
    errors, offsets, order = offsets_of_request(server, req.topics, expire)
    if offsets:
        errors.update(
            await server.group_coordinator.admin.commit_offsets(
                req.group_id,
                req.member_id,
                getattr(req, "group_instance_id", None),
                req.generation_id_or_member_epoch,
                offsets,
            )
        )
    return {"throttle_time": 0, "topics": _by_topic(errors, order)}


def _fetch_group(server: KafkaServer, group_id: str, topics, require_stable: bool):
    """(group error, response topics) for one group."""
    tps = None
    if topics is not None:
        tps = [(t.name, p) for t in topics for p in t.partition_indexes]
    error, found = server.group_coordinator.admin.fetch_offsets(group_id, require_stable, tps)
    if error != E.none:
        return error, []
    out: dict[str, list] = {}
    for (topic, partition), (offset, epoch, metadata, perror) in found.items():
        out.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": epoch,
                "metadata": metadata,
                "error_code": perror,
            }
        )
    return E.none, [{"name": name, "partitions": parts} for name, parts in out.items()]


async def handle_offset_fetch(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    version = header.api_version
    require_stable = getattr(req, "require_stable", False)
    if version == 0:
        topics = await asyncio.to_thread(_fetch_from_zookeeper, server, req)
        return {"throttle_time": 0, "topics": topics, "error_code": E.none}
    if version >= 8:
        groups = []
        for g in req.groups:
            error, topics = _fetch_group(server, g.group_id, g.topics, require_stable)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return {"throttle_time": 0, "groups": groups}
    error, topics = _fetch_group(server, req.group_id, req.topics, require_stable)
    if error != E.none and version < 2:  # no group-level error yet: on every partition
        topics = [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": -1,
                        "metadata": "",
                        "error_code": error,
                    }
                    for p in t.partition_indexes
                ],
            }
            for t in req.topics or ()
        ]
    return {"throttle_time": 0, "topics": topics, "error_code": error}


async def handle_offset_delete(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    order = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    errors = {tp: E.unknown_topic_or_partition for tp in order if not _known(server, *tp)}
    wanted = [tp for tp in order if tp not in errors]
    error, deleted = server.group_coordinator.admin.delete_offsets(req.group_id, wanted)
    if error != E.none:
        return {"throttle_time": 0, "error_code": error, "topics": []}
    errors.update(deleted)
    return {"throttle_time": 0, "error_code": E.none, "topics": _by_topic(errors, order)}
