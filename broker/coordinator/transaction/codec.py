"""The keys and values of ``__transaction_state``, byte for byte as Kafka's
TransactionLog writes them.

- TransactionLogKey v0: version i16 (=0) | transactional_id string
- TransactionLogValue v0: version i16 (=0) | producer_id i64 | producer_epoch i16 |
  transaction_timeout_ms i32 | transaction_status i8 |
  transaction_partitions [topic string | partition_ids [i32]] (nullable; null when
  Empty) | transaction_last_update_timestamp_ms i64 | transaction_start_timestamp_ms i64
- v1 is the same fields, flexible (compact strings and arrays, tagged fields): read only.

A tombstone (null value) removes an expired transactional id.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..group.codec import java_string_hash

_I16 = struct.Struct(">h")
_VALUE_HEAD = struct.Struct(">qhib")
_VALUE_TAIL = struct.Struct(">qq")
_I32 = struct.Struct(">i")


class CodecError(ValueError):
    """Bytes that are not a record of ``__transaction_state``."""


class TxnLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]] | None
    last_update_ms: int
    start_ms: int


def partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def key_bytes(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def value_bytes(v: TxnLogValue) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _VALUE_HEAD.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.status)
    if v.partitions is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(v.partitions))
        for topic, ids in v.partitions.items():
            out += _string(topic) + _I32.pack(len(ids))
            out += b"".join(_I32.pack(i) for i in ids)
    out += _VALUE_TAIL.pack(v.last_update_ms, v.start_ms)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes, flexible: bool) -> None:
        self.data, self.pos, self.flexible = data, 0, flexible

    def unpack(self, st: struct.Struct):
        if self.pos + st.size > len(self.data):
            raise CodecError("truncated transaction log record")
        out = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return out

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.data):
                raise CodecError("truncated varint")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def length(self) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.unpack(_I32)[0]

    def string(self) -> str:
        n = self.uvarint() - 1 if self.flexible else self.unpack(_I16)[0]
        if n < 0 or self.pos + n > len(self.data):
            raise CodecError("bad string length")
        text = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return text

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()


def read_key(data: bytes) -> str:
    r = _Reader(data, False)
    (version,) = r.unpack(_I16)
    if version != 0:
        raise CodecError(f"unknown transaction log key version {version}")
    return r.string()


def read_value(data: bytes) -> TxnLogValue:
    (version,) = _I16.unpack_from(data, 0)
    if version not in (0, 1):
        raise CodecError(f"unknown transaction log value version {version}")
    r = _Reader(data, version >= 1)
    r.pos = 2
    pid, epoch, timeout, status = r.unpack(_VALUE_HEAD)
    count = r.length()
    partitions: dict[str, list[int]] | None = None
    if count >= 0:
        partitions = {}
        for _ in range(count):
            topic = r.string()
            n = r.length()
            partitions[topic] = [r.unpack(_I32)[0] for _ in range(max(n, 0))]
            r.skip_tags()
    last_update, start = r.unpack(_VALUE_TAIL)
    r.skip_tags()
    return TxnLogValue(pid, epoch, timeout, status, partitions, last_update, start)
