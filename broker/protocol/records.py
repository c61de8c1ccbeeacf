"""Record batch format v2 (magic 2): pure functions over bytes.

Layout of a batch (big endian; the first 61 bytes are the header)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | firstTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records

``batchLength`` counts the bytes after itself, so a batch occupies ``batchLength + 12``
bytes. The CRC-32C covers ``attributes`` to the end, so the broker can rewrite
``baseOffset`` and ``partitionLeaderEpoch`` without recomputing it.

The hot path (``validate_produce`` then ``assign_offsets``) reads only batch headers
and the CRC; it never decodes the records of a batch. Record-level code
(``decode_records``, ``build_batch``, ``recompress``) is for tools, tests, compaction
and recompression. Errors are ``KafkaError`` with Kafka's codes, as Kafka's
``UnifiedLog.analyzeAndValidateRecords``, ``LogValidator`` and ``DefaultRecordBatch``
raise them (deviations are noted where they happen).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import crc32c

from broker.protocol.compression import CODEC_NAMES, compress, decompress, decompressed_limit
from broker.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BATCH_HEADER_SIZE",
    "AppendInfo",
    "BatchHeader",
    "Record",
    "assign_offsets",
    "build_batch",
    "crc_is_valid",
    "decode_records",
    "read_batch_header",
    "recompress",
    "scan_valid_prefix",
    "validate_produce",
]

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49: an empty batch
MIN_RECORD_SIZE = 7  # length, attributes, timestamp and offset deltas, key, value, headers
LEGACY_MIN_LENGTH = 14  # LegacyRecord.RECORD_OVERHEAD_V0: Kafka's first sanity bound
MAGIC = 2

# Byte positions inside a batch.
BASE_OFFSET_POS = 0
LENGTH_POS = 8
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
MAX_TIMESTAMP_POS = 35

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # set: LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

CREATE_TIME, LOG_APPEND_TIME = 0, 1
NO_TIMESTAMP = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH_AND_EPOCH = struct.Struct(">qiib")  # up to and including magic
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
assert _HEADER.size == BATCH_HEADER_SIZE


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, and where the batch starts in its buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps past int32 max like Kafka's."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return _increment_sequence(self.base_sequence, self.last_offset_delta)


class AppendInfo(NamedTuple):
    """What ``assign_offsets`` did: offsets given out and the timestamp summary."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 when the timestamps are CreateTime


