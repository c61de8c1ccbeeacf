"""Per-item authorization and the responses it shapes (see ``authorization``).

Items of a request the principal may not touch (topics, groups, config resources,
transactional ids, coordinator keys) are taken out before the handler runs and
answered afterwards with Kafka's code; lists (ListGroups, ListTransactions, OffsetFetch
of a whole group) lose what the principal may not Describe; and the KIP-430 bit fields
(``include_*_authorized_operations``) are filled in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode as E
from ..security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS
from ..security.acl import AclOperation as Op
from ..security.acl import ResourceType as R
from ..zk.znodes import topic_id_bytes
from .acl_decisions import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    MESSAGES,
    TOPIC_DENIED,
    TXN_DENIED,
    allowed,
    cluster_allowed,
    denied_topics,
)

if TYPE_CHECKING:
    from .kafka_server import KafkaServer


# -- per-item checks ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ItemCheck:
    """Items of ``field`` in the request that the principal may not touch are removed
    before the handler runs and answered with ``entry(item, code)`` in ``resp_field``."""

    field: str
    target: Callable[[Any], tuple[Op, R, str] | None]  # (operation, resource, name); None: ok
    resp_field: str
    entry: Callable[[Any, E], dict]
    code: Callable[[R], E] = lambda rtype: _CODES[rtype]  # noqa: E731


_CODES = {
    R.TOPIC: TOPIC_DENIED,
    R.GROUP: GROUP_DENIED,
    R.CLUSTER: CLUSTER_DENIED,
    R.TRANSACTIONAL_ID: TXN_DENIED,
}


def _topic(op: Op, attr: str = "name") -> Callable:
    return lambda item: (op, R.TOPIC, item if isinstance(item, str) else getattr(item, attr))


def _partitions_entry(name: str, index: str, extra: dict | None = None) -> Callable:
    """A topic of the request answered with ``code`` on each of its partitions."""

    def entry(t, code):
        return {
            name: getattr(t, name),
            "partitions": [
                {index: getattr(p, index), "error_code": code, **(extra or {})}
                for p in t.partitions
            ],
        }

    return entry


_BROKER_TYPES = (4, 8)  # BROKER, BROKER_LOGGER (ConfigResource types)


def _config_target(op: Op) -> Callable:
    def target(r):
        if r.resource_type in _BROKER_TYPES:
            return (op, R.CLUSTER, CLUSTER_NAME)
        return (op, R.TOPIC, r.resource_name)

    return target


def _config_entry(with_configs: bool) -> Callable:
    def entry(r, code):
        out = {
            "error_code": code,
            "error_message": MESSAGES[code],
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
        }
        if with_configs:
            out["configs"] = []
        return out

    return entry


def _create_topics_target(server) -> Callable:
    cluster_create = cluster_allowed(server, Op.CREATE)
    return lambda t: None if cluster_create else (Op.CREATE, R.TOPIC, t.name)


def _deleted_topic(server) -> Callable:
    """DeleteTopics v6 may name a topic by id only: checked under the id's name."""

    def target(item):
        if isinstance(item, str) or item.name is not None:
            return _topic(Op.DELETE)(item)
        wanted = getattr(item.topic_id, "bytes", None)
        name = next(
            (m.name for m in server.cache.topics.values() if topic_id_bytes(m.topic_id) == wanted),
            None,
        )
        return None if name is None else (Op.DELETE, R.TOPIC, name)  # unknown id: handler

    return target


def _key_target(req) -> Callable:
    if getattr(req, "key_type", 0) == 1:
        return lambda k: (Op.DESCRIBE, R.TRANSACTIONAL_ID, k)
    return lambda k: (Op.DESCRIBE, R.GROUP, k)


