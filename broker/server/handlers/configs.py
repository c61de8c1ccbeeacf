"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers.

Topic overrides live in ZooKeeper at ``/config/topics/<t>``, dynamic broker configs at
``/config/brokers/<id>`` and ``/config/brokers/<default>`` (each write with a change
notification). Topic overrides are validated with LogConfig, broker ones by
``dynamic_config`` (Kafka's DynamicBrokerConfig rules), before anything is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...log.config import TOPIC_CONFIG_KEYS, ConfigSource, ConfigType, LogConfig
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader
from ...zk.znodes import ConfigType as EntityType
from .. import dynamic_config
from ..dynamic_config import DEFAULT_ENTITY

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


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
    return server.dynamic.describe(keys, synonyms, default_level=not name)


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
                config["is_default"] = config["config_source"] == ConfigSource.DEFAULT_CONFIG
        results.append(entry)
    return {"throttle_time": 0, "results": results}


async def _alter_topic(
    server: KafkaServer, name: str, new: dict[str, str], validate_only: bool
) -> None:
    if name not in server.cache.topics:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
    LogConfig.from_props(new, defaults=server.default_log_config)  # raises INVALID_CONFIG
    if not validate_only:
        await asyncio.to_thread(server.zk.set_entity_config, EntityType.TOPIC, name, new)


def _broker_entity(server: KafkaServer, name: str) -> str:
    if name in ("", None):
        return DEFAULT_ENTITY
    if name != str(server.config.broker_id) and not name.isdigit():
        raise KafkaError(ErrorCode.invalid_request, f"Invalid broker id {name!r}")
    return name


async def _alter_broker(
    server: KafkaServer, name: str, new: dict[str, str], validate_only: bool
) -> None:
    """Kafka's ZkAdminManager.alterBrokerConfigs: the whole level is replaced."""
    entity = _broker_entity(server, name)
    dynamic_config.validate(new, per_broker=entity != DEFAULT_ENTITY)
    level = server.dynamic.entity_of(entity)
    if level is not None:  # this broker's own level, or the cluster default
        server.dynamic.check_combined(level, new)
    if level == "broker":  # its listeners' new keystores load (Kafka's reconfigure check)
        await asyncio.to_thread(server.listener_ssl.contexts, new)
    stored = dynamic_config.encode_passwords(new, server.dynamic.secret)
    if not validate_only:
        await asyncio.to_thread(server.zk.set_entity_config, EntityType.BROKER, entity, stored)


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


def _apply_ops(
    current: dict[str, str], ops, base_of: Callable[[str], str], is_list: Callable[[str], bool]
) -> dict[str, str]:
    """IncrementalAlterConfigs' SET / DELETE / APPEND / SUBTRACT on one resource's
    dynamic configs; APPEND and SUBTRACT only for LIST keys, from the current value
    (else ``base_of``: the key's value when it has no dynamic one)."""
    result = dict(current)
    for op in ops:
        if op.config_operation == SET:
            result[op.name] = op.value
        elif op.config_operation == DELETE:
            result.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if not is_list(op.name):
                verb = "append" if op.config_operation == APPEND else "subtract"
                raise KafkaError(
                    ErrorCode.invalid_request,
                    f"Config value {verb} is not allowed for config key: {op.name}",
                )
            base = result.get(op.name)
            if base is None:
                base = base_of(op.name)
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


def _topic_value(config: LogConfig) -> Callable[[str], str]:
    return lambda key: config.values().get(key, "")


def _topic_list(key: str) -> bool:
    return key in TOPIC_CONFIG_KEYS and TOPIC_CONFIG_KEYS[key].ctype == ConfigType.LIST


def _broker_value(key: str) -> str:
    return dynamic_config.kafka_default(key) or ""


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
                stored = await asyncio.to_thread(
                    server.zk.get_entity_config, EntityType.BROKER, entity
                )
                current = dynamic_config.decode_passwords(stored, server.dynamic.secret)
                new = _apply_ops(current, r.configs, _broker_value, dynamic_config.is_list)
                await _alter_broker(server, r.resource_name, new, req.validate_only)
            elif r.resource_type == TOPIC:
                current = server.topic_overrides.get(r.resource_name, {})
                config = server.topic_log_config(r.resource_name)
                new = _apply_ops(current, r.configs, _topic_value(config), _topic_list)
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
