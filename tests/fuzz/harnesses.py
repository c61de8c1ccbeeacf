"""Fuzz harnesses: one function per parser the broker runs on bytes it did not write.

Each harness takes the fuzzer's bytes and returns normally when the code under test
either accepted them or refused them the documented way (``KafkaError`` with Kafka's
code, ``ProtocolError`` for a request or response frame, ``CheckpointError`` and the
other named errors of the log's readers). Anything else escaping (an IndexError, a
struct.error, an assertion, an abort in a native library, a runaway allocation) is a
crash: atheris stops and writes the input, which then goes to
``tests/fuzz/crashes/<harness>/`` and is replayed by tests/test_fuzz_regressions.py.

Kept free of atheris so the regression test can replay inputs without it; the
runner (``tests/fuzz/run.py``) instruments the broker's modules and drives these.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import zlib
from pathlib import Path

from broker.log.checkpoint import CheckpointError, OffsetCheckpointFile
from broker.log.config import LogConfig
from broker.log.index import CorruptIndexError
from broker.log.log import Log
from broker.protocol import compression, list_offsets_v0
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.fetch_response import PartitionData, encode_fetch_response
from broker.protocol.legacy_records import down_convert, read_message_set, up_convert
from broker.protocol.list_offsets_response import OffsetAnswer, encode_list_offsets_response
from broker.protocol.messages import ProtocolError, parse_request, parse_response
from broker.protocol.records import (
    ATTRIBUTES_POS,
    CRC_POS,
    decode_records,
    scan_valid_prefix,
    validate_produce,
)
from broker.security.authenticator import SaslServerAuthenticator
from broker.security.credential_cache import CredentialCache
from broker.security.jaas import parse_jaas_config
from broker.security.reauth import SaslStats
from broker.security.sasl_errors import SaslAuthenticationError
from broker.security.sasl_plain import PlainServer
from broker.security.sasl_scram import ScramServer
from broker.security.scram_credentials import ScramCredential
from broker.server.apis import SUPPORTED

DECOMPRESS_LIMIT = 4 << 20  # small, so that bombs are found quickly

# versions added after the corpus was seeded: listed last, so that each committed seed's
# first byte keeps picking the API and version it was recorded for
_ADDED_LATER = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3), (8, 0), (8, 1), (9, 0)]
_ADDED_LATER += [(19, 0), (19, 1), (20, 0), (23, 0), (23, 1), (35, 0), (27, 0), (29, 0), (30, 0)]
_ADDED_LATER += [(31, 0), (32, 0)]
# (api key, version) pairs the broker dispatches: the fuzzer's first byte picks one
API_VERSIONS = [
    (k, v)
    for k, (_n, lo, hi) in sorted(SUPPORTED.items())
    for v in range(lo, hi + 1)
    if (k, v) not in _ADDED_LATER
] + _ADDED_LATER
# responses the broker may parse: ListOffsets v0, Produce v0-v2 and Fetch v0-v3 it only
# answers (by hand)
RESPONSE_API_VERSIONS = [kv for kv in API_VERSIONS if kv != (2, 0) and kv not in _ADDED_LATER]


def _pick(data: bytes, choices: list):
    return choices[data[0] % len(choices)] if data else choices[0]


# -- record batches ------------------------------------------------------------------------


def _fix_crc(data: bytes) -> bytes:
    """The batch with a correct CRC, so the fuzzer gets past the checksum."""
    import crc32c

    buf = bytearray(data)
    if len(buf) >= 61:
        (length,) = struct.unpack_from(">i", buf, 8)
        end = min(len(buf), max(length + 12, ATTRIBUTES_POS))
        struct.pack_into(">I", buf, CRC_POS, crc32c.crc32c(bytes(buf[ATTRIBUTES_POS:end])))
    return bytes(buf)


def records(data: bytes) -> None:
    """validate_produce, scan_valid_prefix and decode_records on one batch (the first
    byte: whether to fix up the CRC first, as a hostile client would)."""
    if not data:
        return
    batch = _fix_crc(data[1:]) if data[0] & 1 else data[1:]
    scan_valid_prefix(batch)
    try:
        validate_produce(batch, max_message_bytes=1 << 20, allow_multiple_batches=True)
    except KafkaError:
        pass
    try:
        decode_records(batch)
    except KafkaError:
        pass


def _fix_legacy_crcs(data: bytes) -> bytes:
    """The message set with each outer message's CRC-32 made right, where the framing
    allows, so the fuzzer gets past the checksums into the wrappers."""
    buf = bytearray(data)
    pos = 0
    while len(buf) - pos >= 17:
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + 12 + size
        if size < 5 or end > len(buf):
            break
        struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16 : end])))
        pos = end
    return bytes(buf)


def legacy_records(data: bytes) -> None:
    """Message sets of magic 0/1 (Produce v0-v2) converted up to a v2 batch, and that
    batch converted down again for Fetch v0-v3 (the first byte: CRC fix-up, and which
    magic to convert down to)."""
    if not data:
        return
    message_set = _fix_legacy_crcs(data[1:]) if data[0] & 1 else data[1:]
    try:
        batch = up_convert(message_set, max_message_bytes=1 << 20)
    except KafkaError:
        return
    validate_produce(batch, max_message_bytes=1 << 30)  # what up_convert builds is valid
    down = down_convert(batch, (data[0] >> 1) & 1, 0)
    assert len(list(read_message_set(down))) <= len(decode_records(batch))


def _decompress(codec: int):
    def harness(data: bytes) -> None:
        try:
            compression.decompress(codec, data, DECOMPRESS_LIMIT)
        except KafkaError:
            pass

    harness.__name__ = compression.CODEC_NAMES[codec]
    return harness


# -- request and response frames ---------------------------------------------------------------


def request(data: bytes) -> None:
    """A request frame of an API and version the broker dispatches (the first byte
    picks it); the rest is correlation id, client id and body, as the fuzzer likes."""
    api_key, version = _pick(data, API_VERSIONS)
    frame = struct.pack(">hh", api_key, version) + data[1:]
    if (api_key, version) == (2, 0):  # by hand; the dispatcher closes on both errors
        try:
            list_offsets_v0.parse_request(frame)
        except (ValueError, struct.error):
            pass
        return
    try:
        parse_request(frame)
    except ProtocolError:
        pass


def response(data: bytes) -> None:
    """A response frame as a peer broker could send it (fetcher, controller channel)."""
    api_key, version = _pick(data, RESPONSE_API_VERSIONS)
    try:
        parse_response(api_key, version, data[1:])
    except ProtocolError:
        pass


# -- the hand-written encoders: what goes in comes back out of kio's parser -----------------------


_ERROR_CODES = [int(code) for code in ErrorCode]  # handlers pass only Kafka's codes


class _Reader:
    """Values of the encoders' input domain, drawn from the fuzzer's bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out.ljust(n, b"\0")

    def int(self, fmt: str) -> int:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def small(self, limit: int) -> int:
        return self.take(1)[0] % (limit + 1)

    def name(self) -> str:
        return self.take(self.small(40)).decode("utf-8", "replace")


