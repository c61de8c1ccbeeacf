"""Seed corpora for the harnesses, from what real clients sent and the broker wrote.

``write_corpus`` takes the frames a RecordingProxy kept (tests/fuzz_helpers.py) and a
broker's log dir, and writes one directory per harness under ``out``, each input in
the form its harness reads (see tests/fuzz/harnesses.py). Regenerate the committed
corpus with::

    QUILL_FUZZ_WRITE_CORPUS=tests/fuzz/corpus .venv/bin/python -m pytest tests/test_fuzz_wire.py
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from broker.protocol.messages import parse_request
from broker.protocol.records import BATCH_HEADER_SIZE, read_batch_header
from tests.fuzz.harnesses import API_VERSIONS, LOG_FILES, RESPONSE_API_VERSIONS, pack_files

PER_API_VERSION = 3  # inputs kept per (api key, version): the smallest ones
CODEC_DIRS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _save(directory: Path, data: bytes) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)


def _frames_by_api(frames: list[tuple[int, int, bytes]]) -> dict[tuple[int, int], list[bytes]]:
    by_api: dict[tuple[int, int], list[bytes]] = {}
    for key, version, frame in frames:
        by_api.setdefault((key, version), []).append(frame)
    return {k: sorted(set(v), key=len)[:PER_API_VERSION] for k, v in by_api.items()}


def _batches(requests) -> list[bytes]:
    out = []
    for key, _version, frame in requests:
        if key != 0:
            continue
        _, body = parse_request(frame)
        for topic in body.topic_data:
            out += [p.records for p in topic.partition_data if p.records]
    return out


def _file_seed(path: Path) -> bytes:
    """A file's bytes, an active index's preallocated zeros cut off, at most 64 KiB."""
    if not path.exists():
        return b""
    data = path.read_bytes()
    if path.suffix in (".index", ".timeindex"):
        data = data.rstrip(b"\0")
        data = data.ljust(-(-len(data) // 12) * 12, b"\0")
    return data[: 64 * 1024]


def write_corpus(requests, responses, log_dir: Path, out: Path) -> None:
    out = Path(out)
    for (key, version), frames in _frames_by_api(requests).items():
        if (key, version) in API_VERSIONS:
            for frame in frames:
                _save(out / "request", bytes([API_VERSIONS.index((key, version))]) + frame[4:])
    for (key, version), frames in _frames_by_api(responses).items():
        if (key, version) in RESPONSE_API_VERSIONS:
            index = RESPONSE_API_VERSIONS.index((key, version))
            for frame in frames:
                _save(out / "response", bytes([index]) + frame)
    kept: dict[int, int] = {}
    for batch in sorted(_batches(requests), key=len):
        codec = read_batch_header(batch).compression
        if kept.get(codec, 0) >= 8:
            continue
        kept[codec] = kept.get(codec, 0) + 1
        _save(out / "records", b"\0" + batch)
        if codec in CODEC_DIRS:
            _save(out / CODEC_DIRS[codec], batch[BATCH_HEADER_SIZE:])
    for partition in sorted(Path(log_dir).glob("*-0")):
        files = [partition / name for name in LOG_FILES]
        snapshots = sorted(partition.glob("*.snapshot"))
        files[3] = snapshots[-1] if snapshots else files[3]
        _save(out / "log", pack_files([_file_seed(f) for f in files]))
    for checkpoint in Path(log_dir).glob("*-checkpoint"):
        _save(out / "checkpoint", checkpoint.read_bytes())
    write_legacy_seeds(out)
    rng = random.Random(14)
    for name in ("fetch_encoder", "list_offsets_encoder"):
        for size in (16, 64, 256):
            _save(out / name, rng.randbytes(size))


def write_legacy_seeds(out: Path) -> None:
    """Message sets of magic 0 and 1, plain and in gzip, snappy and lz4 wrappers, as
    kafka-python's own legacy encoder writes them (magic 0 lz4 with the broken header
    checksum); the first byte asks for no CRC fix-up and picks the magic to go down to."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
            for i in range(3):
                key = None if i == 0 else f"k{i}".encode()
                builder.append(i, 1_700_000_000_000 + i, key, f"value-{i}".encode())
            _save(out / "legacy_records", bytes([magic << 1]) + bytes(builder.build()))