class Record(NamedTuple):
    """One decoded record. ``offset`` is absolute (base offset + offset delta)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: wraps to 0 after int32 max."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_record, message)


# --------------------------------------------------------------------------- headers


def read_batch_header(buf, pos: int = 0) -> BatchHeader:
    """Read the header of the batch starting at ``pos`` in ``buf`` (any buffer, mmap too).

    Only the 61 header bytes must be present; nothing is validated.
    """
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise _corrupt(
            f"A record batch header needs {BATCH_HEADER_SIZE} bytes but only "
            f"{max(len(buf) - pos, 0)} remain at position {pos}."
        )
    return BatchHeader(*_HEADER.unpack_from(buf, pos), pos)


def crc_is_valid(view: memoryview, header: BatchHeader) -> bool:
    """Whether the stored CRC-32C matches attributes..end of the batch in ``view``."""
    start = header.position
    return crc32c.crc32c(view[start + ATTRIBUTES_POS : start + header.size]) == header.crc


def _write_crc(buf, position: int, size: int) -> None:
    with memoryview(buf) as view:
        crc = crc32c.crc32c(view[position + ATTRIBUTES_POS : position + size])
    _UINT32.pack_into(buf, position + CRC_POS, crc)


# --------------------------------------------------------------------------- produce


def validate_produce(
    buf,
    *,
    max_message_bytes: int,
    allow_control: bool = False,
    allow_multiple_batches: bool = False,
) -> list[BatchHeader]:
    """Validate a client's Produce payload for one partition; return its batch headers.

    Checks, per batch, in Kafka's order: framing (enough bytes, sane length, magic),
    base offset 0, size <= ``max_message_bytes`` (``max.message.bytes``), CRC, codec
    id, offset delta / record count agreement, no control batch (unless
    ``allow_control``, for the broker's own markers), a sequence when there is a
    producer id. Records are not decoded: this is the hot path.

    Like Kafka's ``ProduceRequest.validateRecords`` (Produce v3+, the only versions
    carrying magic 2), a payload must hold exactly one batch unless
    ``allow_multiple_batches``. Deviations from Kafka, both stricter: bytes after the
    last whole batch raise CORRUPT_MESSAGE (Kafka silently trims them), and an unknown
    codec id raises UNSUPPORTED_COMPRESSION_TYPE (Kafka fails with an unexpected
    IllegalArgumentException, i.e. UNKNOWN_SERVER_ERROR).
    """
    headers: list[BatchHeader] = []
    with memoryview(buf) as view:
        end = len(view)
        if end == 0:
            raise _invalid("A Produce request must hold at least one record batch per partition.")
        pos = 0
        while pos < end:
            header = _read_framed_header(view, pos, end)
            _check_produce_batch(view, header, max_message_bytes, allow_control)
            headers.append(header)
            pos += header.size
    if len(headers) > 1 and not allow_multiple_batches:
        raise _invalid(
            f"A Produce request may hold exactly one record batch per partition, not {len(headers)}."
        )
    return headers


def _read_framed_header(view: memoryview, pos: int, end: int) -> BatchHeader:
    """Framing checks of Kafka's ByteBufferLogInputStream and DefaultRecordBatch.isValid."""
    remaining = end - pos
    if remaining < MAGIC_POS + 1:
        raise _corrupt(f"The payload ends with {remaining} bytes that are not a whole batch.")
    _, length, _, magic = _LENGTH_AND_EPOCH.unpack_from(view, pos)
    if length < LEGACY_MIN_LENGTH:
        raise _corrupt(f"Record batch length {length} is less than the minimum of 14.")
    # the size before the magic, as Kafka's ByteBufferLogInputStream reads them: bytes
    # that do not hold the batch they declare are corrupt whatever their magic byte says
    if remaining < length + LOG_OVERHEAD:
        raise _corrupt(
            f"Record batch at position {pos} declares {length + LOG_OVERHEAD} bytes but only "
            f"{remaining} remain: the payload is truncated."
        )
    if magic < 0 or magic > MAGIC:
        raise _corrupt(f"Invalid magic {magic} found in record batch at position {pos}.")
    if magic != MAGIC:
        raise _invalid(
            f"Produce requests may only carry record batches with magic 2, not magic {magic}."
        )
    if length < MIN_BATCH_LENGTH:
        raise _corrupt(f"Record batch length {length} is less than the minimum of 49 for magic 2.")
    return BatchHeader(*_HEADER.unpack_from(view, pos), pos)


def _check_produce_batch(
    view: memoryview, header: BatchHeader, max_message_bytes: int, allow_control: bool
) -> None:
    """Kafka's per-batch checks for client appends (analyzeAndValidateRecords, validateBatch)."""
    if header.base_offset != 0:
        raise _invalid(
            f"The base offset of a produced record batch must be 0, not {header.base_offset}."
        )
    if header.size > max_message_bytes:
        raise KafkaError(
            ErrorCode.message_too_large,
            f"The record batch is {header.size} bytes, more than the maximum of "
            f"{max_message_bytes} (max.message.bytes).",
        )
    if not crc_is_valid(view, header):
        raise _corrupt(f"Record batch is corrupt (stored CRC {header.crc} does not match).")
    if header.compression not in CODEC_NAMES:
        raise KafkaError(
            ErrorCode.unsupported_compression_type,
            f"Record batch uses unknown compression codec id {header.compression}.",
        )
    count, last_delta = header.records_count, header.last_offset_delta
    if last_delta < 0:
        raise _invalid(f"Record batch has an invalid last offset delta {last_delta}.")
    if count <= 0:
        raise _invalid(f"Record batch declares an invalid record count {count}.")
    if count != last_delta + 1:
        raise _invalid(
            f"Record batch declares {count} records but its offset range holds {last_delta + 1}."
        )
    payload = header.size - BATCH_HEADER_SIZE
    room = payload if header.compression == 0 else decompressed_limit(header.size)
    if count > room // MIN_RECORD_SIZE:  # else the log's end would leap by the claim
        raise _invalid(
            f"Record batch declares {count} records, more than its {payload} bytes can hold."
        )
    if header.is_control and not allow_control:
        raise _invalid("Clients are not allowed to write control records.")
    # Markers (control batches, written by the coordinator) carry no sequence.
    if header.producer_id >= 0 and header.base_sequence < 0 and not header.is_control:
        raise _invalid(
            f"Invalid sequence number {header.base_sequence} in a record batch with "
            f"producer id {header.producer_id}."
        )


