"""Message sets v0 and v1 (magic 0 and 1, before KIP-98): pure functions over bytes.

Produce v0-v2 may carry them and Fetch v0-v3 must answer with them. Kafka 3.x keeps
only record batch v2 on disk (KIP-724: ``message.format.version`` is ignored), so, as
Kafka's LogValidator does, a legacy message set is converted up to one v2 batch on
append (``up_convert``), and, as Kafka's LazyDownConversionRecords does, stored v2
batches are converted down to legacy messages for an old fetcher (``down_convert``).

Layout of one legacy message (big endian)::

    offset i64 | size i32 | crc u32 | magic i8 | attributes i8 | timestamp i64 (magic 1) |
    key bytes (i32 length, -1 null) | value bytes (i32 length, -1 null)

``size`` counts the bytes after itself and the CRC is a CRC-32 (IEEE, not 32C) of magic
to the end. Attribute bits 0-2 are the codec (gzip, snappy, lz4; no zstd), bit 3 the
timestamp type (magic 1). A compressed message is a wrapper whose value is the codec's
output over a message set of inner messages: in magic 1 the inner offsets are relative
(0..n-1) and the wrapper carries the absolute offset of the last; in magic 0 all offsets
are absolute. lz4 under magic 0 has Kafka 0.8's broken frame-header checksum (computed
over the frame magic as well): Kafka ignores it when reading and writes it so for
magic 0, and so do we.

Every length read from the input is checked against the bytes that remain, and a
compressed wrapper inflates at most to ``decompressed_limit`` of its size. Errors are
``KafkaError`` with Kafka's codes: CORRUPT_MESSAGE for framing and CRCs, INVALID_RECORD
for what Kafka's LogValidator refuses, MESSAGE_TOO_LARGE past ``max.message.bytes``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple

import xxhash

from broker.protocol.compression import LZ4, ZSTD, compress, decompress, decompressed_limit
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    Record,
    build_batch,
    decode_records,
    read_batch_header,
)

__all__ = ["LegacyMessage", "down_convert", "legacy_magic", "read_message_set", "up_convert"]

LOG_OVERHEAD = 12  # offset + size
HEADER_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
TIMESTAMP = struct.Struct(">q")
RECORD_OVERHEAD = {0: 14, 1: 22}  # crc..value length: LegacyRecord.RECORD_OVERHEAD_V0/V1
CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
_I32 = struct.Struct(">i")
_MAGIC_POS = 16  # offset 8 + size 4 + crc 4: where magic sits, as in a v2 batch


class LegacyMessage(NamedTuple):
    """One message of a v0/v1 message set, CRC checked."""

    offset: int
    magic: int
    attributes: int
    timestamp: int  # NO_TIMESTAMP under magic 0
    key: bytes | None
    value: bytes | None
    size: int  # bytes the message occupies, offset and size included

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes >> 3) & 1 if self.magic > 0 else 0


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_record, message)


def legacy_magic(buf) -> int | None:
    """The magic of the first entry of a Produce payload when it is 0 or 1, else None."""
    if len(buf) <= _MAGIC_POS:
        return None
    magic = buf[_MAGIC_POS]
    return magic if magic in (0, 1) else None


# --------------------------------------------------------------------------- reading


def _read_bytes(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise _corrupt(f"The {what} length of a message runs past the end of the message.")
    (length,) = _I32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        if length != -1:
            raise _corrupt(f"A message declares a negative {what} length {length}.")
        return None, pos
    if length > end - pos:
        raise _corrupt(
            f"A message declares a {what} of {length} bytes but only {end - pos} remain."
        )
    return bytes(buf[pos : pos + length]), pos + length


def _read_message(buf, pos: int, end: int) -> LegacyMessage:
    """The message at ``pos``; its framing, magic, CRC and lengths checked."""
    remaining = end - pos
    if remaining < HEADER_V0.size:
        raise _corrupt(f"The message set ends with {remaining} bytes that are not a message.")
    offset, size, crc, magic, attributes = HEADER_V0.unpack_from(buf, pos)
    if magic not in RECORD_OVERHEAD:
        raise _corrupt(f"Invalid magic {magic} in a message set of magic 0/1 at {pos}.")
    if size < RECORD_OVERHEAD[magic]:
        raise _corrupt(f"Message size {size} is less than the minimum of {RECORD_OVERHEAD[magic]}.")
    if size > remaining - LOG_OVERHEAD:
        raise _corrupt(
            f"Message at position {pos} declares {size + LOG_OVERHEAD} bytes but only "
            f"{remaining} remain: the message set is truncated."
        )
    stop = pos + LOG_OVERHEAD + size
    with memoryview(buf) as view:
        computed = zlib.crc32(view[pos + LOG_OVERHEAD + 4 : stop])
    if computed != crc:
        raise _corrupt(f"Message is corrupt (stored crc = {crc}, computed crc = {computed}).")
    body = pos + LOG_OVERHEAD + 6
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = TIMESTAMP.unpack_from(buf, body)
        body += 8
    key, body = _read_bytes(buf, body, stop, "key")
    value, body = _read_bytes(buf, body, stop, "value")
    if body != stop:
        raise _corrupt(f"Message declares {size} bytes but its fields take {body - pos - 12}.")
    return LegacyMessage(offset, magic, attributes, timestamp, key, value, stop - pos)


def read_message_set(buf) -> Iterator[LegacyMessage]:
    """The messages of a whole message set, outer (wrappers unopened). Bytes after the
    last whole message raise CORRUPT_MESSAGE, as a torn v2 batch does."""
    pos, end = 0, len(buf)
    while pos < end:
        message = _read_message(buf, pos, end)
        yield message
        pos += message.size


def _fix_lz4_v0_header(data: bytes) -> bytes:
    """Kafka 0.8's lz4 frames under magic 0 carry a header checksum taken over the frame
    magic too; Kafka ignores it, so we put the right one in before decoding."""
    return _with_header_checksum(data, broken=False)


def _with_header_checksum(data: bytes, *, broken: bool) -> bytes:
    if len(data) < 7 or data[:4] != b"\x04\x22\x4d\x18":
        return data  # not an lz4 frame: the decoder says what is wrong
    flags = data[4]
    end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(data) <= end:
        return data
    checksum = (xxhash.xxh32_intdigest(data[0 if broken else 4 : end]) >> 8) & 0xFF
    return data[:end] + bytes([checksum]) + data[end + 1 :]


def _inner_messages(wrapper: LegacyMessage) -> list[LegacyMessage]:
    """The messages a compressed wrapper holds (Kafka's DeepRecordsIterator checks)."""
    if wrapper.value is None:
        raise _invalid("A compressed message has a null value.")
    if wrapper.codec == ZSTD or wrapper.codec > LZ4:
        raise KafkaError(
            ErrorCode.unsupported_compression_type,
            f"Compression codec id {wrapper.codec} is not allowed in a message of magic "
            f"{wrapper.magic}.",
        )
    payload = wrapper.value
    if wrapper.codec == LZ4 and wrapper.magic == 0:
        payload = _fix_lz4_v0_header(payload)
    data = decompress(wrapper.codec, payload, decompressed_limit(wrapper.size))
    inner = list(read_message_set(data))
    if not inner:
        raise _invalid("Found a compressed message set with no inner messages.")
    for message in inner:
        if message.magic != wrapper.magic:
            raise _invalid(
                f"Compressed message magic {message.magic} does not match wrapper magic "
                f"{wrapper.magic}."
            )
        if message.codec:
            raise _invalid("A compressed message holds a compressed inner message.")
    return inner


# --------------------------------------------------------------------------- up


def up_convert(buf, *, max_message_bytes: int) -> bytes:
    """One v2 batch (base offset 0, no producer id) holding every message of the
    legacy message set ``buf``, as Kafka's LogValidator converts a v0/v1 append.

    Each outer message is checked against ``max_message_bytes``; CRCs of wrappers and
    inner messages are verified. Timestamps are kept (magic 0 has none: -1; an inner
    message of a LogAppendTime wrapper has the wrapper's). The batch is compressed
    with the codec of the compressed wrappers (compression.type=producer keeps the
    producer's codec), uncompressed when there are none.
    """
    records: list[tuple[bytes | None, bytes | None, list, int]] = []
    codec = 0
    if len(buf) == 0:
        raise _invalid("A Produce request must hold at least one message per partition.")
    for message in read_message_set(buf):
        if message.size > max_message_bytes:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"The message is {message.size} bytes, more than the maximum of "
                f"{max_message_bytes} (max.message.bytes).",
            )
        if not message.codec:
            records.append((message.key, message.value, [], message.timestamp))
            continue
        codec = codec or message.codec
        append_time = message.timestamp_type == LOG_APPEND_TIME
        for inner in _inner_messages(message):
            ts = message.timestamp if append_time else inner.timestamp
            records.append((inner.key, inner.value, [], ts))
    return build_batch(records, compression=codec)


