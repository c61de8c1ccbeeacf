"""Message sets v0/v1 (broker.protocol.legacy_records) byte for byte, against
kafka-python's own legacy encoder and reader: up to record batch v2 and back down."""

from __future__ import annotations

import struct
import zlib

import lz4.frame
import pytest
import xxhash
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from broker.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.legacy_records import (
    _message,
    down_convert,
    legacy_magic,
    read_message_set,
    up_convert,
)
from broker.protocol.produce_response import encode_produce_response
from broker.protocol.records import (
    LOG_APPEND_TIME,
    Record,
    build_batch,
    decode_records,
    read_batch_header,
    validate_produce,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4]
TS = 1_700_000_000_000


def _kafka_python_set(magic: int, codec: int, n: int = 5) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(n):
        key = None if i % 2 else f"k{i}".encode()
        builder.append(i, TS + i, key, f"value-{i}".encode() * 3)
    return bytes(builder.build())


def _kafka_python_read(data: bytes) -> list[tuple]:
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        out += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
    return out


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_up_convert_kafka_python_message_sets(magic, codec):
    data = _kafka_python_set(magic, codec)
    assert legacy_magic(data) == magic
    batch = up_convert(data, max_message_bytes=1 << 20)
    [header] = validate_produce(batch, max_message_bytes=1 << 20)
    assert header.compression == codec  # compression.type=producer keeps the codec
    assert (header.base_offset, header.producer_id, header.base_sequence) == (0, -1, -1)
    want_ts = [TS + i if magic == 1 else -1 for i in range(5)]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(batch)] == [
        (i, None if i % 2 else f"k{i}".encode(), f"value-{i}".encode() * 3, want_ts[i])
        for i in range(5)
    ]


