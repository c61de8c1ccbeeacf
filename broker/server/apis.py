"""KafkaApis: request dispatch, one handler per API, and the versions we speak.

``SUPPORTED`` is what ApiVersions advertises, and it is exactly what is implemented:
a request for any other API key or version closes the connection (as Kafka does),
except ApiVersions itself, which answers UNSUPPORTED_VERSION in v0 so the client can
retry with a version we speak (KIP-511).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import is_dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode
from ..protocol.messages import (
    ProtocolError,
    RequestHeader,
    build,
    encode_response,
    parse_request,
    peek_header,
    response_schema,
)
from ..protocol.produce_response import encode_produce_response
from ..quota.manager import PRODUCE, REQUEST
from ..replica.partition import DelayedProduce
from ..security.authenticator import AUTHENTICATE_VERSIONS, HANDSHAKE_VERSIONS
from . import authorization, request_context
from .network import then
from .quotas import TimedCoroutine, produce_throttle, request_throttle

if TYPE_CHECKING:
    from .kafka_server import KafkaServer
    from .network import Connection, Response

log = logging.getLogger(__name__)

# api key -> (name, min version, max version)
SUPPORTED: dict[int, tuple[str, int, int]] = {
    0: ("Produce", 0, 9),  # v0-v2: message sets v0/v1, converted up (legacy_records.py)
    1: ("Fetch", 0, 12),  # v0-v3: answered in message format v0/v1, converted down
    2: ("ListOffsets", 0, 7),  # v0 by hand (kio has v1+): Burrow and other sarama tools
    3: ("Metadata", 0, 12),
    4: ("LeaderAndIsr", 4, 4),
    5: ("StopReplica", 3, 3),
    6: ("UpdateMetadata", 7, 7),
    7: ("ControlledShutdown", 3, 3),
    8: ("OffsetCommit", 0, 9),  # v0: offsets in ZooKeeper, as Kafka 3.x in ZooKeeper mode
    9: ("OffsetFetch", 0, 8),  # v0: from ZooKeeper; v8: groups[]; v9+ is KIP-848
    10: ("FindCoordinator", 0, 4),  # v4: batched keys
    11: ("JoinGroup", 0, 9),
    12: ("Heartbeat", 0, 4),
    13: ("LeaveGroup", 0, 5),
    14: ("SyncGroup", 0, 5),
    15: ("DescribeGroups", 0, 5),
    16: ("ListGroups", 0, 5),
    17: ("SaslHandshake", *HANDSHAKE_VERSIONS),
    18: ("ApiVersions", 0, 3),
    19: ("CreateTopics", 0, 7),
    20: ("DeleteTopics", 0, 6),
    21: ("DeleteRecords", 0, 2),
    22: ("InitProducerId", 0, 4),
    23: ("OffsetForLeaderEpoch", 0, 4),
    24: ("AddPartitionsToTxn", 0, 3),  # v4 is KIP-890's batched verification
    25: ("AddOffsetsToTxn", 0, 3),
    26: ("EndTxn", 0, 3),
    27: ("WriteTxnMarkers", 0, 1),  # v2 is KIP-890
    28: ("TxnOffsetCommit", 0, 3),
    29: ("DescribeAcls", 0, 3),  # v0: LITERAL patterns only
    30: ("CreateAcls", 0, 3),
    31: ("DeleteAcls", 0, 3),
    32: ("DescribeConfigs", 0, 4),
    33: ("AlterConfigs", 0, 2),
    35: ("DescribeLogDirs", 0, 4),
    36: ("SaslAuthenticate", *AUTHENTICATE_VERSIONS),
    37: ("CreatePartitions", 0, 3),
    42: ("DeleteGroups", 0, 2),
    43: ("ElectLeaders", 0, 2),
    44: ("IncrementalAlterConfigs", 0, 1),
    45: ("AlterPartitionReassignments", 0, 0),
    46: ("ListPartitionReassignments", 0, 0),
    47: ("OffsetDelete", 0, 0),
    48: ("DescribeClientQuotas", 0, 1),
    49: ("AlterClientQuotas", 0, 1),
    50: ("DescribeUserScramCredentials", 0, 0),
    51: ("AlterUserScramCredentials", 0, 0),
    60: ("DescribeCluster", 0, 1),
    65: ("DescribeTransactions", 0, 0),
    66: ("ListTransactions", 0, 0),  # v1's duration filter (KIP-994) not yet
}

# KIP-219: from these versions the client backs off by itself on throttle_time_ms, so the
# broker answers at once and then mutes the connection; older ones get a late response
CLIENT_THROTTLES_FROM = {0: 6, 1: 8}  # Produce, Fetch

HandlerFn = Callable[["KafkaServer", RequestHeader, Any], Awaitable[Any]]


def _registry() -> dict[int, HandlerFn]:
    from .handlers import (
        acls,
        admin,
        client_quotas,
        configs,
        controller_ops,
        controller_requests,
        delete_records,
        fetch,
        group,
        group_offsets,
        list_offsets,
        metadata,
        offset_for_leader_epoch,
        produce,
        sasl,
        scram_users,
        txn,
    )

    return {
        0: produce.handle_produce,
        1: fetch.handle_fetch,
        2: list_offsets.handle_list_offsets,
        3: metadata.handle_metadata,
        4: controller_requests.handle_leader_and_isr,
        5: controller_requests.handle_stop_replica,
        6: controller_requests.handle_update_metadata,
        7: controller_ops.handle_controlled_shutdown,
        8: group_offsets.handle_offset_commit,
        9: group_offsets.handle_offset_fetch,
        10: group.handle_find_coordinator,
        11: group.handle_join_group,
        12: group.handle_heartbeat,
        13: group.handle_leave_group,
        14: group.handle_sync_group,
        15: group.handle_describe_groups,
        16: group.handle_list_groups,
        17: sasl.handle_sasl_handshake,
        18: handle_api_versions,
        19: admin.handle_create_topics,
        20: admin.handle_delete_topics,
        21: delete_records.handle_delete_records,
        22: produce.handle_init_producer_id,
        23: offset_for_leader_epoch.handle_offset_for_leader_epoch,
        24: txn.handle_add_partitions_to_txn,
        25: txn.handle_add_offsets_to_txn,
        26: txn.handle_end_txn,
        27: txn.handle_write_txn_markers,
        28: txn.handle_txn_offset_commit,
        29: acls.handle_describe_acls,
        30: acls.handle_create_acls,
        31: acls.handle_delete_acls,
        32: configs.handle_describe_configs,
        33: configs.handle_alter_configs,
        35: admin.handle_describe_log_dirs,
        36: sasl.handle_sasl_authenticate,
        37: admin.handle_create_partitions,
        42: group.handle_delete_groups,
        43: controller_ops.handle_elect_leaders,
        44: configs.handle_incremental_alter_configs,
        45: controller_ops.handle_alter_partition_reassignments,
        46: controller_ops.handle_list_partition_reassignments,
        47: group_offsets.handle_offset_delete,
        48: client_quotas.handle_describe_client_quotas,
        49: client_quotas.handle_alter_client_quotas,
        50: scram_users.handle_describe_user_scram_credentials,
        51: scram_users.handle_alter_user_scram_credentials,
        60: metadata.handle_describe_cluster,
        65: txn.handle_describe_transactions,
        66: txn.handle_list_transactions,
    }


async def handle_api_versions(server: KafkaServer, header: RequestHeader, request: Any) -> dict:
    return {
        "error_code": ErrorCode.none,
        "api_keys": [
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, (_name, lo, hi) in sorted(SUPPORTED.items())
        ],
        "throttle_time": 0,
    }


def _unsupported_api_versions(correlation_id: int) -> bytes:
    """ApiVersions v0 response with UNSUPPORTED_VERSION and our version table."""
    body = struct.pack(">hi", ErrorCode.unsupported_version, len(SUPPORTED))
    body += b"".join(
        struct.pack(">hhh", k, lo, hi) for k, (_n, lo, hi) in sorted(SUPPORTED.items())
    )
    return struct.pack(">ii", len(body) + 4, correlation_id) + body


CLUSTER_ACTIONS = {4, 5, 6, 7}  # LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown


def _request_quota_applies(api_key: int, request: Any) -> bool:
    """Kafka exempts inter-broker requests (cluster actions, follower fetches) and
    acks=0 produce from the request quota."""
    if api_key in CLUSTER_ACTIONS:
        return False
    if api_key == 1:
        return request.replica_id < 0
    return not (api_key == 0 and request.acks == 0)


def _encode(result: Any, api_key: int, version: int, correlation_id: int) -> Response:
    if result is None or isinstance(result, bytes | list):
        return result  # acks=0, or a handler that encodes its own response (Fetch)
    if api_key == 0 and isinstance(result, dict):  # the hot path: by hand, not by kio
        return encode_produce_response(version, correlation_id, result)
    body = result if is_dataclass(result) else build(response_schema(api_key, version), result)
    return encode_response(api_key, version, correlation_id, body)


def _encode_later(
    api_key: int, version: int, correlation_id: int, throttle_ms: int, body: Any
) -> Response:
    if throttle_ms > 0 and isinstance(body, dict) and "throttle_time" in body:
        body["throttle_time"] = throttle_ms
    return _encode(body, api_key, version, correlation_id)


class KafkaApis:
    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self.handlers = _registry()

    async def handle(self, conn: Connection, frame: bytes) -> Response:
        api_key, version, correlation_id = peek_header(frame)
        spec = SUPPORTED.get(api_key)
        if spec is None:
            raise ProtocolError(f"unknown API key {api_key}")
        name, lo, hi = spec
        if not lo <= version <= hi:
            if api_key == 18:
                return _unsupported_api_versions(correlation_id)
            raise ProtocolError(f"{name} v{version} is not supported (we speak v{lo}-v{hi})")
        request_context.client_host.set(conn.client_host)
        request_context.listener_name.set(conn.listener)
        request_context.principal.set(conn.principal)
        if api_key == 2 and version == 0:
            from .handlers import list_offsets_v0

            return await list_offsets_v0.handle(self.server, frame)
        header, request = parse_request(frame)
        request_context.throttle_ms.set(0)
        patch = None
        if self.server.authorizer is not None:
            refused, request, patch = authorization.check(self.server, api_key, header, request)
            if refused is not None:
                return _encode(refused, api_key, version, correlation_id)
        if api_key == 0 and self.server.quotas.enabled(PRODUCE):  # else it records nothing
            produce_throttle(self.server.quotas, header.client_id, len(frame))
        call = self.handlers[api_key](self.server, header, request)
        if self.server.quotas.enabled(REQUEST) and _request_quota_applies(api_key, request):
            timed = TimedCoroutine(call)
            result = await timed
            request_throttle(self.server.quotas, header.client_id, timed.nanos)
        else:
            result = await call
        if patch is not None:
            result = patch(result)
        throttle_ms = request_context.throttle_ms.get()
        if throttle_ms > 0:
            if isinstance(result, dict) and "throttle_time" in result:
                result["throttle_time"] = throttle_ms
            if version >= CLIENT_THROTTLES_FROM.get(api_key, 0):
                conn.mute_after_response(throttle_ms)  # KIP-219: reads resume when it ends
            else:  # older clients do not back off: the response itself waits, as before KIP-219
                await asyncio.sleep(throttle_ms / 1000.0)
        if isinstance(result, DelayedProduce | asyncio.Future):  # answered later: encode then
            encode = partial(_encode_later, api_key, version, correlation_id, throttle_ms)
            if isinstance(result, DelayedProduce):
                if not result.future.done():
                    return result.then(encode)  # encoded in the call that completes it
                result = result.future
            return then(result, encode)
        return _encode(result, api_key, version, correlation_id)