ITEM_CHECKS: dict[int, Callable[[Any, int, Any], list[ItemCheck]]] = {
    8: lambda s, v, r: [
        ItemCheck(
            "topics",
            _topic(Op.READ),
            "topics",
            _partitions_entry("name", "partition_index"),
        )
    ],
    28: lambda s, v, r: ITEM_CHECKS[8](s, v, r),
    47: lambda s, v, r: ITEM_CHECKS[8](s, v, r),
    19: lambda s, v, r: [
        ItemCheck(
            "topics",
            _create_topics_target(s),
            "topics",
            lambda t, c: {"name": t.name, "error_code": c, "error_message": MESSAGES[c]},
        )
    ],
    20: lambda s, v, r: [
        ItemCheck(
            "topics" if v >= 6 else "topic_names",
            _deleted_topic(s),
            "responses",
            lambda t, c: {
                "name": t if isinstance(t, str) else t.name,
                "topic_id": None if isinstance(t, str) else t.topic_id,
                "error_code": c,
                "error_message": MESSAGES[c],
            },
        )
    ],
    21: lambda s, v, r: [
        ItemCheck(
            "topics",
            _topic(Op.DELETE),
            "topics",
            _partitions_entry("name", "partition_index", {"low_watermark": -1}),
        )
    ],
    23: lambda s, v, r: [
        ItemCheck(
            "topics",
            _topic(Op.DESCRIBE, "topic"),
            "topics",
            _partitions_entry("topic", "partition"),
        )
    ],
    32: lambda s, v, r: [
        ItemCheck("resources", _config_target(Op.DESCRIBE_CONFIGS), "results", _config_entry(True))
    ],
    33: lambda s, v, r: [
        ItemCheck("resources", _config_target(Op.ALTER_CONFIGS), "responses", _config_entry(False))
    ],
    44: lambda s, v, r: ITEM_CHECKS[33](s, v, r),
    37: lambda s, v, r: [
        ItemCheck(
            "topics",
            _topic(Op.ALTER),
            "results",
            lambda t, c: {"name": t.name, "error_code": c, "error_message": MESSAGES[c]},
        )
    ],
    42: lambda s, v, r: [
        ItemCheck(
            "groups_names",
            lambda g: (Op.DELETE, R.GROUP, g),
            "results",
            lambda g, c: {"group_id": g, "error_code": c},
        )
    ],
    15: lambda s, v, r: [
        ItemCheck(
            "groups",
            lambda g: (Op.DESCRIBE, R.GROUP, g),
            "groups",
            lambda g, c: {"group_id": g, "error_code": c, "members": []},
        )
    ],
    65: lambda s, v, r: [
        ItemCheck(
            "transactional_ids",
            lambda t: (Op.DESCRIBE, R.TRANSACTIONAL_ID, t),
            "transaction_states",
            lambda t, c: {"transactional_id": t, "error_code": c, "transaction_state": ""},
        )
    ],
    10: lambda s, v, r: (
        []
        if v < 4
        else [
            ItemCheck(
                "coordinator_keys",
                _key_target(r),
                "coordinators",
                lambda k, c: {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": c},
            )
        ]
    ),
}


def _split(server, req, check: ItemCheck) -> tuple[Any, list]:
    items = getattr(req, check.field) or ()
    kept, refused = [], []
    for item in items:
        t = check.target(item)
        if t is None or allowed(server, *t):
            kept.append(item)
        else:
            refused.append((item, check.code(t[1])))
    if not refused:
        return req, []
    return dataclasses.replace(req, **{check.field: tuple(kept)}), refused


def _patcher(checks_refused: list[tuple[ItemCheck, list]]) -> Callable[[Any], Any]:
    def patch(result):
        if isinstance(result, dict):
            for check, refused in checks_refused:
                out = result.setdefault(check.resp_field, [])
                out.extend(check.entry(item, code) for item, code in refused)
        return result

    return patch


def filter_request(server: KafkaServer, api_key: int, header, req: Any) -> tuple[Any, Any]:
    """The request without the items the principal may not touch, and the patch that
    answers them (and hides or marks what it may not see) in the handler's response."""
    make = ITEM_CHECKS.get(api_key)
    done = []
    for item_check in make(server, header.api_version, req) if make is not None else ():
        req, refused = _split(server, req, item_check)
        if refused:
            done.append((item_check, refused))
    later = _post_filter(server, api_key, header, req)
    if not done:
        return req, later
    patch = _patcher(done)
    return req, patch if later is None else (lambda result: later(patch(result)))


# -- responses filtered after the fact (nothing is changed by these requests) -----------------
def _post_filter(server, api_key: int, header, req) -> Callable | None:
    if api_key == 16 and not cluster_allowed(server, Op.DESCRIBE):  # ListGroups
        return _keep("groups", lambda g: allowed(server, Op.DESCRIBE, R.GROUP, g["group_id"]))
    if api_key == 66:  # ListTransactions
        return _keep(
            "transaction_states",
            lambda t: allowed(server, Op.DESCRIBE, R.TRANSACTIONAL_ID, t["transactional_id"]),
        )
    if api_key == 9:  # OffsetFetch: topics need Describe; v8's groups Describe each
        return lambda result: _offset_fetch_filter(server, header, req, result)
    return authorized_operations(server, api_key, req)


# -- the authorized-operations bit fields (KIP-430) ------------------------------------------
def operations_bits(server: KafkaServer, rtype: R, name: str) -> int:
    """Kafka's to32BitField of the operations this principal may do on the resource
    (without an authorizer: every operation the resource type has, as Kafka answers)."""
    ops = SUPPORTED_OPERATIONS[rtype]
    if server.authorizer is None:
        return sum(1 << op for op in ops)
    return sum(1 << op for op in ops if allowed(server, op, rtype, name))


def _set_bits(entries, field: str, rtype: R, server, key: str) -> None:
    for entry in entries or ():
        if entry.get("error_code", E.none) == E.none and entry.get(key) is not None:
            entry[field] = operations_bits(server, rtype, entry[key])


def every_operation_without_authorizer(server, api_key: int, req, body: dict) -> dict:
    """KIP-430 without an authorizer: the bit fields asked for name every operation of the
    resource type, as Kafka answers (with one, ``check``'s patch fills them in)."""
    if server.authorizer is None and (patch := authorized_operations(server, api_key, req)):
        return patch(body)
    return body


def authorized_operations(server, api_key: int, req) -> Callable | None:
    """The patch filling KIP-430's bit fields a Metadata, DescribeGroups or DescribeCluster
    request asked for; None when it asked for none."""
    topics = getattr(req, "include_topic_authorized_operations", False)
    cluster = getattr(req, "include_cluster_authorized_operations", False)
    groups = getattr(req, "include_authorized_operations", False)
    if not (topics or cluster or groups) or api_key not in (3, 15, 60):
        return None

    def patch(result):
        if not isinstance(result, dict):
            return result
        if api_key == 3 and topics:
            _set_bits(result.get("topics"), "topic_authorized_operations", R.TOPIC, server, "name")
        if api_key in (3, 60) and cluster:
            result["cluster_authorized_operations"] = operations_bits(
                server, R.CLUSTER, CLUSTER_NAME
            )
        if api_key == 15 and groups:
            _set_bits(result.get("groups"), "authorized_operations", R.GROUP, server, "group_id")
        return result

    return patch


def _keep(field: str, keep: Callable[[dict], bool]) -> Callable:
    def patch(result):
        if isinstance(result, dict) and field in result:
            result[field] = [x for x in result[field] if keep(x)]
        return result

    return patch


def _filter_offset_topics(server, topics: list, explicit: bool) -> list:
    denied = denied_topics(server, Op.DESCRIBE, [t["name"] for t in topics])
    if not denied:
        return topics
    if not explicit:  # all offsets of the group: the hidden topics are left out
        return [t for t in topics if t["name"] not in denied]
    for t in topics:
        if t["name"] in denied:
            for p in t["partitions"]:
                p.update(committed_offset=-1, metadata="", error_code=TOPIC_DENIED)
    return topics


def _offset_fetch_filter(server, header, req, result):
    if not isinstance(result, dict):
        return result
    if header.api_version < 8:
        result["topics"] = _filter_offset_topics(
            server, result.get("topics") or [], req.topics is not None
        )
        return result
    asked = {g.group_id: g.topics is not None for g in req.groups}
    for g in result.get("groups") or []:
        if not allowed(server, Op.DESCRIBE, R.GROUP, g["group_id"]):
            g.update(error_code=GROUP_DENIED, topics=[])
        else:
            g["topics"] = _filter_offset_topics(
                server, g["topics"], asked.get(g["group_id"], False)
            )
    return result
