"""Every config key the broker accepts does something: the compression levels change
the bytes the broker writes, zookeeper.connection.timeout.ms bounds the wait for
ZooKeeper, and keys we do not implement stop start-up (exit 2) with the key named."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.compression import GZIP, LZ4, ZSTD
from broker.protocol.records import build_batch, decode_records, read_batch_header
from quill_stack.ports import free_port
from tests.wire import WireClient

# compressible but not trivially so: the levels must disagree on it
VALUES = [
    (b"key-%d" % i, b"%d the quick brown fox %d jumps" % (i * 7919 % 1000, i)) for i in range(400)
]


def _start_broker(tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    args = [
        sys.executable,
        "-m",
        "broker",
        "--override",
        "broker.id=1",
        "--override",
        f"log.dirs={tmp_path / 'logs'}",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
    ]
    for item in overrides:
        args += ["--override", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "override,named",
    [
        ("num.io.threads=8", "num.io.threads"),
        ("num.network.threads=3", "num.network.threads"),
        ("background.threads=10", "background.threads"),
        ("log.preallocate=true", "preallocate"),
        ("compression.gzip.level=12", "compression.gzip.level"),
        ("compression.zstd.level=23", "compression.zstd.level"),
        ("compression.lz4.level=0", "compression.lz4.level"),
        ("max.connections.per.ip.overrides=127.0.0.1:many", "max.connections.per.ip.overrides"),
        ("zookeeper.connection.timeout.ms=0", "zookeeper.connection.timeout.ms"),
    ],
)
def test_refused_at_start_up_with_the_key_named(tmp_path, override, named):
    result = _start_broker(tmp_path, "zookeeper.connect=127.0.0.1:1", override)
    assert result.returncode == 2, result.stderr[-2000:]
    assert named in result.stderr


def test_zookeeper_connection_timeout_bounds_the_wait(tmp_path):
    dead = free_port()  # nothing listens there
    result = _start_broker(
        tmp_path, f"zookeeper.connect=127.0.0.1:{dead}", "zookeeper.connection.timeout.ms=1500"
    )
    assert result.returncode == 2
    assert "zookeeper.connection.timeout.ms=1500" in result.stderr


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1)


def _stored_batch(w: WireClient, topic: str) -> bytes:
    part = w.fetch(topic, 0, 0)
    assert part.error_code == ErrorCode.none
    records = bytes(part.records)
    header = read_batch_header(records, 0)
    assert header.size == len(records)  # exactly one batch
    return records


@pytest.mark.parametrize(
    "codec_name,codec,low,high",
    [("gzip", GZIP, 1, 9), ("lz4", LZ4, 1, 12), ("zstd", ZSTD, 1, 19)],
)
def test_compression_level_changes_the_bytes_written(broker, codec_name, codec, low, high):
    """The same uncompressed batch, produced to two topics that differ only in
    compression.<codec>.level, is stored under that codec with different bytes (the
    higher level no bigger) and the same records."""
    w = WireClient.for_bootstrap(broker.bootstrap)
    now = int(time.time() * 1000)
    batch = build_batch([(k, v, [], now) for k, v in VALUES])
    stored = {}
    for level in (low, high):
        topic = f"level-{codec_name}-{level}"
        configs = {"compression.type": codec_name, f"compression.{codec_name}.level": str(level)}
        assert w.create_topic(topic, 1, configs).error_code == ErrorCode.none
        assert w.produce(topic, 0, batch).error_code == ErrorCode.none
        stored[level] = _stored_batch(w, topic)
    for records in stored.values():
        assert read_batch_header(records, 0).compression == codec
        assert [(r.key, r.value) for r in decode_records(records)] == VALUES
    assert stored[low] != stored[high]
    assert len(stored[high]) <= len(stored[low])
    w.close()


def test_topic_refuses_what_the_broker_cannot_do(broker):
    w = WireClient.for_bootstrap(broker.bootstrap)
    for configs in ({"preallocate": "true"}, {"remote.storage.enable": "true"}):
        result = w.create_topic("refused", 1, configs)
        assert result.error_code == ErrorCode.invalid_config
        assert next(iter(configs)) in result.error_message
    w.close()
