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
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
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


def _entity(api_key: int, version: int, kind, header):
    """Decorator: kio's class attributes for a message type of ours."""

    def wrap(cls):
        cls.__type__ = kind
        cls.__version__ = i16(version)
        cls.__flexible__ = True
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


# (api key, version) -> (request type, response type)
EXTRA_SCHEMAS: dict[tuple[int, int], tuple[type, type]] = {
    (7, 3): (ControlledShutdownRequest, ControlledShutdownResponse),
    (4, 4): (LeaderAndIsrRequest, LeaderAndIsrResponse),
    (6, 7): (UpdateMetadataRequest, UpdateMetadataResponse),
    (5, 3): (StopReplicaRequest, StopReplicaResponse),
}
