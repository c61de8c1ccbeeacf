"""Message types kio does not ship (Kafka's ZooKeeper-era inter-broker APIs, and the
old versions of Produce, Fetch, OffsetCommit and OffsetFetch that Kafka 3.x still
serves), written after Kafka 3.x's JSON schemas in kio's dataclass style so the same
codecs serve them.

ControlledShutdown (key 7), version 3 (flexible):
request ``BrokerId int32, BrokerEpoch int64``; response
``ErrorCode int16, RemainingPartitions [TopicName string, PartitionIndex int32]``.

LeaderAndIsr (key 4) v4, UpdateMetadata (key 6) v7 and StopReplica (key 5) v3, all
flexible, with Kafka's field names and order (the controller's channel to brokers).

No ``from __future__ import annotations`` here: kio reads the field types at runtime.
"""

import uuid
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from typing import ClassVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(7)
    __header_schema__: ClassVar = RequestHeader
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(7)
    __header_schema__: ClassVar = ResponseHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(7)
    __header_schema__: ClassVar = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    remaining_partitions: tuple[RemainingPartition, ...]


def _entity(api_key: int, version: int, kind, header, flexible: bool = True):
    """Decorator: kio's class attributes for a message type of ours."""

    def wrap(cls):
        cls.__type__ = kind
        cls.__version__ = i16(version)
        cls.__flexible__ = flexible
        cls.__api_key__ = i16(api_key)
        cls.__header_schema__ = header
        return dataclass(frozen=True, slots=True, kw_only=True)(cls)

    return wrap


def _i32s() -> tuple:
    return field(metadata={"kafka_type": "int32"}, default=())


_REQ, _RESP, _NESTED = EntityType.request, EntityType.response, EntityType.nested


# -- LeaderAndIsr v4 ---------------------------------------------------------------------
@_entity(4, 4, _NESTED, RequestHeader)
class LeaderAndIsrPartitionState:
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[i32, ...] = _i32s()
    zk_version: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[i32, ...] = _i32s()
    adding_replicas: tuple[i32, ...] = _i32s()
    removing_replicas: tuple[i32, ...] = _i32s()
    is_new: bool = field(metadata={"kafka_type": "bool"}, default=False)


@_entity(4, 4, _NESTED, RequestHeader)
class LeaderAndIsrTopicState:
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@_entity(4, 4, _NESTED, RequestHeader)
class LeaderAndIsrLiveLeader:
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    host_name: str = field(metadata={"kafka_type": "string"})
    port: i32 = field(metadata={"kafka_type": "int32"})


@_entity(4, 4, _REQ, RequestHeader)
class LeaderAndIsrRequest:
    controller_id: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@_entity(4, 4, _NESTED, ResponseHeader)
class LeaderAndIsrPartitionError:
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@_entity(4, 4, _RESP, ResponseHeader)
class LeaderAndIsrResponse:
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


# -- UpdateMetadata v7 --------------------------------------------------------------------
@_entity(6, 7, _NESTED, RequestHeader)
class UpdateMetadataPartitionState:
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    isr: tuple[i32, ...] = _i32s()
    zk_version: i32 = field(metadata={"kafka_type": "int32"})
    replicas: tuple[i32, ...] = _i32s()
    offline_replicas: tuple[i32, ...] = _i32s()


@_entity(6, 7, _NESTED, RequestHeader)
class UpdateMetadataTopicState:
    topic_name: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@_entity(6, 7, _NESTED, RequestHeader)
class UpdateMetadataEndpoint:
    port: i32 = field(metadata={"kafka_type": "int32"})
    host: str = field(metadata={"kafka_type": "string"})
    listener: str = field(metadata={"kafka_type": "string"})
    security_protocol: i16 = field(metadata={"kafka_type": "int16"})


@_entity(6, 7, _NESTED, RequestHeader)
class UpdateMetadataBroker:
    id: i32 = field(metadata={"kafka_type": "int32"})
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = field(metadata={"kafka_type": "string"})


@_entity(6, 7, _REQ, RequestHeader)
class UpdateMetadataRequest:
    controller_id: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@_entity(6, 7, _RESP, ResponseHeader)
class UpdateMetadataResponse:
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


# -- StopReplica v3 -----------------------------------------------------------------------
@_entity(5, 3, _NESTED, RequestHeader)
class StopReplicaPartitionState:
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    delete_partition: bool = field(metadata={"kafka_type": "bool"})


@_entity(5, 3, _NESTED, RequestHeader)
class StopReplicaTopicState:
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_states: tuple[StopReplicaPartitionState, ...]


@_entity(5, 3, _REQ, RequestHeader)
class StopReplicaRequest:
    controller_id: i32 = field(metadata={"kafka_type": "int32"})
    controller_epoch: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    topic_states: tuple[StopReplicaTopicState, ...]


@_entity(5, 3, _NESTED, ResponseHeader)
class StopReplicaPartitionError:
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@_entity(5, 3, _RESP, ResponseHeader)
class StopReplicaResponse:
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    partition_errors: tuple[StopReplicaPartitionError, ...]


