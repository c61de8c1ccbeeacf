"""DescribeClientQuotas (48) and AlterClientQuotas (49) over the ZooKeeper quota znodes.

As Kafka's ZkAdminManager: entities are ``user`` and ``client-id`` (a null name is the
``<default>``), written to ``/config/users/<u>``, ``/config/clients/<c>`` or
``/config/users/<u>/clients/<c>`` with a change notification, so every broker (this one
too) picks the change up through ``/config/changes``. ``ip`` quotas are not supported.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages import RequestHeader
from ...quota.manager import DEFAULT, entity_path, parse_entity_path

if TYPE_CHECKING:
    from ...zk.client import KafkaZkClient
    from ..kafka_server import KafkaServer

USER, CLIENT_ID = "user", "client-id"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
# Kafka's DynamicConfig.Client / User quota keys and their types
QUOTA_TYPES = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _entity_out(user: str | None, client: str | None) -> list[dict]:
    out = []
    if user is not None:
        out.append({"entity_type": USER, "entity_name": None if user == DEFAULT else user})
    if client is not None:
        out.append({"entity_type": CLIENT_ID, "entity_name": None if client == DEFAULT else client})
    return out


# -- DescribeClientQuotas ------------------------------------------------------------
def _filter(components) -> dict[str, str | None]:
    """entity type -> name to match (<default> for the default), None: any named."""
    wanted: dict[str, str | None] = {}
    for c in components:
        if c.entity_type == "":
            raise _invalid("Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID):
            raise KafkaError(
                ErrorCode.unsupported_version, f"Custom entity type '{c.entity_type}' not supported"
            )
        if c.entity_type in wanted:
            kind = "user" if c.entity_type == USER else "client"
            raise _invalid(f"Duplicate {kind} filter component entity type")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise _invalid(f"Exact match of {c.entity_type} needs a name")
            wanted[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            wanted[c.entity_type] = DEFAULT
        elif c.match_type == MATCH_SPECIFIED:
            wanted[c.entity_type] = None
        else:
            raise _invalid(f"Unexpected match type {c.match_type}")
    return wanted


def _matches(wanted: dict[str, str | None], entity_type: str, name: str | None, strict: bool):
    if entity_type not in wanted:
        return name is None or not strict
    want = wanted[entity_type]
    return name is not None and (want is None or name == want)


def _describe(zk: KafkaZkClient, components, strict: bool) -> list[dict]:
    wanted = _filter(components)
    entries = []
    for path in zk.quota_entity_paths():
        user, client = parse_entity_path(path) or (None, None)
        if user is None and client is None:
            continue
        if not (
            _matches(wanted, USER, user, strict) and _matches(wanted, CLIENT_ID, client, strict)
        ):
            continue
        kind, _, name = path.partition("/")
        try:
            config = zk.get_entity_config(kind, name)
        except (ValueError, TypeError, AttributeError):
            continue  # not Kafka's JSON: the broker ignores it too
        values = []
        for key, raw in sorted(config.items()):
            if key not in QUOTA_TYPES:
                continue
            try:
                values.append({"key": key, "value": float(raw)})
            except ValueError:
                continue  # the broker ignores it too
        if values:
            entries.append({"entity": _entity_out(user, client), "values": values})
    return entries


async def handle_describe_client_quotas(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict:
    try:
        entries = await asyncio.to_thread(_describe, server.zk, req.components, req.strict)
    except KafkaError as exc:
        return {
            "throttle_time": 0,
            "error_code": exc.code,
            "error_message": exc.message,
            "entries": None,
        }
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": entries}


# -- AlterClientQuotas ---------------------------------------------------------------
def _entity_in(entity) -> tuple[str | None, str | None]:
    if not entity:
        raise _invalid("Invalid empty client quota entity")
    user = client = None
    for e in entity:
        if e.entity_name is not None and e.entity_name == "":
            raise _invalid(f"Empty {e.entity_type} not supported")
        name = DEFAULT if e.entity_name is None else e.entity_name
        if e.entity_type == USER:
            user = name
        elif e.entity_type == CLIENT_ID:
            client = name
        else:
            raise _invalid(f"Unhandled client quota entity type: {e.entity_type}")
    return user, client


def _apply_ops(config: dict[str, str], ops) -> dict[str, str]:
    config = dict(config)
    for op in ops:
        if op.remove:
            config.pop(op.key, None)
            continue
        kind = QUOTA_TYPES.get(op.key)
        if kind is None:
            raise _invalid(f"Invalid configuration key {op.key}")
        value = float(op.value)
        if not math.isfinite(value) or value <= 0:
            raise _invalid(f"Quota {op.key} must be greater than 0, got {op.value}")
        if kind == "DOUBLE":
            config[op.key] = str(value)
            continue
        as_int = int(value + 1e-6)
        if abs(as_int - value) > 1e-6:
            raise _invalid(f"Configuration {op.key} must be a {kind} value")
        config[op.key] = str(as_int)
    return config


def _alter(zk: KafkaZkClient, entry, validate_only: bool) -> None:
    user, client = _entity_in(entry.entity)
    path = entity_path((user, client))
    kind, _, name = path.partition("/")
    try:
        current = zk.get_entity_config(kind, name)
    except (ValueError, TypeError, AttributeError):
        current = {}  # not Kafka's JSON: overwritten
    config = _apply_ops(current, entry.ops)
    if not validate_only:
        zk.set_entity_config(kind, name, config)


async def handle_alter_client_quotas(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    results = []
    for entry in req.entries:
        try:
            await asyncio.to_thread(_alter, server.zk, entry, req.validate_only)
            code, message = ErrorCode.none, None
        except KafkaError as exc:
            code, message = exc.code, exc.message
        entity = [
            {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity
        ]
        results.append({"error_code": code, "error_message": message, "entity": entity})
    return {"throttle_time": 0, "entries": results}