def assign_offsets(
    buf,
    headers: Sequence[BatchHeader],
    base_offset: int,
    leader_epoch: int,
    *,
    log_append_time_ms: int | None = None,
) -> AppendInfo:
    """Give the batches in ``buf`` (a bytearray or other writable buffer) their offsets.

    In place, batch after batch from ``base_offset``: writes ``baseOffset`` and
    ``partitionLeaderEpoch`` (outside the CRC). With ``log_append_time_ms`` (topic
    ``message.timestamp.type=LogAppendTime``) it also sets the timestamp-type bit and
    ``maxTimestamp`` and recomputes the CRC, as Kafka's ``setMaxTimestamp`` does; with
    CreateTime a batch that arrived with the LogAppendTime bit has it cleared (CRC
    recomputed), also as Kafka does. ``headers`` (from ``validate_produce``) are not
    updated; re-read them with ``read_batch_header`` when needed.

    The max timestamp is taken from batch headers (Kafka recomputes it from records;
    we trust the CRC-checked header), and ``offset_of_max_timestamp`` is the last offset
    of the batch holding it, Kafka 3.8's "shallow" offset used for the time index.
    """
    next_offset = base_offset
    max_timestamp, offset_of_max = NO_TIMESTAMP, -1
    for header in headers:
        pos = header.position
        _INT64.pack_into(buf, pos + BASE_OFFSET_POS, next_offset)
        _INT32.pack_into(buf, pos + LEADER_EPOCH_POS, leader_epoch)
        last_offset = next_offset + header.last_offset_delta
        if log_append_time_ms is not None:
            _set_max_timestamp(buf, header, LOG_APPEND_TIME, log_append_time_ms)
        else:
            if header.timestamp_type != CREATE_TIME:
                _set_max_timestamp(buf, header, CREATE_TIME, header.max_timestamp)
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, last_offset
        next_offset = last_offset + 1
    if log_append_time_ms is not None:
        max_timestamp, offset_of_max = log_append_time_ms, next_offset - 1
    return AppendInfo(
        first_offset=base_offset,
        last_offset=next_offset - 1,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max,
        log_append_time=NO_TIMESTAMP if log_append_time_ms is None else log_append_time_ms,
    )


def _set_max_timestamp(buf, header: BatchHeader, timestamp_type: int, max_timestamp: int) -> None:
    """Kafka's DefaultRecordBatch.setMaxTimestamp: rewrite type bit and max, then the CRC."""
    if header.timestamp_type == timestamp_type and header.max_timestamp == max_timestamp:
        return
    attributes = header.attributes & ~TIMESTAMP_TYPE_BIT
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_BIT
    pos = header.position
    _INT16.pack_into(buf, pos + ATTRIBUTES_POS, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, max_timestamp)
    _write_crc(buf, pos, header.size)


# --------------------------------------------------------------------------- recovery


def scan_valid_prefix(buf, start_position: int = 0) -> tuple[int, list[BatchHeader]]:
    """Walk the batches of a log segment (bytes or mmap) from ``start_position``.

    Stops at the first batch that is torn (fewer bytes than declared), has an absurd
    length (under 49), a magic other than 2, or a bad CRC. Returns the position just
    past the last valid batch (the valid byte count of ``buf``, trusting the bytes
    before ``start_position``) and the headers of the valid batches.
    """
    headers: list[BatchHeader] = []
    pos = start_position
    with memoryview(buf) as view:
        end = len(view)
        while end - pos >= BATCH_HEADER_SIZE:
            header = BatchHeader(*_HEADER.unpack_from(view, pos), pos)
            if header.batch_length < MIN_BATCH_LENGTH or header.magic != MAGIC:
                break
            if header.size > end - pos or not crc_is_valid(view, header):
                break
            headers.append(header)
            pos += header.size
    return pos, headers


