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

import struct
import zlib

import cramjam
import lz4.frame
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
    "decompressed_limit",
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

INT32_MAX = 2**31 - 1
DECOMPRESSION_RATIO = 64  # a batch may inflate to 64 times its size, no more
MIN_LIMIT_BASE = 1024 * 1024 + 12  # Kafka's default max.message.bytes
CHUNK = 1 << 20  # output taken from a streaming decoder at a time
ZSTD_MAX_RATIO = 32 * 1024  # a 4-byte zstd RLE block may hold 128 KiB
ZSTD_MIN_STEP = 64
ZSTD_MAX_WINDOW = 1 << 27  # zstd-jni's default windowLogMax (27): level 22 fits
SNAPPY_MAX_RATIO = 22  # snappy's densest element: a 64-byte copy in 3 bytes


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


def decompressed_limit(batch_size: int) -> int:
    """The most bytes a batch of ``batch_size`` bytes may inflate to.

    ``DECOMPRESSION_RATIO`` times the batch, counting a small batch as one of Kafka's
    default ``max.message.bytes``, and never past Kafka's own ceiling for a buffer
    (``Integer.MAX_VALUE``). A produced batch is at most the topic's max.message.bytes,
    so its limit follows from that config; a batch read back from a log or a leader is
    held to the same rule by its own size.
    """
    return min(INT32_MAX, DECOMPRESSION_RATIO * max(batch_size, MIN_LIMIT_BASE))


def decompress(
    codec: int, data: bytes | bytearray | memoryview, max_size: int | None = None
) -> bytes:
    """Decompress ``data`` written by any Kafka client with codec ``codec``.

    Streaming and bounded: no codec allocates from a size written in the input, and
    output past ``max_size`` bytes (by default ``decompressed_limit`` of the input's
    size; a decompression bomb) raises CORRUPT_MESSAGE.
    """
    if max_size is None:
        max_size = decompressed_limit(len(data))
    if codec == NONE:
        return bytes(data)
    if codec not in CODEC_NAMES:
        raise _unknown_codec(codec)
    try:
        if codec == GZIP:
            return _gzip_decompress(data, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == LZ4:
            return _lz4_decompress(data, max_size)
        return _zstd_decompress(data, max_size)
    except KafkaError:
        raise
    except Exception as exc:  # each library has its own error types; all mean the same
        raise KafkaError(
            ErrorCode.corrupt_message,
            f"The {CODEC_NAMES[codec]} payload of a record batch cannot be decompressed: {exc}",
        ) from exc


def _too_large(codec: int, max_size: int) -> KafkaError:
    return KafkaError(
        ErrorCode.corrupt_message,
        f"The {CODEC_NAMES[codec]} payload of a record batch inflates past {max_size} bytes, "
        f"more than {DECOMPRESSION_RATIO} times what the batch may hold.",
    )


def _truncated(codec: int) -> KafkaError:
    return KafkaError(
        ErrorCode.corrupt_message,
        f"The {CODEC_NAMES[codec]} payload of a record batch is truncated.",
    )


class _Output:
    """Chunks of decompressed output, failing as soon as they pass ``max_size``."""

    def __init__(self, codec: int, max_size: int) -> None:
        self.codec, self.max_size, self.size, self.parts = codec, max_size, 0, []

    @property
    def room(self) -> int:
        """Bytes still allowed, plus one so that a bomb is seen to overflow."""
        return self.max_size - self.size + 1

    def add(self, chunk) -> None:
        self.size += len(chunk)
        if self.size > self.max_size:
            raise _too_large(self.codec, self.max_size)
        self.parts.append(chunk)

    def result(self) -> bytes:
        return b"".join(self.parts)


def _gzip_decompress(data, max_size: int) -> bytes:
    """One or more gzip members (Java's GZIPInputStream reads them all), CRC checked."""
    out = _Output(GZIP, max_size)
    rest = bytes(data)
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = rest
        while not inflater.eof:
            chunk = inflater.decompress(pending, min(out.room, CHUNK))
            if not chunk and len(inflater.unconsumed_tail) == len(pending):
                raise _truncated(GZIP)  # no input left and no output held back
            out.add(chunk)
            pending = inflater.unconsumed_tail
        rest = inflater.unused_data
    return out.result()


def _lz4_decompress(data, max_size: int) -> bytes:
    """One or more LZ4 frames; the frame's content size is never trusted for a buffer."""
    out = _Output(LZ4, max_size)
    rest = bytes(data)
    while rest:
        frame = lz4.frame.LZ4FrameDecompressor()
        out.add(frame.decompress(rest, max_length=min(out.room, CHUNK)))
        while not frame.eof:
            if frame.needs_input:
                raise _truncated(LZ4)
            out.add(frame.decompress(b"", max_length=min(out.room, CHUNK)))
        rest = frame.unused_data
    return out.result()


def _zstd_decompress(data, max_size: int) -> bytes:
    """One or more complete zstd frames (no content size needed, none trusted).

    python-zstandard's decompressobj has no output limit, so the input is fed in
    pieces small enough that one piece cannot inflate far past the room left: a zstd
    block of at least 4 bytes holds at most 128 KiB, so ``ZSTD_MAX_RATIO`` bounds it.
    """
    out = _Output(ZSTD, max_size)
    view = memoryview(bytes(data))
    dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    pos = 0
    while pos < len(view):
        dobj = dctx.decompressobj()
        while not dobj.eof:
            if pos >= len(view):
                raise _truncated(ZSTD)
            step = max(ZSTD_MIN_STEP, out.room // ZSTD_MAX_RATIO)
            piece = view[pos : pos + step]
            out.add(dobj.decompress(piece))
            pos += len(piece)
        pos -= len(dobj.unused_data)  # the next frame starts in the last piece
    return out.result()


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


def _snappy_decompress(data, max_size: int) -> bytes:
    """Read xerial-framed snappy (possibly several streams back to back) or raw snappy."""
    view = memoryview(data)
    if not view:
        return b""  # what snappy-java writes for empty input
    out = _Output(SNAPPY, max_size)
    if view[:8] != XERIAL_MAGIC:
        out.add(_snappy_block(view, out))
        return out.result()
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
        out.add(_snappy_block(view[pos : pos + length], out))
        pos += length
    return out.result()


def _snappy_block(block: memoryview, out: _Output) -> bytes:
    """One raw snappy block. Its preamble (a varint) is the uncompressed length, which
    the native decoder allocates at once: it is checked against the room left first,
    and against snappy's densest encoding (a 64-byte copy in 3 bytes)."""
    length, shift, pos = 0, 0, 0
    while True:
        if pos >= len(block) or shift > 28:
            raise _corrupt_snappy("a bad uncompressed-length preamble")
        byte = block[pos]
        length |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            break
        shift += 7
    if length >= out.room:
        raise _too_large(SNAPPY, out.max_size)
    if length > SNAPPY_MAX_RATIO * (len(block) - pos) + 64:
        raise _corrupt_snappy(f"a block of {len(block)} bytes declaring {length} uncompressed")
    return bytes(cramjam.snappy.decompress_raw(block))


def _corrupt_snappy(what: str) -> KafkaError:
    return KafkaError(
        ErrorCode.corrupt_message, f"The snappy payload of a record batch has {what}."
    )
