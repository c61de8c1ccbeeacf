"""The keys and values of ``__consumer_offsets`` records, byte for byte as Kafka writes
them (GroupMetadataManager's offsetCommitKey/Value and groupMetadataKey/Value), so that
Kafka's own tools and Burrow can read the topic; and the consumer protocol's
subscription and assignment (ConsumerProtocol), for the coordinator and the tools.

Every key and value starts with an int16 schema version:

- OffsetCommitKey v0/v1 (we write v1): group, topic (strings), partition (int32)
- GroupMetadataKey v2: group
- OffsetCommitValue v0-v4 (we write v3, or v1 when the commit carried an explicit
  retention time): offset, [leaderEpoch v3+], metadata, commitTimestamp,
  [expireTimestamp v1]; v4 is the first flexible version
- GroupMetadataValue v0-v4 (we write v3): protocolType, generation, protocol?,
  leader?, [currentStateTimestamp v2+], members[memberId, [groupInstanceId? v3+],
  clientId, clientHost, [rebalanceTimeout v1+], sessionTimeout, subscription,
  assignment]

A tombstone (null value) deletes an offset or a group.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
NO_LEADER_EPOCH = -1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class CodecError(ValueError):
    """Bytes that are not a record of ``__consumer_offsets``."""


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=65536)
def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# -- writing ----------------------------------------------------------------------------


def _string(out: bytearray, text: str | None) -> None:
    if text is None:
        out += _I16.pack(-1)
        return
    data = text.encode()
    out += _I16.pack(len(data))
    out += data


def _bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(data))
    out += data


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    out = bytearray(_I16.pack(OFFSET_COMMIT_KEY_VERSION))
    _string(out, group)
    _string(out, topic)
    out += _I32.pack(partition)
    return bytes(out)


def group_metadata_key(group: str) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_KEY_VERSION))
    _string(out, group)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's OffsetAndMetadata); timestamps in epoch ms."""

    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    """Value v3, or v1 when the commit has an explicit expiry (OffsetCommit v2-v4
    with retention_time), exactly as Kafka 3.x chooses."""
    if om.expire_timestamp is not None:
        out = bytearray(_I16.pack(OFFSET_COMMIT_VALUE_WITH_EXPIRY))
        out += _I64.pack(om.offset)
        _string(out, om.metadata or "")
        out += _I64.pack(om.commit_timestamp)
        out += _I64.pack(om.expire_timestamp)
        return bytes(out)
    out = bytearray(_I16.pack(OFFSET_COMMIT_VALUE_VERSION))
    out += _I64.pack(om.offset)
    out += _I32.pack(NO_LEADER_EPOCH if om.leader_epoch is None else om.leader_epoch)
    _string(out, om.metadata or "")
    out += _I64.pack(om.commit_timestamp)
    return bytes(out)


@dataclass(slots=True)
class MemberRecord:
    """One member in a GroupMetadataValue."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupRecord:
    """A GroupMetadataValue."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberRecord] = field(default_factory=list)


def group_metadata_value(g: GroupRecord) -> bytes:
    out = bytearray(_I16.pack(GROUP_METADATA_VALUE_VERSION))
    _string(out, g.protocol_type)
    out += _I32.pack(g.generation)
    _string(out, g.protocol)
    _string(out, g.leader)
    out += _I64.pack(g.current_state_timestamp)
    out += _I32.pack(len(g.members))
    for m in g.members:
        _string(out, m.member_id)
        _string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout)
        out += _I32.pack(m.session_timeout)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# -- reading ----------------------------------------------------------------------------


class _Reader:
    """Kafka's primitive types; ``flexible`` switches to compact (varint) lengths."""

    __slots__ = ("data", "pos", "flexible")

    def __init__(self, data: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.data = data
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise CodecError("record ends early")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise CodecError("varint too long")

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        n = self._length(False)
        return None if n < 0 else self._take(n).decode("utf-8", "replace")

    def string(self) -> str:
        text = self.nullable_string()
        if text is None:
            raise CodecError("null where a string is required")
        return text

    def nullable_bytes(self) -> bytes | None:
        n = self._length(True)
        return None if n < 0 else bytes(self._take(n))

    def array_length(self) -> int:
        return self._length(True)

    def skip_tagged_fields(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


class OffsetKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupKey(NamedTuple):
    group: str


def read_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of a ``__consumer_offsets`` record; None for an unknown key version."""
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupKey(r.string())
    return None


def read_offset_value(data: bytes) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise CodecError(f"unknown offset commit value version {version}")
    r.flexible = version >= 4
    offset = r.int64()
    epoch = r.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = r.string()
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    return OffsetAndMetadata(
        offset,
        None if epoch == NO_LEADER_EPOCH else epoch,
        metadata,
        commit_ts,
        None if expire_ts == -1 else expire_ts,
    )


def read_group_value(data: bytes) -> GroupRecord:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise CodecError(f"unknown group metadata value version {version}")
    r.flexible = version >= 4
    g = GroupRecord(r.string(), r.int32(), r.nullable_string(), r.nullable_string())
    if version >= 2:
        g.current_state_timestamp = r.int64()
    for _ in range(max(r.array_length(), 0)):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        rebalance = r.int32() if version >= 1 else -1
        session = r.int32()
        if rebalance == -1:
            rebalance = session
        subscription = r.nullable_bytes() or b""
        assignment = r.nullable_bytes() or b""
        r.skip_tagged_fields()
        g.members.append(
            MemberRecord(
                member_id, instance, client_id, client_host, rebalance, session,
                subscription, assignment,
            )
        )  # fmt: skip
    return g


# -- the consumer protocol (ConsumerProtocolSubscription / Assignment) --------------------


def subscription_topics(metadata: bytes) -> set[str]:
    """Topics of a consumer's subscription (every version starts like v0)."""
    r = _Reader(metadata)
    r.int16()
    return {r.string() for _ in range(max(r.int32(), 0))}


def assignment_partitions(assignment: bytes) -> list[tuple[str, list[int]]]:
    """(topic, partitions) of a consumer's assignment; [] for an empty assignment."""
    if len(assignment) < 2:
        return []
    r = _Reader(assignment)
    r.int16()
    out = []
    for _ in range(max(r.int32(), 0)):
        topic = r.string()
        out.append((topic, [r.int32() for _ in range(max(r.int32(), 0))]))
    return out