# --------------------------------------------------------------------------- down


def _message(offset: int, magic: int, attributes: int, ts: int, key, value) -> bytes:
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += TIMESTAMP.pack(ts)
    for field in (key, value):
        if field is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(field)) + field
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + bytes(body)


def _down_batch(batch, magic: int, fetch_offset: int) -> bytes:
    header = read_batch_header(batch, 0)
    if header.compression == ZSTD:
        raise KafkaError(
            ErrorCode.unsupported_compression_type,
            "zstd batches cannot be converted to message format v0/v1 (Fetch v0-v3).",
        )
    records: list[Record] = [r for r in decode_records(batch) if r.offset >= fetch_offset]
    if not records:
        return b""
    ts_bit = TIMESTAMP_TYPE_BIT if magic == 1 and header.timestamp_type == LOG_APPEND_TIME else 0
    if not header.compression:
        return b"".join(
            _message(r.offset, magic, ts_bit, r.timestamp, r.key, r.value) for r in records
        )
    first, last = records[0].offset, records[-1].offset
    inner = b"".join(
        _message(
            r.offset - first if magic == 1 else r.offset, magic, ts_bit, r.timestamp, r.key, r.value
        )
        for r in records
    )
    value = compress(header.compression, inner)
    if header.compression == LZ4 and magic == 0:
        value = _with_header_checksum(value, broken=True)
    wrapper_ts = max(r.timestamp for r in records)
    return _message(last, magic, header.compression | ts_bit, wrapper_ts, None, value)


def down_convert(buf, magic: int, fetch_offset: int) -> bytes:
    """The v2 batches of ``buf`` (a fetch's bytes) as a message set of ``magic`` 0 or 1,
    as Kafka's down-conversion for Fetch v0-v3: offsets kept, control batches dropped,
    records before ``fetch_offset`` left out, headers dropped (legacy messages have
    none), one compressed wrapper per compressed batch with the batch's codec. A torn
    batch at the end is left out. A zstd batch raises UNSUPPORTED_COMPRESSION_TYPE."""
    out = []
    pos, end = 0, len(buf)
    with memoryview(buf) as view:
        while end - pos >= BATCH_HEADER_SIZE:
            header = read_batch_header(view, pos)
            if header.batch_length < MIN_BATCH_LENGTH or header.size > end - pos:
                break
            if not header.is_control:
                out.append(_down_batch(view[pos : pos + header.size], magic, fetch_offset))
            pos += header.size
    return b"".join(out)
