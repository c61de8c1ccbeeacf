"""Inputs that crashed or could crash a broker, kept as regression tests.

Each one once made a native library allocate from a size written in the input (the
process aborts: a Rust or C allocation failure is no Python exception) or inflate
without bound. Now each is Kafka's error code: CORRUPT_MESSAGE for a batch, a
ProtocolError (the connection is closed) for a request frame. Every crash the fuzzers
in tests/fuzz/ find lands here with its input, from tests/fuzz/crashes/.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import cramjam
import lz4.frame
import pytest
import zstandard

from broker.protocol import compression as c
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.messages import ProtocolError, parse_request, parse_response
from broker.protocol.records import build_batch, decode_records

CRASHES = Path(__file__).parent / "fuzz" / "crashes"
LIMIT = 8 << 20  # small caps keep these tests light; the rule is the same at 64 MiB


def _header_v1(api_key: int, version: int) -> bytes:
    return struct.pack(">hhih", api_key, version, 7, 1) + b"c"


def _snappy_claiming(length_varint: bytes) -> bytes:
    raw = bytes(cramjam.snappy.compress_raw(b"hello world " * 100))
    skip = next(i for i, b in enumerate(raw) if b < 0x80) + 1
    return length_varint + raw[skip:]


def _zeros(n: int) -> bytes:
    return b"\0" * n


# -- request frames: kio allocates an array from its count before reading it ---------------

ARRAY_BOMBS = {
    "Metadata v1 with 2**31-1 topics": _header_v1(3, 1) + struct.pack(">i", 2**31 - 1) + b"\0\1a",
    "Metadata v9 (compact) with 2**31-2 topics": _header_v1(3, 9)
    + b"\0"
    + b"\xff\xff\xff\xff\x07"
    + b"\2a\0",
    "Fetch v12 with 2**31-2 topics": _header_v1(1, 12)
    + b"\0"
    + struct.pack(">iiiibii", -1, 500, 1, 1000, 0, 0, -1)
    + b"\xff\xff\xff\xff\x07"
    + bytes(20),
    "Metadata v1 with a negative topic count": _header_v1(3, 1) + struct.pack(">i", -7) + b"\0",
    # null (-1) for an array that may not be null: handlers iterated None (TypeError)
    "Produce v3 with null topic data": _header_v1(0, 3)
    + struct.pack(">hhi", -1, 1, 1000)
    + struct.pack(">i", -1),
    # the old versions derived from kio's schemas are walked the same way
    "Produce v2 with 2**31-1 topics": _header_v1(0, 2) + struct.pack(">hii", 1, 1000, 2**31 - 1),
    "Produce v0 with records longer than the frame": _header_v1(0, 0)
    + struct.pack(">hii", 1, 1000, 1)
    + b"\0\1t"
    + struct.pack(">iii", 1, 0, 2**31 - 1),
    "Fetch v1 with 2**31-1 partitions": _header_v1(1, 1)
    + struct.pack(">iiii", -1, 500, 1, 1)
    + b"\0\1t"
    + struct.pack(">i", 2**31 - 1),
}


@pytest.mark.parametrize("name", sorted(ARRAY_BOMBS))
def test_array_count_past_the_frame_is_a_protocol_error(name):
    with pytest.raises(ProtocolError, match="declares|null"):
        parse_request(ARRAY_BOMBS[name])


def test_array_bomb_in_a_child_process_does_not_abort():
    """The same frames under a 1 GiB address-space limit: before the bounds check the
    child died with SIGABRT ("memory allocation of 17179869176 bytes failed")."""
    code = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from broker.protocol.messages import ProtocolError, parse_request
        for frame in {list(ARRAY_BOMBS.values())!r}:
            try:
                parse_request(frame)
            except ProtocolError:
                pass
        print("survived")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "survived"


def test_response_with_a_count_past_the_frame_is_refused():
    """A peer broker's response is checked as a client's request is."""
    frame = struct.pack(">ii", 9, 2**31 - 1) + bytes(12)  # Metadata v1: 2**31-1 brokers
    with pytest.raises(Exception, match="declares"):
        parse_response(3, 1, frame)


# -- compressed payloads ---------------------------------------------------------------------


def _lz4_with_content_size(size: int) -> bytes:
    """An LZ4 frame whose header claims ``size`` bytes of content (checksum fixed up)."""
    packed = lz4.frame.compress(b"hello world " * 100, store_size=True)
    flg, bd = packed[4], packed[5]
    descriptor = bytes([flg, bd]) + struct.pack("<Q", size)
    checksum = (_xxh32(descriptor) >> 8) & 0xFF
    return packed[:4] + descriptor + bytes([checksum]) + packed[15:]


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of a short input (< 16 bytes), for the LZ4 frame header checksum."""
    p1, p2, p3, p4, p5, m = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & m

    h = (seed + p5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + struct.unpack_from("<I", data, i)[0] * p3) & m, 17) * p4 & m
        i += 4
    while i < len(data):
        h = rotl((h + data[i] * p5) & m, 11) * p1 & m
        i += 1
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    return h ^ (h >> 16)