# --------------------------------------------------------------------------- records


def decode_records(batch) -> list[Record]:
    """Decode every record of the batch at the start of ``batch``, decompressing as needed.

    Strict like Kafka's DefaultRecordBatch iterator: a record whose declared length does
    not match its content, a record count that disagrees with the data, or bytes left
    over raise INVALID_RECORD; a batch shorter than its declared length or an
    undecodable compressed payload raise CORRUPT_MESSAGE. The CRC is not checked here.
    Under LogAppendTime every record's timestamp is the batch's max timestamp.
    """
    header = read_batch_header(batch, 0)
    if header.batch_length < MIN_BATCH_LENGTH or len(batch) < header.size:
        raise _corrupt(f"Record batch declares {header.size} bytes but {len(batch)} are available.")
    with memoryview(batch) as view:
        payload = view[BATCH_HEADER_SIZE : header.size]
        data = decompress(header.compression, payload, decompressed_limit(header.size))
    log_append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    try:
        records, pos = _decode_record_list(data, header, log_append_time)
    except IndexError:
        raise _invalid("Record batch ends in the middle of a record.") from None
    if pos != len(data):
        raise _invalid(f"Record batch has {len(data) - pos} bytes left after its last record.")
    return records


def _decode_record_list(data: bytes, header: BatchHeader, log_append_time: int | None):
    count = header.records_count
    if count < 0 or count * MIN_RECORD_SIZE > len(data):
        raise _invalid(
            f"Record batch declares {count} records but holds only {len(data)} bytes of them."
        )
    records = []
    pos = 0
    for _ in range(count):
        length, pos = _read_varint(data, pos)
        start = pos
        pos += 1  # attributes: unused
        ts_delta, pos = _read_varint(data, pos)
        offset_delta, pos = _read_varint(data, pos)
        key, pos = _read_nullable_bytes(data, pos)
        value, pos = _read_nullable_bytes(data, pos)
        header_count, pos = _read_varint(data, pos)
        if header_count < 0:
            raise _invalid(f"Record has an invalid header count {header_count}.")
        record_headers = []
        for _ in range(header_count):
            key_len, pos = _read_varint(data, pos)
            if key_len < 0:
                raise _invalid(f"Record header has an invalid key length {key_len}.")
            h_key = data[pos : pos + key_len].decode("utf-8", "surrogateescape")
            h_value, pos = _read_nullable_bytes(data, pos + key_len)
            record_headers.append((h_key, h_value))
        if pos - start != length or pos > len(data):
            raise _invalid(f"Record declares {length} bytes but holds {pos - start}.")
        timestamp = (
            header.first_timestamp + ts_delta if log_append_time is None else log_append_time
        )
        records.append(
            Record(header.base_offset + offset_delta, timestamp, key, value, record_headers)
        )
    return records, pos


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Protobuf varint with zigzag sign encoding (Kafka's ByteUtils.readVarlong)."""
    byte = data[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos + 1
        shift += 7
        if shift > 63:
            raise _invalid("Record holds a varint longer than 10 bytes.")


def _read_nullable_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos)
    if length < 0:
        return None, pos
    if pos + length > len(data):
        raise IndexError
    return data[pos : pos + length], pos + length


def _write_varint(out: bytearray, value: int) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _write_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(1)  # zigzag(-1)
    else:
        _write_varint(out, len(value))
        out += value


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key, value, headers) -> None:
    body = bytearray(b"\x00")  # attributes
    _write_varint(body, ts_delta)
    _write_varint(body, offset_delta)
    _write_nullable_bytes(body, key)
    _write_nullable_bytes(body, value)
    _write_varint(body, len(headers))
    for h_key, h_value in headers:
        _write_nullable_bytes(body, h_key.encode("utf-8", "surrogateescape"))
        _write_nullable_bytes(body, h_value)
    _write_varint(out, len(body))
    out += body


