"""Codec tests for broker.protocol.compression, checked against other implementations.

References: the stdlib gzip module, kafka-python's own codec module (its xerial snappy
framing), python-lz4 (bindings to the C liblz4 frame library) and zstandard.
"""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest
import zstandard
from kafka import codec as kafka_codec

from broker.protocol.compression import (
    CODEC_BY_NAME,
    CODEC_NAMES,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_HEADER,
    ZSTD,
    compress,
    decompress,
)
from broker.protocol.errors import ErrorCode, KafkaError

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]

SAMPLES = {
    "empty": b"",
    "one byte": b"x",
    "text": b"the quick brown fox jumps over the lazy dog " * 50,
    "random": os.urandom(5000),
    # bigger than one xerial block (32 KiB) and one lz4 block (64 KiB)
    "large mixed": (os.urandom(1000) + b"\x00" * 3000) * 100,
}


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("name", list(SAMPLES))
def test_round_trip(codec, name):
    data = SAMPLES[name]
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_accepts_bytearray_and_memoryview(codec):
    data = SAMPLES["large mixed"]
    packed = compress(codec, bytearray(data))
    assert compress(codec, memoryview(data)) == packed
    assert decompress(codec, memoryview(bytearray(packed))) == data


def test_compression_actually_shrinks_compressible_data():
    data = SAMPLES["text"]
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        assert len(compress(codec, data)) < len(data) // 4, CODEC_NAMES[codec]


def test_codec_names_match_kafka():
    assert CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    assert CODEC_BY_NAME["uncompressed"] == NONE
    assert all(CODEC_BY_NAME[name] == codec for codec, name in CODEC_NAMES.items())


# ------------------------------------------------------------------ gzip


def test_gzip_is_a_gzip_stream_readable_by_the_stdlib():
    data = SAMPLES["large mixed"]
    packed = compress(GZIP, data)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == data


def test_gzip_reads_stdlib_output_and_concatenated_members():
    first, second = b"a" * 1000, b"b" * 2000
    assert decompress(GZIP, gzip.compress(first)) == first
    assert decompress(GZIP, gzip.compress(first) + gzip.compress(second)) == first + second
    assert decompress(GZIP, kafka_codec.gzip_encode(second)) == second


# ------------------------------------------------------------------ snappy


def test_snappy_writes_xerial_framing_with_32k_blocks():
    data = SAMPLES["large mixed"]
    packed = compress(SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) == XERIAL_HEADER
    # walk the blocks by hand: each decodes to at most 32 KiB
    pos, out = 16, b""
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        block = bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length]))
        assert len(block) <= 32 * 1024
        out += block
        pos += 4 + length
    assert pos == len(packed) and out == data


needs_kafka_python_snappy = pytest.mark.skipif(
    not kafka_codec.has_snappy(), reason="kafka-python's snappy codec needs python-snappy"
)


@needs_kafka_python_snappy
@pytest.mark.parametrize("name", list(SAMPLES))
def test_snappy_interoperates_with_kafka_python(name):
    data = SAMPLES[name]
    if data:  # kafka-python cannot decode empty input; snappy-java writes b"" for it
        assert kafka_codec.snappy_decode(compress(SNAPPY, data)) == data
    else:
        assert compress(SNAPPY, data) == b""
    xerial = kafka_codec.snappy_encode(data, xerial_compatible=True)
    raw = kafka_codec.snappy_encode(data, xerial_compatible=False)
    assert decompress(SNAPPY, xerial) == data
    assert decompress(SNAPPY, raw) == data


@needs_kafka_python_snappy
def test_snappy_reads_concatenated_xerial_streams():
    a, b = b"first " * 100, b"second " * 100
    both = kafka_codec.snappy_encode(a) + kafka_codec.snappy_encode(b)
    assert decompress(SNAPPY, both) == a + b


@pytest.mark.parametrize(
    "mangle",
    [
        lambda p: p[:-3],  # block cut short
        lambda p: p[:18],  # block length cut short
        lambda p: p[:16] + struct.pack(">i", -5) + p[20:],  # negative block length
        lambda p: p[:10],  # header cut short
    ],
)
def test_snappy_rejects_broken_xerial(mangle):
    packed = compress(SNAPPY, SAMPLES["text"])
    with pytest.raises(KafkaError) as err:
        decompress(SNAPPY, mangle(packed))
    assert err.value.code == ErrorCode.corrupt_message


# ------------------------------------------------------------------ lz4


def test_lz4_frame_uses_independent_blocks_as_java_requires():
    packed = compress(LZ4, SAMPLES["large mixed"])
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little endian
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1, "frame version 01"
    assert flg & 0x20, "block independence: Kafka's Lz4BlockInputStream rejects linked blocks"
    assert flg & 0x03 == 0, "reserved bits"
    assert (bd >> 4) & 7 == 4, "64 KiB max block size, as Kafka writes"


@pytest.mark.parametrize("name", list(SAMPLES))
def test_lz4_interoperates_with_liblz4(name):
    lz4_frame = pytest.importorskip("lz4.frame", reason="python-lz4 is the reference encoder")
    data = SAMPLES[name]
    assert lz4_frame.decompress(compress(LZ4, data)) == data
    for options in (
        {},
        {"block_linked": False},
        {"content_checksum": True, "store_size": False},
        {"block_checksum": True, "block_size": lz4_frame.BLOCKSIZE_MAX4MB},
    ):
        assert decompress(LZ4, lz4_frame.compress(data, **options)) == data, options
    assert decompress(LZ4, kafka_codec.lz4_encode(data)) == data


def test_lz4_rejects_truncated_frame():
    packed = compress(LZ4, SAMPLES["random"])
    with pytest.raises(KafkaError) as err:
        decompress(LZ4, packed[: len(packed) // 2])
    assert err.value.code == ErrorCode.corrupt_message


# ------------------------------------------------------------------ zstd


def test_zstd_reads_frames_without_content_size_and_several_frames():
    data = SAMPLES["large mixed"]
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    no_size = cctx.compress(data)
    assert zstandard.get_frame_parameters(no_size).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, no_size) == data
    cobj = zstandard.ZstdCompressor().compressobj()  # streaming API: size unknown
    streamed = cobj.compress(data) + cobj.flush()
    assert zstandard.get_frame_parameters(streamed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(ZSTD, streamed) == data
    two = cctx.compress(b"abc") + zstandard.ZstdCompressor().compress(b"def")
    assert decompress(ZSTD, two) == b"abcdef"
    assert zstandard.ZstdDecompressor().decompress(compress(ZSTD, data)) == data
    assert decompress(ZSTD, kafka_codec.zstd_encode(data)) == data
    assert kafka_codec.zstd_decode(compress(ZSTD, data)) == data


def test_zstd_rejects_truncated_frame():
    packed = compress(ZSTD, SAMPLES["random"])
    with pytest.raises(KafkaError) as err:
        decompress(ZSTD, packed[:-4])
    assert err.value.code == ErrorCode.corrupt_message


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_is_corrupt_message(codec):
    with pytest.raises(KafkaError) as err:
        decompress(codec, b"\x07this is not compressed data at all\xff\xfe")
    assert err.value.code == ErrorCode.corrupt_message
    assert CODEC_NAMES[codec] in err.value.message


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec):
    for fn in (compress, decompress):
        with pytest.raises(KafkaError) as err:
            fn(codec, b"data")
        assert err.value.code == ErrorCode.unsupported_compression_type