def _stored(codec: int, *, append_time: bool = False, first: int = 100) -> bytes:
    records = [
        Record(first + i, TS + i, f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")])
        for i in range(4)
    ]
    return build_batch(
        records,
        base_offset=first,
        compression=codec,
        timestamp_type=LOG_APPEND_TIME if append_time else 0,
        max_timestamp=TS + 99 if append_time else None,
    )


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_down_convert_read_by_kafka_python(magic, codec):
    """Offsets kept (inner offsets relative under magic 1), timestamps under magic 1."""
    data = _stored(codec) + _stored(codec, first=104)
    down = down_convert(data, magic, 100)
    messages = list(read_message_set(down))
    assert {m.magic for m in messages} == {magic}
    assert len(messages) == (8 if codec == NONE else 2)
    got = _kafka_python_read(down)
    assert [(o, k, v) for o, k, v, _ts in got] == [
        (100 + i, f"k{i % 4}".encode(), f"v{i % 4}".encode()) for i in range(8)
    ]
    if magic == 1:
        assert [ts for *_r, ts in got] == [TS + i % 4 for i in range(8)]


def test_down_convert_skips_control_batches_and_records_before_the_fetch_offset():
    control = build_batch(
        [Record(104, TS, b"\0\0\0\1", b"\0\0\0\0\0\0", [])],
        base_offset=104,
        producer_id=7,
        producer_epoch=0,
        is_control=True,
        is_transactional=True,
    )
    data = _stored(NONE) + control + _stored(NONE, first=105)
    got = [m.offset for m in read_message_set(down_convert(data, 1, 102))]
    assert got == [102, 103, 105, 106, 107, 108]


def test_down_convert_keeps_log_append_time():
    [wrapper] = list(read_message_set(down_convert(_stored(GZIP, append_time=True), 1, 0)))
    assert wrapper.timestamp_type == LOG_APPEND_TIME and wrapper.timestamp == TS + 99
    assert wrapper.offset == 103  # a magic 1 wrapper carries its last inner offset
    assert {
        r[3] for r in _kafka_python_read(down_convert(_stored(GZIP, append_time=True), 1, 0))
    } == {TS + 99}


def test_down_convert_refuses_zstd_and_drops_a_torn_batch():
    with pytest.raises(KafkaError) as info:
        down_convert(_stored(ZSTD), 1, 0)
    assert info.value.code == ErrorCode.unsupported_compression_type
    whole = _stored(NONE)
    assert down_convert(whole + whole[:30], 0, 0) == down_convert(whole, 0, 0)


def test_magic_0_lz4_has_kafka_0_8s_header_checksum():
    """Down: the header checksum is taken over the frame magic too (standard readers
    refuse it); up: such a frame, as kafka-python writes it for 0.8/0.9, is read."""
    [wrapper] = list(read_message_set(down_convert(_stored(LZ4), 0, 0)))
    frame = wrapper.value
    assert frame[6] == (xxhash.xxh32_intdigest(frame[:6]) >> 8) & 0xFF
    assert frame[6] != (xxhash.xxh32_intdigest(frame[4:6]) >> 8) & 0xFF
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(frame)
    batch = up_convert(down_convert(_stored(LZ4), 0, 0), max_message_bytes=1 << 20)
    assert [r.value for r in decode_records(batch)] == [f"v{i}".encode() for i in range(4)]


def _corrupt_crc(message: bytes) -> bytes:
    out = bytearray(message)
    out[12] ^= 0xFF
    return bytes(out)


def _wrapper(magic: int, inner: bytes, codec: int = GZIP) -> bytes:
    return _message(0, magic, codec, TS, None, compress(codec, inner))


BAD_INPUTS = {
    "outer crc": (_corrupt_crc(_message(0, 1, 0, TS, b"k", b"v")), ErrorCode.corrupt_message),
    "inner crc": (_wrapper(1, _corrupt_crc(_message(0, 1, 0, TS, None, b"v"))), 2),
    "truncated": (_message(0, 1, 0, TS, b"k", b"value")[:-2], ErrorCode.corrupt_message),
    "size under minimum": (struct.pack(">qiIbb", 0, 13, 0, 0, 0) + bytes(8), 2),
    "bad magic": (struct.pack(">qiIbb", 0, 30, 0, 5, 0) + bytes(30), 2),
    "key past end": (
        struct.pack(">qiIbb", 0, 14, 0, 0, 0) + struct.pack(">ii", 50, -1),
        ErrorCode.corrupt_message,
    ),
    "inner magic differs": (
        _wrapper(1, _message(0, 0, 0, TS, None, b"v")),
        ErrorCode.invalid_record,
    ),
    "nested compression": (
        _wrapper(1, _wrapper(1, _message(0, 1, 0, TS, None, b"v"))),
        ErrorCode.invalid_record,
    ),
    "empty wrapper": (_wrapper(1, b""), ErrorCode.invalid_record),
    "null wrapper": (_message(0, 1, GZIP, TS, None, None), ErrorCode.invalid_record),
    "zstd wrapper": (
        _wrapper(1, _message(0, 1, 0, TS, None, b"v"), ZSTD),
        ErrorCode.unsupported_compression_type,
    ),
    "gzip garbage": (_message(0, 1, GZIP, TS, None, b"not gzip"), ErrorCode.corrupt_message),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_message_sets_get_kafkas_error(name):
    data, code = BAD_INPUTS[name]
    # the CRC is made right unless the case is about it, so the check under test is reached
    if "crc" not in name and len(data) >= 18:
        (size,) = struct.unpack_from(">i", data, 8)
        if 12 + size <= len(data):
            data = bytearray(data)
            struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16 : 12 + size])))
            data = bytes(data)
    with pytest.raises(KafkaError) as info:
        up_convert(data, max_message_bytes=1 << 20)
    assert info.value.code == code, info.value.message


def test_message_too_large():
    message = _message(0, 1, 0, TS, None, b"x" * 500)
    with pytest.raises(KafkaError) as info:
        up_convert(message, max_message_bytes=100)
    assert info.value.code == ErrorCode.message_too_large


def test_lz4_wrapper_timestamps_of_a_log_append_time_wrapper():
    inner = b"".join(_message(i, 1, 0, TS + i, None, b"v") for i in range(2))
    wrapper = _message(1, 1, LZ4 | 0x08, TS + 50, None, compress(LZ4, inner))
    batch = up_convert(wrapper, max_message_bytes=1 << 20)
    assert read_batch_header(batch).compression == LZ4
    assert [r.timestamp for r in decode_records(batch)] == [TS + 50, TS + 50]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (0, struct.pack(">ihq", 3, 0, 42)),
        (1, struct.pack(">ihq", 3, 0, 42)),
        (2, struct.pack(">ihqq", 3, 0, 42, -1)),
    ],
)
def test_produce_response_v0_to_v2_bytes(version, expected):
    body = {
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {"index": 3, "error_code": 0, "base_offset": 42, "log_append_time": -1}
                ],
            }
        ],
        "throttle_time": 5,
    }
    frame = encode_produce_response(version, 9, body)
    head = struct.pack(">ii", 9, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
    tail = struct.pack(">i", 5) if version >= 1 else b""
    assert frame[4:] == head + expected + tail
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