def _normalise(records: Iterable, base_offset: int) -> list[tuple[int, int, object, object, list]]:
    """(offset_delta, timestamp, key, value, headers) for each input record.

    A ``Record`` keeps its offset (delta from ``base_offset``); a (key, value, headers,
    timestamp_ms) tuple gets the next consecutive delta. A None timestamp is -1.
    """
    out = []
    for index, rec in enumerate(records):
        if isinstance(rec, Record):
            _, timestamp, key, value, headers = rec
            delta = rec.offset - base_offset
        else:
            key, value, headers, timestamp = rec
            delta = index
        if not 0 <= delta <= INT32_MAX:
            raise ValueError(f"Record offset delta {delta} is outside 0..{INT32_MAX}.")
        out.append((delta, NO_TIMESTAMP if timestamp is None else timestamp, key, value, headers))
    return out


def build_batch(
    records: Iterable,
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = CREATE_TIME,
    last_offset_delta: int | None = None,
    first_timestamp: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode a complete v2 batch with a correct CRC.

    ``records`` holds ``Record``s (offsets kept, as deltas from ``base_offset``) or
    ``(key, value, headers, timestamp_ms)`` tuples (consecutive offsets). The optional
    overrides serve compaction and rewrites: ``last_offset_delta`` keeps an original
    batch's last offset (and so its last sequence) after records were removed;
    ``first_timestamp`` is the base the timestamp deltas are taken from; and
    ``max_timestamp`` is for LogAppendTime batches, whose max is the append time.
    ``delete_horizon_ms`` (the cleaner, KIP-534) sets the delete-horizon flag and stores
    the horizon as the batch's base timestamp, record timestamps relative to it.
    """
    entries = _normalise(records, base_offset)
    if delete_horizon_ms is not None:
        first_timestamp = delete_horizon_ms
    if first_timestamp is None:
        first_timestamp = entries[0][1] if entries else NO_TIMESTAMP
    body = bytearray()
    for delta, timestamp, key, value, headers in entries:
        _encode_record(body, delta, timestamp - first_timestamp, key, value, headers)
    if compression:
        body = compress(compression, body)
    if last_offset_delta is None:
        last_offset_delta = entries[-1][0] if entries else 0
    if max_timestamp is None:
        max_timestamp = max((e[1] for e in entries), default=NO_TIMESTAMP)
    attributes = (
        compression
        | (TIMESTAMP_TYPE_BIT if timestamp_type == LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_BIT if is_transactional else 0)
        | (CONTROL_BIT if is_control else 0)
        | (DELETE_HORIZON_BIT if delete_horizon_ms is not None else 0)
    )
    batch = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        MIN_BATCH_LENGTH + len(body),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        first_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(entries),
    )
    batch += body
    _write_crc(batch, 0, len(batch))
    return bytes(batch)


def recompress(batch_bytes, header: BatchHeader, codec: int, level: int | None = None) -> bytes:
    """The batch of ``header`` (at ``header.position`` in ``batch_bytes``) under ``codec``
    (at the topic's ``compression.<codec>.level``, or the codec's default).

    Offsets, timestamps, producer fields, leader epoch and flags stay as they are, and
    so do the record bytes: the records section is decompressed and compressed again,
    then the header gets the new codec, length and CRC.
    """
    start = header.position
    with memoryview(batch_bytes) as view:
        if len(view) - start < header.size:
            raise _corrupt("Record batch is shorter than its declared length.")
        records = decompress(
            header.compression,
            view[start + BATCH_HEADER_SIZE : start + header.size],
            decompressed_limit(header.size),
        )
        out = bytearray(view[start : start + BATCH_HEADER_SIZE])
    out += compress(codec, records, level)
    _INT32.pack_into(out, LENGTH_POS, len(out) - LOG_OVERHEAD)
    _INT16.pack_into(out, ATTRIBUTES_POS, (header.attributes & ~COMPRESSION_MASK) | codec)
    _write_crc(out, 0, len(out))
    return bytes(out)
