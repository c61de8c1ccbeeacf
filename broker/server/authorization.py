"""What every API needs the principal to be allowed, as Kafka's KafkaApis checks it.

Used only when ``authorizer.class.name`` is set (``server.authorizer`` is not None);
``KafkaApis.handle`` calls :func:`check` before a handler runs:

- whole-request checks (the controller's requests need Cluster ClusterAction, group
  requests Group Read, transactional ones TransactionalId Write, cluster admin Cluster
  Alter/Describe...) answer the request themselves with Kafka's error code;
- per-item checks (topics, groups, config resources, transactional ids) take the
  refused items out of the request, let the handler serve the rest, then add the
  refused items to the response with TOPIC/GROUP/CLUSTER/TRANSACTIONAL_ID
  _AUTHORIZATION_FAILED, as Kafka answers them.

Produce, Fetch and Metadata (hot or special) call the helpers at the end of this module
from their handlers. The principal is the connection's, the host the client's address.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode as E
from ..protocol.fetch_response import PartitionData, encode_fetch_response
from ..security.acl import CLUSTER_NAME
from ..security.acl import AclOperation as Op
from ..security.acl import ResourceType as R
from ..zk.znodes import topic_id_bytes
from . import request_context
from .handlers import scram_users

if TYPE_CHECKING:
    from ..protocol.messages import RequestHeader
    from .kafka_server import KafkaServer

TOPIC_DENIED = E.topic_authorization_failed
GROUP_DENIED = E.group_authorization_failed
CLUSTER_DENIED = E.cluster_authorization_failed
TXN_DENIED = E.transactional_id_authorization_failed

_MESSAGES = {
    TOPIC_DENIED: "Topic authorization failed.",
    GROUP_DENIED: "Group authorization failed.",
    CLUSTER_DENIED: "Cluster authorization failed.",
    TXN_DENIED: "Transactional Id authorization failed.",
}


def _refused_partition(index: int, code: E) -> PartitionData:
    return PartitionData(index, int(code), -1, -1, -1, b"", 0)


# -- decisions ----------------------------------------------------------------------------------
def _who() -> tuple[Any, str]:
    return request_context.principal.get(), request_context.client_host.get().lstrip("/")


def allowed(server: KafkaServer, op: Op, rtype: R, name: str) -> bool:
    principal, host = _who()
    return server.authorizer.authorize(principal, host, op, rtype, name)


def cluster_allowed(server: KafkaServer, op: Op) -> bool:
    return allowed(server, op, R.CLUSTER, CLUSTER_NAME)


def denied_topics(server: KafkaServer, op: Op, names) -> set[str]:
    principal, host = _who()
    authorize = server.authorizer.authorize
    return {n for n in set(names) if not authorize(principal, host, op, R.TOPIC, n)}


# -- whole-request checks -----------------------------------------------------------------------
def _cluster(op: Op) -> Callable:
    def gate(server, header, req):
        return None if cluster_allowed(server, op) else CLUSTER_DENIED

    return gate


def _group(op: Op) -> Callable:
    def gate(server, header, req):
        return None if allowed(server, op, R.GROUP, req.group_id) else GROUP_DENIED

    return gate


def _txn_id(req) -> str | None:
    return getattr(req, "transactional_id", None) or getattr(
        req, "v3_and_below_transactional_id", None
    )


def _txn_write(server, header, req):
    return None if allowed(server, Op.WRITE, R.TRANSACTIONAL_ID, _txn_id(req)) else TXN_DENIED


def _txn_then_group(server, header, req):
    return _txn_write(server, header, req) or _group(Op.READ)(server, header, req)


def _init_producer_id(server, header, req):
    if req.transactional_id is not None:
        return _txn_write(server, header, req)
    if cluster_allowed(server, Op.IDEMPOTENT_WRITE):
        return None
    principal, host = _who()  # KIP-679: Write on any topic also allows idempotence
    return (
        None
        if server.authorizer.authorize_any(principal, host, Op.WRITE, R.TOPIC)
        else (CLUSTER_DENIED)
    )


def _find_coordinator(server, header, req):
    if header.api_version >= 4:
        return None  # per key, below
    if getattr(req, "key_type", 0) == 1:
        return None if allowed(server, Op.DESCRIBE, R.TRANSACTIONAL_ID, req.key) else TXN_DENIED
    return None if allowed(server, Op.DESCRIBE, R.GROUP, req.key) else GROUP_DENIED


def _follower_only(server, header, req):
    if getattr(req, "replica_id", -1) < 0:
        return None
    return None if cluster_allowed(server, Op.CLUSTER_ACTION) else CLUSTER_DENIED


def _offset_fetch(server, header, req):
    if header.api_version >= 8:
        return None  # per group, below
    return _group(Op.DESCRIBE)(server, header, req)


def _add_partitions_to_txn(server, header, req):
    code = _txn_write(server, header, req)
    if code is not None:
        return code
    names = [t.name for t in req.v3_and_below_topics]
    return TOPIC_DENIED if denied_topics(server, Op.WRITE, names) else None


GATES: dict[int, Callable] = {
    4: _cluster(Op.CLUSTER_ACTION),  # LeaderAndIsr
    5: _cluster(Op.CLUSTER_ACTION),  # StopReplica
    6: _cluster(Op.CLUSTER_ACTION),  # UpdateMetadata
    7: _cluster(Op.CLUSTER_ACTION),  # ControlledShutdown
    27: _cluster(Op.CLUSTER_ACTION),  # WriteTxnMarkers
    1: _follower_only,  # Fetch from a follower
    23: _follower_only,  # OffsetForLeaderEpoch from a follower
    8: _group(Op.READ),  # OffsetCommit
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group(Op.READ),  # JoinGroup
    12: _group(Op.READ),  # Heartbeat
    13: _group(Op.READ),  # LeaveGroup
    14: _group(Op.READ),  # SyncGroup
    47: _group(Op.DELETE),  # OffsetDelete
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    25: _txn_then_group,  # AddOffsetsToTxn
    26: _txn_write,  # EndTxn
    28: _txn_then_group,  # TxnOffsetCommit
    35: _cluster(Op.DESCRIBE),  # DescribeLogDirs
    43: _cluster(Op.ALTER),  # ElectLeaders
    45: _cluster(Op.ALTER),  # AlterPartitionReassignments
    46: _cluster(Op.DESCRIBE),  # ListPartitionReassignments
    48: _cluster(Op.DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: _cluster(Op.ALTER_CONFIGS),  # AlterClientQuotas
    50: _cluster(Op.DESCRIBE),  # DescribeUserScramCredentials
    51: _cluster(Op.ALTER),  # AlterUserScramCredentials
}


def _parts(topics, name: str, parts: str, index: str | None, resp: tuple, code, extra=None):
    """Mirror a request's topics/partitions into a response's, every partition with
    ``code``; ``resp`` names (topics key, name key, partitions key, index key, error key)."""
    t_key, n_key, p_key, i_key, e_key = resp
    return {
        t_key: [
            {
                n_key: getattr(t, name),
                p_key: [
                    {i_key: p if index is None else getattr(p, index), e_key: code, **(extra or {})}
                    for p in getattr(t, parts)
                ],
            }
            for t in topics or ()
        ]
    }


_STD = ("topics", "name", "partitions", "partition_index", "error_code")


def refusal(server: KafkaServer, api_key: int, header: RequestHeader, req: Any, code: E) -> Any:
    """The response to a request refused as a whole, shaped as Kafka's getErrorResponse."""
    body: dict = {"throttle_time": 0, "error_code": code, "error_message": _MESSAGES[code]}
    v = header.api_version
    if api_key == 1:  # Kafka answers a follower without ClusterAction per partition so
        code = TOPIC_DENIED
        topics = [
            (t.topic, [_refused_partition(p.partition, code) for p in t.partitions])
            for t in req.topics
        ]
        return encode_fetch_response(v, header.correlation_id, topics)
    if api_key == 8 or api_key == 28:
        body.update(_parts(req.topics, "name", "partitions", "partition_index", _STD, code))
    elif api_key == 9 and v < 2:
        extra = {"committed_offset": -1, "metadata": ""}
        body.update(_parts(req.topics, "name", "partition_indexes", None, _STD, code, extra))
    elif api_key == 23:
        resp = ("topics", "topic", "partitions", "partition", "error_code")
        body.update(_parts(req.topics, "topic", "partitions", "partition", resp, code))
    elif api_key == 24:
        resp = (
            "results_by_topic_v3_and_below",
            "name",
            "results_by_partition",
            "partition_index",
            "partition_error_code",
        )
        body.update(_parts(req.v3_and_below_topics, "name", "partitions", None, resp, code))
        if code == TOPIC_DENIED:  # Kafka: the refused topics say so, the rest were not tried
            denied = denied_topics(server, Op.WRITE, [t.name for t in req.v3_and_below_topics])
            for t in body["results_by_topic_v3_and_below"]:
                if t["name"] not in denied:
                    for p in t["results_by_partition"]:
                        p["partition_error_code"] = E.operation_not_attempted
    elif api_key == 27:
        body["markers"] = [
            {
                "producer_id": m.producer_id,
                **_parts(m.topics, "name", "partition_indexes", None, _STD, code),
            }
            for m in req.markers
        ]
    elif api_key == 43 and v == 0:
        resp = (
            "replica_election_results",
            "topic",
            "partition_result",
            "partition_id",
            "error_code",
        )
        body.update(_parts(req.topic_partitions, "topic", "partitions", None, resp, code))
    elif api_key == 49:
        body["entries"] = [
            {
                "error_code": code,
                "error_message": _MESSAGES[code],
                "entity": [
                    {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in x.entity
                ],
            }
            for x in req.entries
        ]
    elif api_key in (50, 51):
        body.update(scram_users.refused(api_key, req, code, _MESSAGES[code]))
    return body


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
            "error_message": _MESSAGES[code],
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
            lambda t, c: {"name": t.name, "error_code": c, "error_message": _MESSAGES[c]},
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
                "error_message": _MESSAGES[c],
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
            lambda t, c: {"name": t.name, "error_code": c, "error_message": _MESSAGES[c]},
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


def check(
    server: KafkaServer, api_key: int, header: RequestHeader, req: Any
) -> tuple[Any, Any, Callable | None]:
    """(refusal response or None, the request to serve, a patch for its response)."""
    gate = GATES.get(api_key)
    if gate is not None:
        code = gate(server, header, req)
        if code is not None:
            return refusal(server, api_key, header, req, code), req, None
    make = ITEM_CHECKS.get(api_key)
    if make is None:
        return None, req, _post_filter(server, api_key, header, req)
    done = []
    for item_check in make(server, header.api_version, req):
        req, refused = _split(server, req, item_check)
        if refused:
            done.append((item_check, refused))
    return None, req, _patcher(done) if done else _post_filter(server, api_key, header, req)


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
    return None


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


# -- helpers for the handlers that check for themselves -----------------------------------------
def produce_denied(server: KafkaServer, req: Any) -> tuple[E | None, set[str]]:
    """(TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition, or None; the topics
    this principal may not write)."""
    txn_id = getattr(req, "transactional_id", None)
    if txn_id is not None and not allowed(server, Op.WRITE, R.TRANSACTIONAL_ID, txn_id):
        return TXN_DENIED, set()
    return None, denied_topics(server, Op.WRITE, [t.name for t in req.topic_data])


def fetch_denied(server: KafkaServer, wanted: list) -> tuple[list, list]:
    """A consumer's fetch: (the wanted topics it may Read, PartitionData refusals)."""
    denied = denied_topics(server, Op.READ, [topic for topic, _parts in wanted])
    if not denied:
        return wanted, []
    kept = [(topic, parts) for topic, parts in wanted if topic not in denied]
    refused = [
        (topic, [_refused_partition(p.partition, TOPIC_DENIED) for p in parts])
        for topic, parts in wanted
        if topic in denied
    ]
    return kept, refused


def describe_denied(server: KafkaServer, topics) -> set[str]:
    """ListOffsets: the topics (request entries with ``name``, or (name, ...) tuples)
    this principal may not Describe."""
    names = [t[0] if isinstance(t, tuple) else t.name for t in topics]
    return denied_topics(server, Op.DESCRIBE, names)


def may_describe_topic(server: KafkaServer, name: str) -> bool:
    return allowed(server, Op.DESCRIBE, R.TOPIC, name)


def may_create_topic(server: KafkaServer, name: str) -> bool:
    return cluster_allowed(server, Op.CREATE) or allowed(server, Op.CREATE, R.TOPIC, name)
