"""CreateTopics, DeleteTopics, CreatePartitions, DescribeLogDirs."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader, ms
from ...zk.znodes import topic_id_bytes
from .. import authorization, topic_admin

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer


async def handle_create_topics(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    results = []
    seen: dict[str, int] = {}
    for t in req.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in req.topics:
        entry: dict[str, Any] = {"name": t.name, "num_partitions": -1, "replication_factor": -1}
        if seen[t.name] > 1:
            entry.update(
                error_code=ErrorCode.invalid_request,
                error_message=f"Create topics request from client contains multiple entries for topic {t.name}",
            )
            results.append(entry)
            continue
        manual = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
        configs = {c.name: c.value for c in t.configs}
        try:
            topic_id, partitions, rf, config = await topic_admin.create_topic(
                server,
                t.name,
                t.num_partitions,
                t.replication_factor,
                manual=manual,
                configs=configs,
                validate_only=getattr(req, "validate_only", False),  # v1+
                timeout_ms=ms(req.timeout),
            )
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        else:
            entry.update(
                error_code=ErrorCode.none, error_message=None, topic_id=topic_id_bytes(topic_id)
            )
            if not authorization.may_describe_topic_configs(server, t.name):
                entry.update(
                    topic_config_error_code=ErrorCode.topic_authorization_failed, configs=[]
                )
                results.append(entry)
                continue
            entry.update(
                num_partitions=partitions,
                replication_factor=rf,
                configs=[
                    {
                        "name": d.name,
                        "value": d.value,
                        "read_only": d.read_only,
                        "config_source": int(d.source),
                        "is_sensitive": False,
                    }
                    for d in config.describe()
                ],
            )
        results.append(entry)
    return {"throttle_time": 0, "topics": results}


async def handle_delete_topics(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    responses = []
    names = getattr(req, "topic_names", None)
    items = (
        [(n, None) for n in names]
        if names is not None
        else [(t.name, t.topic_id) for t in req.topics]
    )
    for name, topic_id in items:
        if name is None and topic_id is not None:
            meta = next(
                (
                    m
                    for m in server.cache.topics.values()
                    if topic_id_bytes(m.topic_id) == topic_id.bytes
                ),
                None,
            )
            if meta is None:
                responses.append(
                    {"name": None, "topic_id": topic_id, "error_code": ErrorCode.unknown_topic_id}
                )
                continue
            name = meta.name
        try:
            await topic_admin.delete_topic(server, name, ms(req.timeout))
            responses.append({"name": name, "topic_id": topic_id, "error_code": ErrorCode.none})
        except KafkaError as exc:
            responses.append(
                {
                    "name": name,
                    "topic_id": topic_id,
                    "error_code": exc.code,
                    "error_message": exc.message,
                }
            )
    return {"throttle_time": 0, "responses": responses}


async def handle_create_partitions(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    results = []
    for t in req.topics:
        manual = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        try:
            await topic_admin.add_partitions(
                server,
                t.name,
                t.count,
                manual,
                validate_only=getattr(req, "validate_only", False),  # v1+
                timeout_ms=ms(req.timeout),
            )
            results.append({"name": t.name, "error_code": ErrorCode.none, "error_message": None})
        except KafkaError as exc:
            results.append({"name": t.name, "error_code": exc.code, "error_message": exc.message})
    return {"throttle_time": 0, "results": results}


async def handle_describe_log_dirs(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    by_dir: dict[str, dict[str, list]] = {d: {} for d in server.config.log_dirs}
    for (topic, index), part in server.replicas.partitions.items():
        if part.log is None or (wanted is not None and (topic, index) not in wanted):
            continue
        log_dir = str(part.log.dir.parent)
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(
            {
                "partition_index": index,
                "partition_size": part.log.size_bytes,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    results = []
    offline = {str(d) for d in server.logs.failure_channel.offline}
    for log_dir, topics in by_dir.items():
        if log_dir in offline:  # Kafka: the dir with KAFKA_STORAGE_ERROR, no partitions
            results.append(
                {"error_code": ErrorCode.kafka_storage_error, "log_dir": log_dir, "topics": []}
            )
            continue
        usage = shutil.disk_usage(log_dir)
        results.append(
            {
                "error_code": ErrorCode.none,
                "log_dir": log_dir,
                "topics": [{"name": n, "partitions": ps} for n, ps in sorted(topics.items())],
                "total_bytes": usage.total,
                "usable_bytes": usage.free,
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
