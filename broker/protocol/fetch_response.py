"""Fetch response encoder, by hand: the hot path of every consumer.

kio would need the record bytes in memory; here each partition's records are left as
an opaque object (the caller's file region) between encoded byte parts, so the socket
layer can send them with sendfile. Only the length of the records is needed here.
Versions 0 to 12 (12 is the first flexible one): v0 has no throttle time, v0-v3 no
last stable offset or aborted transactions, v4 no log start offset.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, hw, lso, log start
_PARTITION_HEAD_V4 = struct.Struct(">ihqq")  # v4 has no log start offset
_PARTITION_HEAD_V0 = struct.Struct(">ihq")  # v0-v3: index, error, hw


class PartitionData(NamedTuple):
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: Any  # bytes, None, or an object with ``count`` (bytes it stands for)
    records_size: int
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(value: str, flexible: bool) -> bytes:
    raw = value.encode()
    return (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def _array_len(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: list[tuple[str, list[PartitionData]]],
    *,
    throttle_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[Any]:
    """Parts of a size-prefixed response: bytes, and the ``records`` objects in place."""
    flexible = version >= 12
    parts: list[Any] = []
    head = bytearray(_I32.pack(correlation_id))
    if flexible:
        head += b"\0"  # response header v1 tagged fields
    if version >= 1:
        head += _I32.pack(throttle_ms)
    if version >= 7:
        head += _I16.pack(error_code) + _I32.pack(session_id)
    head += _array_len(len(topics), flexible)
    total = 0
    buf = head
    for name, partitions in topics:
        buf += _string(name, flexible)
        buf += _array_len(len(partitions), flexible)
        for p in partitions:
            if version < 4:
                buf += _PARTITION_HEAD_V0.pack(p.partition, p.error_code, p.high_watermark)
            else:
                buf += _partition_head(version, p)
                buf += _aborted(p.aborted_transactions, flexible)
            if version >= 11:
                buf += _I32.pack(p.preferred_read_replica)
            if p.records is None:
                buf += b"\0" if flexible else _I32.pack(-1)
            else:
                size = p.records_size
                buf += _uvarint(size + 1) if flexible else _I32.pack(size)
                if isinstance(p.records, bytes | bytearray | memoryview):
                    buf += p.records
                elif size:
                    parts.append(bytes(buf))
                    total += len(buf)
                    parts.append(p.records)
                    total += size
                    buf = bytearray()
            if flexible:
                buf += b"\0"  # partition tagged fields
        if flexible:
            buf += b"\0"  # topic tagged fields
    if flexible:
        buf += b"\0"  # response tagged fields
    parts.append(bytes(buf))
    total += len(buf)
    parts[0] = _I32.pack(total) + parts[0]
    return parts


def _partition_head(version: int, p: PartitionData) -> bytes:
    if version >= 5:
        return _PARTITION_HEAD.pack(
            p.partition, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset
        )
    return _PARTITION_HEAD_V4.pack(
        p.partition, p.error_code, p.high_watermark, p.last_stable_offset
    )


def _aborted(aborted: list[tuple[int, int]] | None, flexible: bool) -> bytes:
    if aborted is None:
        return b"\0" if flexible else _I32.pack(-1)
    buf = bytearray(_array_len(len(aborted), flexible))
    for producer_id, first_offset in aborted:
        buf += _I64.pack(producer_id) + _I64.pack(first_offset)
        if flexible:
            buf += b"\0"
    return bytes(buf)