def fetch_encoder(data: bytes) -> None:
    """encode_fetch_response over any values a handler may pass, read back by kio."""
    r = _Reader(data)
    version = 4 + r.small(8)
    topics = []
    for _ in range(r.small(3)):
        partitions = []
        for _ in range(r.small(3)):
            aborted = (
                None if r.small(1) else [(r.int(">q"), r.int(">q")) for _ in range(r.small(2))]
            )
            recs = None if r.small(3) == 0 else r.take(r.small(64))
            partitions.append(
                PartitionData(
                    r.int(">i"),
                    _ERROR_CODES[r.small(255) % len(_ERROR_CODES)],
                    r.int(">q"),
                    r.int(">q"),
                    r.int(">q"),
                    recs,
                    len(recs or b""),
                    aborted,
                    r.int(">i"),
                )
            )
        topics.append((r.name(), partitions))
    parts = encode_fetch_response(version, 7, topics, throttle_ms=r.int(">i"))
    frame = b"".join(p if isinstance(p, bytes | bytearray) else bytes(p) for p in parts)[4:]
    _, body = parse_response(1, version, frame)
    assert len(body.responses) == len(topics)
    for got, (name, partitions) in zip(body.responses, topics, strict=True):
        assert got.topic == name
        for gp, p in zip(got.partitions, partitions, strict=True):
            assert (gp.partition_index, gp.high_watermark, gp.last_stable_offset) == (
                p.partition,
                p.high_watermark,
                p.last_stable_offset,
            )
            assert (gp.records or None) == (p.records or None)


def list_offsets_encoder(data: bytes) -> None:
    """encode_list_offsets_response against kio's parser, for every version it encodes."""
    r = _Reader(data)
    version = 1 + r.small(6)
    topics = [
        (
            r.name(),
            [
                OffsetAnswer(
                    r.int(">i"),
                    _ERROR_CODES[r.small(255) % len(_ERROR_CODES)],
                    r.int(">q"),
                    r.int(">q"),
                    r.int(">i"),
                )
                for _ in range(r.small(3))
            ],
        )
        for _ in range(r.small(3))
    ]
    frame = encode_list_offsets_response(version, 7, topics)[4:]
    _, body = parse_response(2, version, frame)
    for got, (name, answers) in zip(body.topics, topics, strict=True):
        assert got.name == name
        for ga, a in zip(got.partitions, answers, strict=True):
            assert (ga.partition_index, ga.offset) == (a.partition, a.offset)


# -- the log's readers: a recovering broker reads whatever is on the disk ------------------------

LOG_FILES = (
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
    "00000000000000000000.snapshot",
    "leader-epoch-checkpoint",
    "00000000000000000000.txnindex",
)
# scratch files of the log and checkpoint harnesses (runner.py points it into its workdir)
_WORKDIR = Path(os.environ.get("QUILL_FUZZ_SCRATCH") or tempfile.gettempdir()) / "quill-fuzz"


def pack_files(contents: list[bytes]) -> bytes:
    """The harness's input format: each file as a 4-byte length and its bytes."""
    return b"".join(struct.pack(">I", len(c)) + c for c in contents)


