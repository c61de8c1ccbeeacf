"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers.

Topic overrides live in ZooKeeper at ``/config/topics/<t>`` (with a change
notification), and are validated with LogConfig before anything is written.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ...log.config import LogConfig
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader
from ..config import KEYS as BROKER_KEYS

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5


def _describe_topic(server: KafkaServer, name: str, keys, synonyms: bool, docs: bool) -> list[dict]:
    if name not in server.cache.topics:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
    config = server.topic_log_config(name)
    rows = []
    for d in config.describe():
        if keys is not None and d.name not in keys:
            continue
        rows.append(
            {
                "name": d.name,
                "value": d.value,
                "read_only": d.read_only,
                "config_source": int(d.source),
                "is_sensitive": d.is_sensitive,
                "synonyms": [{"name": n, "value": v, "source": int(s)} for n, v, s in d.synonyms]
                if synonyms
                else [],
                "config_type": int(d.config_type),
                "documentation": None,
            }
        )
    return rows


def _describe_broker(server: KafkaServer, name: str, keys, synonyms: bool) -> list[dict]:
    if name and name != str(server.config.broker_id):
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {server.config.broker_id} but received {name}",
        )
    rows = []
    for key in DYNAMIC_BROKER_KEYS:
        if keys is not None and key not in keys:
            continue
        value, source = server.dynamic_broker_config(key)
        rows.append(
            {
                "name": key,
                "value": value,
                "read_only": False,
                "config_source": source,
                "is_sensitive": False,
                "synonyms": [{"name": key, "value": value, "source": source}] if synonyms else [],
                "config_type": 5,
                "documentation": "Replication throttle, bytes/s",
            }
        )
    for key, spec in sorted(BROKER_KEYS.items()):
        if keys is not None and key not in keys:
            continue
        explicit = key in server.config.raw
        value = server.config.raw.get(key) if explicit else spec.default
        if isinstance(value, list):
            value = ",".join(value)
        if spec.sensitive:  # passwords and private keys: never on the wire, as Kafka
            value = None
        elif isinstance(value, bool):  # Kafka's "true"/"false", in the synonym too
            value = str(value).lower()
        elif value is not None:
            value = str(value)
        source = STATIC_BROKER_CONFIG if explicit else DEFAULT_CONFIG
        rows.append(
            {
                "name": key,
                "value": value,
                "read_only": True,
                "config_source": source,
                "is_sensitive": spec.sensitive,
                "synonyms": [{"name": key, "value": value, "source": source}] if synonyms else [],
                "config_type": 7 if spec.sensitive else 2,  # PASSWORD, STRING
                "documentation": spec.doc,
            }
        )
    return rows


async def handle_describe_configs(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    results = []
    synonyms = getattr(req, "include_synonyms", False)
    docs = getattr(req, "include_documentation", False)
    for r in req.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        entry = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            if r.resource_type == TOPIC:
                configs = _describe_topic(server, r.resource_name, keys, synonyms, docs)
            elif r.resource_type == BROKER:
                configs = _describe_broker(server, r.resource_name, keys, synonyms)
            else:
                raise KafkaError(
                    ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"
                )
            entry.update(error_code=ErrorCode.none, error_message=None, configs=configs)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message, configs=[])
        if header.api_version == 0:  # v0 says is_default where v1+ give the source
            for config in entry["configs"]:
                config["is_default"] = config["config_source"] == DEFAULT_CONFIG
        results.append(entry)
    return {"throttle_time": 0, "results": results}


async def _alter_topic(
    server: KafkaServer, name: str, new: dict[str, str], validate_only: bool
) -> None:
    if name not in server.cache.topics:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
    LogConfig.from_props(new, defaults=server.default_log_config)  # raises INVALID_CONFIG
    if not validate_only:
        await asyncio.to_thread(server.zk.set_entity_config, "topics", name, new)


DYNAMIC_BROKER_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def _broker_entity(server: KafkaServer, name: str) -> str:
    if name in ("", None):
        return "<default>"
    if name != str(server.config.broker_id) and not name.isdigit():
        raise KafkaError(ErrorCode.invalid_request, f"Invalid broker id {name!r}")
    return name


def _check_dynamic(new: dict[str, str]) -> None:
    for key, value in new.items():
        if key not in DYNAMIC_BROKER_KEYS:
            raise KafkaError(
                ErrorCode.invalid_config,
                f"Cannot update these configs dynamically: [{key}] "
                f"(dynamic broker configs here: {', '.join(DYNAMIC_BROKER_KEYS)})",
            )
        try:
            ok = int(value) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise KafkaError(
                ErrorCode.invalid_config,
                f"Invalid value {value} for configuration {key}: must be a number of bytes/s >= 0",
            )


async def _alter_broker(
    server: KafkaServer, name: str, new: dict[str, str], validate_only: bool
) -> None:
    entity = _broker_entity(server, name)
    _check_dynamic(new)
    if not validate_only:
        await asyncio.to_thread(server.zk.set_entity_config, "brokers", entity, new)


async def handle_alter_configs(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    responses = []
    for r in req.resources:
        entry = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            new = {c.name: c.value for c in r.configs if c.value is not None}
            if r.resource_type == BROKER:
                await _alter_broker(server, r.resource_name, new, req.validate_only)
            elif r.resource_type == TOPIC:
                await _alter_topic(server, r.resource_name, new, req.validate_only)
            else:
                raise KafkaError(
                    ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"
                )
            entry.update(error_code=ErrorCode.none, error_message=None)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}


def _apply_ops(current: dict[str, str], ops, config: LogConfig) -> dict[str, str]:
    result = dict(current)
    for op in ops:
        if op.config_operation == SET:
            result[op.name] = op.value
        elif op.config_operation == DELETE:
            result.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            base = result.get(op.name)
            if base is None:
                value = config.get(op.name) if op.name in config.values() else ""
                base = ",".join(value) if isinstance(value, tuple | list) else str(value or "")
            items = [i for i in base.split(",") if i]
            extra = [i for i in (op.value or "").split(",") if i]
            if op.config_operation == APPEND:
                items += [i for i in extra if i not in items]
            else:
                items = [i for i in items if i not in extra]
            result[op.name] = ",".join(items)
        else:
            raise KafkaError(
                ErrorCode.invalid_request, f"Unknown config operation {op.config_operation}"
            )
    return result


async def handle_incremental_alter_configs(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict:
    responses = []
    for r in req.resources:
        entry = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        try:
            names = [c.name for c in r.configs]
            if len(names) != len(set(names)):
                raise KafkaError(ErrorCode.invalid_request, "Duplicate config keys in one resource")
            if r.resource_type == BROKER:
                entity = _broker_entity(server, r.resource_name)
                current = await asyncio.to_thread(server.zk.get_entity_config, "brokers", entity)
                new = _apply_ops(current, r.configs, server.default_log_config)
                await _alter_broker(server, r.resource_name, new, req.validate_only)
            elif r.resource_type == TOPIC:
                current = server.topic_overrides.get(r.resource_name, {})
                new = _apply_ops(current, r.configs, server.topic_log_config(r.resource_name))
                await _alter_topic(server, r.resource_name, new, req.validate_only)
            else:
                raise KafkaError(
                    ErrorCode.invalid_request, f"Unsupported resource type {r.resource_type}"
                )
            entry.update(error_code=ErrorCode.none, error_message=None)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        responses.append(entry)
    return {"throttle_time": 0, "responses": responses}
