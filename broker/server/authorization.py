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

Produce, Fetch, ListOffsets and Metadata (hot or special) call the helpers at the end of
this module from their handlers; ``authorization_responses`` holds the per-item checks
and the response filters; both build on ``acl_decisions`` (the authorizer's answer for
the request's principal, which is the connection's, and host, the client's address).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode as E
from ..protocol.fetch_response import PartitionData, encode_fetch_response
from ..security.acl import AclOperation as Op
from ..security.acl import ResourceType as R
from .acl_decisions import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    MESSAGES,
    TOPIC_DENIED,
    TXN_DENIED,
    allowed,
    cluster_allowed,
    denied_topics,
    who,
)
from .authorization_responses import filter_request
from .handlers import scram_users

if TYPE_CHECKING:
    from ..protocol.messages import RequestHeader
    from .kafka_server import KafkaServer


def _refused_partition(index: int, code: E) -> PartitionData:
    return PartitionData(index, int(code), -1, -1, -1, b"", 0)


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
    principal, host = who()  # KIP-679: Write on any topic also allows idempotence
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
    body: dict = {"throttle_time": 0, "error_code": code, "error_message": MESSAGES[code]}
    v = header.api_version
    if api_key == 1:  # Kafka: a follower without ClusterAction, TOPIC_AUTHORIZATION_FAILED
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
                "error_message": MESSAGES[code],
                "entity": [
                    {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in x.entity
                ],
            }
            for x in req.entries
        ]
    elif api_key in (50, 51):
        body.update(scram_users.refused(api_key, req, code, MESSAGES[code]))
    return body


def check(
    server: KafkaServer, api_key: int, header: RequestHeader, req: Any
) -> tuple[Any, Any, Callable | None]:
    """(refusal response or None, the request to serve, a patch for its response)."""
    gate = GATES.get(api_key)
    if gate is not None:
        code = gate(server, header, req)
        if code is not None:
            return refusal(server, api_key, header, req, code), req, None
    return None, *filter_request(server, api_key, header, req)


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


def may_describe_topic_configs(server: KafkaServer, name: str) -> bool:
    """CreateTopics returns a new topic's configs and layout only to a principal that may
    DescribeConfigs it (Kafka: topic_config_error_code TOPIC_AUTHORIZATION_FAILED)."""
    return server.authorizer is None or allowed(server, Op.DESCRIBE_CONFIGS, R.TOPIC, name)


def may_create_topic(server: KafkaServer, name: str) -> bool:
    return cluster_allowed(server, Op.CREATE) or allowed(server, Op.CREATE, R.TOPIC, name)