def _unpack_files(data: bytes) -> list[bytes]:
    out, pos = [], 0
    for _ in LOG_FILES:
        (n,) = struct.unpack(">I", data[pos : pos + 4].ljust(4, b"\0"))
        out.append(data[pos + 4 : pos + 4 + min(n, 1 << 20)])
        pos += 4 + len(out[-1])
    return out


LOG_ERRORS = (KafkaError, CheckpointError, CorruptIndexError)


def log(data: bytes) -> None:
    """Open a Log over a partition directory of garbage files (unclean shutdown:
    recovery from offset 0), then read it through, as a restarting broker would."""
    directory = _WORKDIR / "topic-0"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for name, content in zip(LOG_FILES, _unpack_files(data), strict=True):
        if content:
            (directory / name).write_bytes(content)
    try:
        opened = Log(directory, LogConfig())
    except LOG_ERRORS:
        return
    try:
        offset = opened.log_start_offset
        while offset < opened.log_end_offset:
            chunk = opened.read(offset, 1 << 16)
            if chunk is None:
                break
            _, headers = scan_valid_prefix(chunk.read_bytes())
            if not headers:
                break
            offset = headers[-1].next_offset
    finally:
        opened.close()


def checkpoint(data: bytes) -> None:
    """The per-log-dir offset checkpoints (recovery point, log start, high watermark)."""
    path = _WORKDIR / "replication-offset-checkpoint"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    try:
        OffsetCheckpointFile(path).read()
    except CheckpointError:
        pass


# -- SASL tokens -------------------------------------------------------------------------

SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "JAAS", "FRAMES"]
SASL_USER, SASL_PASSWORD = "user", "pencil"
_SCRAM_CACHE: list[CredentialCache] = []


def _scram_credentials() -> CredentialCache:
    if not _SCRAM_CACHE:  # PBKDF2 once, with a fixed salt: runs stay reproducible
        cache = CredentialCache()
        config = {
            m: ScramCredential.from_password(m, SASL_PASSWORD, salt=b"fuzz-salt").to_config_value()
            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        }
        cache.update(SASL_USER, config)
        _SCRAM_CACHE.append(cache)
    return _SCRAM_CACHE[0]


class _Listener:
    """The SASL side of a listener with every mechanism, as ListenerSasl offers it."""

    enabled = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    stats = SaslStats()

    def server(self, mechanism: str):
        if mechanism == "PLAIN":
            return PlainServer({SASL_USER: SASL_PASSWORD})
        return ScramServer(mechanism, _scram_credentials())

    def max_reauth_ms(self, mechanism: str) -> int:
        """connections.max.reauth.ms (KIP-368): SCRAM sessions get a lifetime, PLAIN
        none, so both ways of completing are run."""
        return 0 if mechanism == "PLAIN" else 3_600_000


class _Conn:
    principal = None


async def _no_api_versions(_conn, _frame) -> bytes:
    return b""


def _sasl_frames(frames: list[bytes]) -> None:
    """SaslServerAuthenticator over request frames until it completes, fails or refuses
    one (ProtocolError: the connection would be closed)."""
    auth = SaslServerAuthenticator(_Listener(), _no_api_versions, "fuzz:1", "SASL_PLAINTEXT")
    for frame in frames:
        coro = auth.handle(_Conn(), frame)
        try:
            coro.send(None)  # nothing in it waits: it runs to the end at once
        except StopIteration:
            pass
        except ProtocolError:
            return
        if auth.complete or auth.failed:
            return


def sasl(data: bytes) -> None:
    """The SASL servers on a client's tokens: the first byte picks PLAIN, SCRAM-SHA-256,
    SCRAM-SHA-512 (the rest is client-first, then client-final after a 0xFF byte, which
    UTF-8 never holds), a JAAS config value, or frames for the authenticator's state
    machine (split at 0xFF 0xFF). Refusals are SaslAuthenticationError (ValueError for
    JAAS, ProtocolError for frames)."""
    mechanism = _pick(data, SASL_MECHANISMS)
    body = data[1:]
    if mechanism == "FRAMES":
        _sasl_frames(body.split(b"\xff\xff")[:8])
        return
    if mechanism == "JAAS":
        try:
            parse_jaas_config(body.decode("utf-8", "replace"))
        except ValueError:
            pass
        return
    if mechanism == "PLAIN":
        server = PlainServer({SASL_USER: SASL_PASSWORD})
    else:
        server = ScramServer(mechanism, _scram_credentials())
    try:
        for token in body.split(b"\xff", 2)[:2]:
            server.evaluate(token)
    except SaslAuthenticationError:
        pass


HARNESSES = {
    "records": records,
    "legacy_records": legacy_records,
    "gzip": _decompress(compression.GZIP),
    "snappy": _decompress(compression.SNAPPY),
    "lz4": _decompress(compression.LZ4),
    "zstd": _decompress(compression.ZSTD),
    "request": request,
    "response": response,
    "fetch_encoder": fetch_encoder,
    "list_offsets_encoder": list_offsets_encoder,
    "log": log,
    "checkpoint": checkpoint,
    "sasl": sasl,
}
