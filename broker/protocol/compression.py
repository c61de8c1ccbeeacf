"""Compression codecs for record batch v2 payloads: pure functions over bytes.

Codec ids are the ones in the batch attributes (bits 0-2): 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. What we write is what the Java client writes, so every client can read
it; what we read is anything the clients in the wild write:

- gzip: a gzip stream (RFC 1952, level 6 like Java's default); several concatenated
  members are read too, as Java's GZIPInputStream does.
- snappy: written in xerial framing (``\\x82SNAPPY\\x00``, version 1, then 32 KiB blocks
  each prefixed by its big-endian length), as snappy-java and kafka-python write it;
  read either that framing (concatenated streams too) or one raw snappy block, the way
  snappy-java and librdkafka accept both.
- lz4: the standard LZ4 frame. Java's reader only handles independent blocks, so we
  write independent 64 KiB blocks; we read any frame (linked blocks, checksums,
  content size, several frames).
- zstd: a zstd frame (level 3, Kafka's default); we read frames without a content
  size and several frames back to back, as zstd-jni's streaming reader does.

Undecodable input raises ``KafkaError(CORRUPT_MESSAGE)``; an unknown codec id raises
``KafkaError(UNSUPPORTED_COMPRESSION_TYPE)``.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import zstandard

from broker.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "CODEC_BY_NAME",
    "compress",
    "decompress",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
"""Codec id -> the name Kafka uses for it (``CompressionType.name``)."""

CODEC_BY_NAME = {
    "none": NONE,
    "uncompressed": NONE,  # the spelling of the topic config ``compression.type``
    "gzip": GZIP,
    "snappy": SNAPPY,
    "lz4": LZ4,
    "zstd": ZSTD,
}
"""Name (as in ``compression.type``, minus ``producer``) -> codec id."""

GZIP_LEVEL = 6  # Java's Deflater.DEFAULT_COMPRESSION, Kafka's compression.gzip.level default
ZSTD_LEVEL = 3  # Kafka's compression.zstd.level default
LZ4_LEVEL = 9  # Kafka's compression.lz4.level default (LZ4HC level 9)
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with 1
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's SnappyOutputStream default block size

_INT32 = struct.Struct(">i")


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` with codec ``codec`` the way the Java client does.

    ``level`` is the topic's ``compression.<codec>.level`` (KIP-390): gzip 1..9 or -1,
    lz4 1..17 (1 is LZ4's fast mode, above it LZ4HC, which tops out at 12), zstd
    -131072..22; None is Kafka's default for the codec. Snappy has no levels.
    """
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        gzip_level = GZIP_LEVEL if level is None or level == -1 else level
        deflater = zlib.compressobj(gzip_level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return deflater.compress(data) + deflater.flush()
    if codec == SNAPPY:
        return _xerial_snappy_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(
            level=LZ4_LEVEL if level is None else min(level, 12),
            content_checksum=False,
            block_linked=False,
        )
        compressor.compress(bytes(data))  # this API takes only bytes
        return bytes(compressor.finish())
    if codec == ZSTD:
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL if level is None else level).compress(data)
    raise _unknown_codec(codec)


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress ``data`` written by any Kafka client with codec ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise _unknown_codec(codec)
    try:
        if codec == GZIP:
            return gzip.decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return _zstd_decompress(data)
    except KafkaError:
        raise
    except Exception as exc:  # each library has its own error types; all mean the same
        raise KafkaError(
            ErrorCode.corrupt_message,
            f"The {CODEC_NAMES[codec]} payload of a record batch cannot be decompressed: {exc}",
        ) from exc


def _unknown_codec(codec: int) -> KafkaError:
    return KafkaError(
        ErrorCode.unsupported_compression_type,
        f"Compression codec id {codec} is not one of 0 (none), 1 (gzip), 2 (snappy), "
        "3 (lz4), 4 (zstd).",
    )


def _xerial_snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    """snappy-java's SnappyOutputStream format: header, then length-prefixed blocks.

    Like snappy-java, empty input gives empty output (the header is written lazily).
    """
    view = memoryview(data)
    if not view:
        return b""
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    """Read xerial-framed snappy (possibly several streams back to back) or raw snappy."""
    view = memoryview(data)
    if not view:
        return b""  # what snappy-java writes for empty input
    if view[:8] != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = bytearray()
    pos, end = 0, len(view)
    while pos < end:
        if view[pos : pos + 8] == XERIAL_MAGIC:  # a (further) stream header
            if end - pos < len(XERIAL_HEADER):
                raise _corrupt_snappy("a truncated xerial header")
            pos += len(XERIAL_HEADER)
            continue
        if end - pos < 4:
            raise _corrupt_snappy("a truncated block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise _corrupt_snappy(f"a block of {length} bytes with {end - pos} left")
        out += cramjam.snappy.decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)


def _corrupt_snappy(what: str) -> KafkaError:
    return KafkaError(
        ErrorCode.corrupt_message, f"The snappy payload of a record batch has {what}."
    )


def _zstd_decompress(data: bytes | bytearray | memoryview) -> bytes:
    """Decode one or more complete zstd frames; a frame needs no content size."""
    dctx = zstandard.ZstdDecompressor()
    out = []
    remaining = bytes(data)
    while remaining:
        dobj = dctx.decompressobj()
        out.append(dobj.decompress(remaining))
        if not dobj.eof:
            raise KafkaError(
                ErrorCode.corrupt_message, "The zstd payload of a record batch is truncated."
            )
        remaining = dobj.unused_data
    return b"".join(out)