def _zstd_with_window_log(window_log: int) -> bytes:
    """A streamed zstd frame (no content size) whose header asks for a 2**window_log window."""
    params = zstandard.ZstdCompressionParameters(window_log=window_log, enable_ldm=True)
    cobj = zstandard.ZstdCompressor(compression_params=params).compressobj()
    return cobj.compress(b"x" * 100) + cobj.flush()


COMPRESSED_BOMBS = {
    # the broker-killer of issue 14: a raw snappy block whose preamble claims 4 GiB
    "snappy raw, 4 GiB preamble": (c.SNAPPY, _snappy_claiming(b"\xff\xff\xff\xff\x0f")),
    "snappy xerial, 4 GiB preamble": (
        c.SNAPPY,
        c.XERIAL_HEADER
        + struct.pack(">i", len(_snappy_claiming(b"\xff\xff\xff\xff\x0f")))
        + _snappy_claiming(b"\xff\xff\xff\xff\x0f"),
    ),
    "snappy raw, preamble past snappy's densest ratio": (
        c.SNAPPY,
        _snappy_claiming(b"\x80\x80\x20"),  # 512 KiB from ~20 bytes
    ),
    "lz4 frame claiming 200 GiB of content": (c.LZ4, _lz4_with_content_size(200 << 30)),
    "gzip of 32 MiB of zeros": (c.GZIP, c.compress(c.GZIP, _zeros(32 << 20))),
    "zstd of 32 MiB of zeros": (c.ZSTD, c.compress(c.ZSTD, _zeros(32 << 20))),
    "lz4 of 32 MiB of zeros": (c.LZ4, c.compress(c.LZ4, _zeros(32 << 20))),
    "snappy xerial of 32 MiB of zeros": (c.SNAPPY, c.compress(c.SNAPPY, _zeros(32 << 20))),
    "zstd frame with a 2 GiB window": (c.ZSTD, _zstd_with_window_log(31)),
}


@pytest.mark.parametrize("name", sorted(COMPRESSED_BOMBS))
def test_decompression_bomb_is_corrupt_message(name):
    codec, payload = COMPRESSED_BOMBS[name]
    with pytest.raises(KafkaError) as err:
        c.decompress(codec, payload, LIMIT)
    assert err.value.code == ErrorCode.corrupt_message


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_exactly_at_the_limit_decompresses(codec):
    data = bytes(range(256)) * (LIMIT // 256)
    assert c.decompress(codec, c.compress(codec, data), LIMIT) == data
    with pytest.raises(KafkaError):
        c.decompress(codec, c.compress(codec, data + b"!"), LIMIT)


@pytest.mark.parametrize("codec", [c.GZIP, c.LZ4, c.ZSTD])
def test_truncated_stream_is_corrupt_message(codec):
    packed = c.compress(codec, b"abc" * 50_000)
    with pytest.raises(KafkaError) as err:
        c.decompress(codec, packed[:-3])
    assert err.value.code == ErrorCode.corrupt_message


def test_limit_follows_the_batch_size():
    assert c.decompressed_limit(100) == 64 * (1024 * 1024 + 12)
    assert c.decompressed_limit(10 << 20) == 640 << 20
    assert c.decompressed_limit(1 << 30) == 2**31 - 1


def test_record_count_past_the_data_is_invalid_record():
    batch = bytearray(build_batch([(b"k", b"v", [], 1000)]))
    struct.pack_into(">i", batch, 57, 2**31 - 1)  # recordsCount
    with pytest.raises(KafkaError) as err:
        decode_records(batch)
    assert err.value.code == ErrorCode.invalid_record


@pytest.mark.parametrize("compression", [c.NONE, c.GZIP])
def test_produced_record_count_past_the_batch_is_invalid_record(compression):
    """A valid CRC over a batch of one record that claims 2**31-1 (offset delta to
    match) was appended as is: the log end offset leapt by two billion."""
    import crc32c

    from broker.protocol.records import validate_produce

    batch = bytearray(build_batch([(b"k", b"v", [], 1000)], compression=compression))
    struct.pack_into(">i", batch, 23, 2**31 - 2)  # lastOffsetDelta
    struct.pack_into(">i", batch, 57, 2**31 - 1)  # recordsCount
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with pytest.raises(KafkaError) as err:
        validate_produce(batch, max_message_bytes=1 << 20)
    assert err.value.code == ErrorCode.invalid_record


def test_bomb_inside_a_batch_is_corrupt_message():
    """decode_records holds a batch to 64 times (at least) Kafka's default
    max.message.bytes: a 200 KiB zstd batch of 80 MiB of zeros is refused."""
    batch = build_batch([(None, _zeros(80 << 20), [], 1000)], compression=c.ZSTD)
    assert len(batch) < 1 << 20
    with pytest.raises(KafkaError) as err:
        decode_records(batch)
    assert err.value.code == ErrorCode.corrupt_message


def _crash_files():
    return sorted(p for p in CRASHES.glob("*/*") if p.is_file()) if CRASHES.is_dir() else []


@pytest.mark.parametrize("path", _crash_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fuzzer_crash_input_is_handled(path):
    """Every input a fuzzer found a crash with, replayed through its harness."""
    from tests.fuzz import harnesses

    harnesses.HARNESSES[path.parent.name](path.read_bytes())
