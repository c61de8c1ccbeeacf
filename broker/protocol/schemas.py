"""Message types kio does not ship (Kafka's ZooKeeper-era inter-broker APIs), written
after Kafka 3.x's JSON schemas in kio's dataclass style so the same codecs serve them.

ControlledShutdown (key 7), version 3 (flexible):
request ``BrokerId int32, BrokerEpoch int64``; response
``ErrorCode int16, RemainingPartitions [TopicName string, PartitionIndex int32]``.

LeaderAndIsr (key 4) v4, UpdateMetadata (key 6) v7 and StopReplica (key 5) v3, all
flexible, with Kafka's field names and order (the controller's channel to brokers).

No ``from __future__ import annotations`` here: kio reads the field types at runtime.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64


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


# -- Produce v0-v2 and Fetch v0-v3 requests (kio starts at Produce v3, Fetch v4) ---------
# Produce v0-v2 is v3 without transactional_id; Fetch v0-v2 is v3 without max_bytes.
# Their responses are encoded by hand (produce_response.py, fetch_response.py).
def _old_produce(version: int) -> type:
    @_entity(0, version, _NESTED, RequestHeaderV1, flexible=False)
    class PartitionProduceData:
        index: i32 = field(metadata={"kafka_type": "int32"})
        records: Records | None = field(metadata={"kafka_type": "records"})

    @_entity(0, version, _NESTED, RequestHeaderV1, flexible=False)
    class TopicProduceData:
        name: str = field(metadata={"kafka_type": "string"})
        partition_data: tuple[PartitionProduceData, ...]

    @_entity(0, version, _REQ, RequestHeaderV1, flexible=False)
    class ProduceRequest:
        acks: i16 = field(metadata={"kafka_type": "int16"})
        timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
        topic_data: tuple[TopicProduceData, ...]

    return ProduceRequest


def _old_fetch(version: int) -> type:
    @_entity(1, version, _NESTED, RequestHeaderV1, flexible=False)
    class FetchPartition:
        partition: i32 = field(metadata={"kafka_type": "int32"})
        fetch_offset: i64 = field(metadata={"kafka_type": "int64"})
        partition_max_bytes: i32 = field(metadata={"kafka_type": "int32"})

    @_entity(1, version, _NESTED, RequestHeaderV1, flexible=False)
    class FetchTopic:
        topic: str = field(metadata={"kafka_type": "string"})
        partitions: tuple[FetchPartition, ...]

    if version >= 3:

        @_entity(1, version, _REQ, RequestHeaderV1, flexible=False)
        class FetchRequest:
            replica_id: i32 = field(metadata={"kafka_type": "int32"})
            max_wait: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
            min_bytes: i32 = field(metadata={"kafka_type": "int32"})
            max_bytes: i32 = field(metadata={"kafka_type": "int32"})
            topics: tuple[FetchTopic, ...]

    else:

        @_entity(1, version, _REQ, RequestHeaderV1, flexible=False)
        class FetchRequest:
            replica_id: i32 = field(metadata={"kafka_type": "int32"})
            max_wait: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
            min_bytes: i32 = field(metadata={"kafka_type": "int32"})
            topics: tuple[FetchTopic, ...]

    return FetchRequest


# (api key, version) -> (request type, response type); None: the response is by hand
EXTRA_SCHEMAS: dict[tuple[int, int], tuple[type, type | None]] = {
    **{(0, v): (_old_produce(v), None) for v in range(3)},
    **{(1, v): (_old_fetch(v), None) for v in range(4)},
    (7, 3): (ControlledShutdownRequest, ControlledShutdownResponse),
    (4, 4): (LeaderAndIsrRequest, LeaderAndIsrResponse),
    (6, 7): (UpdateMetadataRequest, UpdateMetadataResponse),
    (5, 3): (StopReplicaRequest, StopReplicaResponse),
}
