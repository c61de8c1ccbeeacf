"""Message types kio does not ship (Kafka's ZooKeeper-era inter-broker APIs), written
after Kafka 3.x's JSON schemas in kio's dataclass style so the same codecs serve them.

ControlledShutdown (key 7), version 3 (flexible):
request ``BrokerId int32, BrokerEpoch int64``; response
``ErrorCode int16, RemainingPartitions [TopicName string, PartitionIndex int32]``.

No ``from __future__ import annotations`` here: kio reads the field types at runtime.
"""

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


# (api key, version) -> (request type, response type)
EXTRA_SCHEMAS: dict[tuple[int, int], tuple[type, type]] = {
    (7, 3): (ControlledShutdownRequest, ControlledShutdownResponse),
}