# -- OffsetCommit v0-v1 (kio starts at v2) -----------------------------------------------
# v0: group and offsets only (Kafka 3.x keeps them in ZooKeeper); v1 adds the generation,
# the member and a commit timestamp per partition. Responses are v2's, byte for byte.
def _old_offset_commit(version: int) -> type:
    @_entity(8, version, _NESTED, RequestHeaderV1, flexible=False)
    class OffsetCommitRequestPartition:
        partition_index: i32 = field(metadata={"kafka_type": "int32"})
        committed_offset: i64 = field(metadata={"kafka_type": "int64"})
        if version == 1:
            commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})
        committed_metadata: str | None = field(metadata={"kafka_type": "string"})

    @_entity(8, version, _NESTED, RequestHeaderV1, flexible=False)
    class OffsetCommitRequestTopic:
        name: str = field(metadata={"kafka_type": "string"})
        partitions: tuple[OffsetCommitRequestPartition, ...]

    @_entity(8, version, _REQ, RequestHeaderV1, flexible=False)
    class OffsetCommitRequest:
        group_id: str = field(metadata={"kafka_type": "string"})
        if version == 1:
            generation_id_or_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
            member_id: str = field(metadata={"kafka_type": "string"})
        topics: tuple[OffsetCommitRequestTopic, ...]

    return OffsetCommitRequest


# -- older versions that only lack fields of one kio has ----------------------------------
def _older(cls: type, version: int, drop: frozenset[str], swap: dict | None = None) -> type:
    """kio's entity ``cls`` as an older, non-flexible version without the fields named in
    ``drop`` (in nested entities too): Kafka's JSON schemas grow by adding fields.
    ``swap``: field name -> (name, type, kafka type) of the field the old version had in
    its place."""
    specs = []
    for f in fields(cls):
        if f.name in drop:
            continue
        if swap and f.name in swap:
            name, kind_type, kafka_type = swap[f.name]
            specs.append((name, kind_type, field(metadata={"kafka_type": kafka_type})))
            continue
        kind = classify_field(f)
        kind_type = f.type
        if isinstance(kind, EntityTupleField):
            kind_type = tuple[_older(kind.type_, version, drop, swap), ...]
        elif isinstance(kind, EntityField):
            kind_type = _older(kind.type_, version, drop, swap)
        if is_optional(f) and kind_type is not f.type:
            kind_type = kind_type | None
        default = {} if f.default is MISSING else {"default": f.default}
        specs.append((f.name, kind_type, field(metadata=f.metadata, **default)))
    new = make_dataclass(cls.__name__, specs, frozen=True, slots=True, kw_only=True)
    new.__type__, new.__api_key__ = cls.__type__, cls.__api_key__
    new.__version__, new.__flexible__ = i16(version), False
    new.__header_schema__ = RequestHeaderV1 if cls.__type__ is _REQ else ResponseHeader
    return new


def _older_pair(api_key: int, version: int, newer: int, req_drop: str, resp_drop: str):
    return (
        _older(load_request_schema(api_key, newer), version, frozenset(req_drop.split())),
        _older(load_response_schema(api_key, newer), version, frozenset(resp_drop.split())),
    )


_TXN_ID = frozenset({"transactional_id"})
_ACL_PATTERN = "pattern_type_filter resource_pattern_type"
_FETCH_V4 = frozenset({"max_bytes", "isolation_level"})

# (api key, version) -> (request type, response type); None: the response is by hand
EXTRA_SCHEMAS: dict[tuple[int, int], tuple[type, type | None]] = {
    # Produce v3 added transactional_id; Fetch v3 max_bytes and v4 isolation_level. Their
    # responses are encoded by hand (produce_response.py, fetch_response.py).
    **{(0, v): (_older(load_request_schema(0, 3), v, _TXN_ID), None) for v in range(3)},
    **{(1, v): (_older(load_request_schema(1, 4), v, _FETCH_V4), None) for v in range(3)},
    (1, 3): (_older(load_request_schema(1, 4), 3, frozenset({"isolation_level"})), None),
    **{(8, v): (_old_offset_commit(v), load_response_schema(8, 2)) for v in range(2)},
    # OffsetFetch v0 is v1 on the wire (v0 reads the offsets OffsetCommit v0 wrote)
    (9, 0): (load_request_schema(9, 1), load_response_schema(9, 1)),
    # CreateTopics v1 added validate_only, v1 error messages, v2 throttle time
    (19, 0): _older_pair(19, 0, 2, "validate_only", "throttle_time error_message"),
    (19, 1): _older_pair(19, 1, 2, "", "throttle_time"),
    (20, 0): _older_pair(20, 0, 1, "", "throttle_time"),  # DeleteTopics
    # OffsetForLeaderEpoch v1 added the epoch to answers, v2 the current epoch, throttle
    (23, 0): _older_pair(23, 0, 2, "current_leader_epoch", "throttle_time leader_epoch"),
    (23, 1): _older_pair(23, 1, 2, "current_leader_epoch", "throttle_time"),
    (35, 0): _older_pair(35, 0, 1, "", ""),  # DescribeLogDirs v0 is v1 on the wire
    (27, 0): _older_pair(27, 0, 1, "", ""),  # WriteTxnMarkers v0: v1 without tagged fields
    # DescribeConfigs v1 added synonyms, and config sources where v0 had is_default
    (32, 0): (
        _older(load_request_schema(32, 1), 0, frozenset({"include_synonyms"})),
        _older(
            load_response_schema(32, 1),
            0,
            frozenset({"synonyms"}),
            {"config_source": ("is_default", bool, "bool")},
        ),
    ),
    # the ACL APIs' v1 added pattern types (KIP-290); v0 is LITERAL only
    **{(k, 0): _older_pair(k, 0, 1, _ACL_PATTERN, "pattern_type") for k in (29, 30, 31)},
    (7, 3): (ControlledShutdownRequest, ControlledShutdownResponse),
    (4, 4): (LeaderAndIsrRequest, LeaderAndIsrResponse),
    (6, 7): (UpdateMetadataRequest, UpdateMetadataResponse),
    (5, 3): (StopReplicaRequest, StopReplicaResponse),
}
