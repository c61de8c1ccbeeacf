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

from .bounds import BoundsError, read_uvarint
from .errors import ErrorCode

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


# -- a follower's Fetch v12 answer, the replication hot path --------------------------------
_FOLLOWER_HEAD = struct.Struct(">iBihi")  # correlation id, header tags, throttle, error, session
#: index, error, hw, last stable, log start, aborted (null: 0), preferred read replica (-1)
_FOLLOWER_PARTITION = struct.Struct(">ihqqqBi")
_compact_names: dict[str, bytes] = {}


def _compact_name(name: str) -> bytes:
    raw = _compact_names.get(name)
    if raw is None:
        if len(_compact_names) > 10_000:  # topics come and go: keep the cache bounded
            _compact_names.clear()
        raw = _compact_names[name] = _string(name, True)
    return raw


def encode_follower_fetch_response(
    correlation_id: int, session_id: int, topics: list[tuple[str, list[tuple]]]
) -> list[Any]:
    """The bytes ``encode_fetch_response(12, ...)`` makes for a follower's answer (no
    throttle, no error, no aborted transactions, no preferred read replica), in fewer
    steps: one struct call per partition. ``topics``: (name, [(partition, error, high
    watermark, last stable offset, log start offset, records, records size)]), where
    records are bytes or an opaque object standing for ``records size`` bytes (sent in
    place, as the general encoder does). Pinned byte for byte to the general encoder in
    tests/test_follower_fetch_fast.py."""
    buf = head = bytearray(b"\0\0\0\0")  # the size, set last
    parts: list[Any] = [head]
    buf += _FOLLOWER_HEAD.pack(correlation_id, 0, 0, 0, session_id)
    n = len(topics) + 1
    buf += _uvarint(n) if n > 127 else bytes((n,))
    pack = _FOLLOWER_PARTITION.pack
    total = -4  # the size does not count itself
    for name, partitions in topics:
        buf += _compact_name(name)
        n = len(partitions) + 1
        buf += _uvarint(n) if n > 127 else bytes((n,))
        for index, error, hw, lso, start, records, size in partitions:
            buf += pack(index, error, hw, lso, start, 0, -1)
            buf += _uvarint(size + 1) if size >= 127 else bytes((size + 1,))
            if size and not isinstance(records, bytes | bytearray | memoryview):
                total += len(buf) + size
                parts.append(records)
                buf = bytearray(b"\0")  # partition tagged fields
                parts.append(buf)
            else:
                if size:
                    buf += records
                buf += b"\0"  # partition tagged fields
        buf += b"\0"  # topic tagged fields
    buf += b"\0"  # response tagged fields
    total += len(buf)
    _I32.pack_into(head, 0, total)
    return parts


class FollowerFetchAnswer(NamedTuple):
    """A Fetch v12 response as a follower uses it: the session fields, and per
    partition (topic, partition, error code, high watermark, log start offset, records
    or None)."""

    error_code: ErrorCode
    session_id: int
    partitions: list[tuple[str, int, ErrorCode, int, int, bytes | None]]


_CODES = {int(code): code for code in ErrorCode}
_HEAD_SIZE = _FOLLOWER_HEAD.size
_PARTITION_SIZE = _FOLLOWER_PARTITION.size


def decode_follower_fetch_response(frame: bytes) -> FollowerFetchAnswer | None:
    """Read a Fetch v12 response frame (no size prefix) of the shape a leader sends a
    follower: no tagged fields, no aborted transactions. None for anything else, which
    the caller reads with kio's decoder instead (and that refuses what is malformed);
    what this accepts, kio reads the same (tests/test_follower_fetch_fast.py)."""
    try:
        _correlation, tags, _throttle, error, session_id = _FOLLOWER_HEAD.unpack_from(frame, 0)
        code = _CODES.get(error)
        if tags or code is None:
            return None
        end = len(frame)
        pos = _HEAD_SIZE
        n = frame[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(frame, pos, end)
        if n == 0:
            return None
        unpack = _FOLLOWER_PARTITION.unpack_from
        out = []
        for _ in range(n - 1):
            size = frame[pos]
            if size < 0x80:
                pos += 1
            else:
                size, pos = read_uvarint(frame, pos, end)
            stop = pos + size - 1
            if size == 0 or stop > end:
                return None
            topic = frame[pos:stop].decode()
            pos = stop
            count = frame[pos]
            if count < 0x80:
                pos += 1
            else:
                count, pos = read_uvarint(frame, pos, end)
            if count == 0:
                return None
            for _ in range(count - 1):
                index, perr, hw, _lso, start, aborted, _preferred = unpack(frame, pos)
                pcode = _CODES.get(perr)
                if aborted or pcode is None:
                    return None
                pos += _PARTITION_SIZE
                size = frame[pos]
                if size < 0x80:
                    pos += 1
                else:
                    size, pos = read_uvarint(frame, pos, end)
                records = None
                if size:
                    stop = pos + size - 1
                    if stop > end:
                        return None
                    records = frame[pos:stop]
                    pos = stop
                if frame[pos]:  # partition tagged fields
                    return None
                pos += 1
                out.append((topic, index, pcode, hw, start, records))
            if frame[pos]:  # topic tagged fields
                return None
            pos += 1
        if frame[pos]:  # response tagged fields
            return None
        return FollowerFetchAnswer(code, session_id, out)
    except (struct.error, IndexError, UnicodeDecodeError, BoundsError):
        return None
