"""Old clients against a real broker: Produce v0-v2 (message sets v0/v1, converted up to
record batch v2 on append) and Fetch v0-v3 (converted down), as Kafka 3.x serves them.

kafka-python pinned to api_version (0, 10, 0) speaks Produce v2 / Fetch v2 with magic 1,
pinned to (0, 9) Produce v1 / Fetch v1 with magic 0; librdkafka with
api.version.request=false and broker.version.fallback=0.10.0.0 speaks Produce v2 and
Fetch v2. What they write is read back both by themselves and by a modern client.
"""

from __future__ import annotations

import struct
import time
import uuid
import zlib

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.structs import OffsetAndMetadata

from broker.protocol.errors import ErrorCode
from broker.protocol.legacy_records import _message
from tests.wire import WireClient

CODECS = [None, "gzip", "snappy", "lz4"]
N = 30


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1)


def _topic(prefix: str, bootstrap: str, config: dict | None = None) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(timeout=30)
    return name


def _kp_produce(bootstrap: str, topic: str, api_version, codec) -> list[tuple]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        compression_type=codec,
        linger_ms=20,
        acks=1,
    )
    sent = []
    futures = []
    base_ts = int(time.time() * 1000) - 5000
    for i in range(N):
        key = None if i % 4 == 0 else f"key-{i}".encode()
        value = f"value-{i}-".encode() * (i % 5 + 1)
        ts = base_ts + i if api_version >= (0, 10) else None
        futures.append(producer.send(topic, key=key, value=value, partition=0, timestamp_ms=ts))
        sent.append((key, value, ts))
    producer.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close(10)
    return [(off, *rec) for off, rec in zip(offsets, sent, strict=True)]


def _kp_consume(bootstrap: str, topic: str, api_version, count: int) -> list[tuple]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=2000,
    )
    tp = KTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            got += [(r.offset, r.key, r.value, r.timestamp) for r in records]
    consumer.close()
    return got


def _ck_consume(bootstrap: str, topic: str, count: int, **extra) -> list[tuple]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            **extra,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.consume(100, timeout=1.0):
            assert not msg.error(), msg.error()
            got.append((msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))
    consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_0_10_round_trip(broker, codec):
    """Produce v2 / magic 1 in, Fetch v2 / magic 1 out: keys, values, offsets and
    CreateTime timestamps come back as sent, to the old client and to a modern one."""
    topic = _topic(f"kp010-{codec}", broker.bootstrap)
    sent = _kp_produce(broker.bootstrap, topic, (0, 10, 0), codec)
    assert [s[0] for s in sent] == list(range(N))
    assert _kp_consume(broker.bootstrap, topic, (0, 10, 0), N) == sent
    assert _ck_consume(broker.bootstrap, topic, N) == sent


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_0_9_round_trip(broker, codec):
    """Produce v1 / magic 0 (lz4 with Kafka 0.8's broken frame checksum) in, Fetch v1 /
    magic 0 out; magic 0 has no timestamp: -1 to a modern client."""
    topic = _topic(f"kp09-{codec}", broker.bootstrap)
    sent = _kp_produce(broker.bootstrap, topic, (0, 9), codec)
    assert [s[0] for s in sent] == list(range(N))
    old = _kp_consume(broker.bootstrap, topic, (0, 9), N)
    assert [(o, k, v) for o, k, v, _ts in old] == [(o, k, v) for o, k, v, _ts in sent]
    assert {ts for *_rest, ts in old} <= {None, -1}
    modern = _ck_consume(broker.bootstrap, topic, N)
    assert modern == [(o, k, v, -1) for o, k, v, _ts in sent]


def test_modern_producer_to_old_consumers(broker):
    """v2 batches written by librdkafka (compressed, with headers) are converted down for
    Fetch v1 and v2: offsets and timestamps kept, headers dropped."""
    topic = _topic("modern-old", broker.bootstrap)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "gzip"})
    base_ts = int(time.time() * 1000) - 1000
    for i in range(N):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            key=b"k",
            partition=0,
            timestamp=base_ts + i,
            headers=[("h", b"x")],
        )
    producer.flush(30)
    want = [(i, b"k", f"v{i}".encode(), base_ts + i) for i in range(N)]
    assert _kp_consume(broker.bootstrap, topic, (0, 10, 0), N) == want
    old = _kp_consume(broker.bootstrap, topic, (0, 9), N)
    assert [(o, k, v) for o, k, v, _ts in old] == [(o, k, v) for o, k, v, _ts in want]


def test_confluent_kafka_without_api_versions(broker):
    """librdkafka with api.version.request=false and broker.version.fallback=0.10.0.0
    produces and consumes (it reconnected forever before)."""
    topic = _topic("ck-fallback", broker.bootstrap)
    old = {"api.version.request": False, "broker.version.fallback": "0.10.0.0"}
    producer = Producer({"bootstrap.servers": broker.bootstrap, **old})
    errors = []
    base_ts = int(time.time() * 1000) - 1000
    for i in range(N):
        producer.produce(
            topic,
            value=f"value-{i}".encode(),
            key=f"k{i}".encode(),
            partition=0,
            timestamp=base_ts + i,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
    assert producer.flush(30) == 0
    assert errors == []
    want = [(i, f"k{i}".encode(), f"value-{i}".encode(), base_ts + i) for i in range(N)]
    assert _ck_consume(broker.bootstrap, topic, N, **old) == want
    assert _ck_consume(broker.bootstrap, topic, N) == want


def _produce_v2_frame(topic: str, records: bytes) -> dict:
    return {
        "acks": 1,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def _produce_v2_answer(frame: bytes) -> tuple[int, int, int]:
    """(error code, base offset, log append time) of a one-partition Produce v2 response."""
    pos = 4 + 4  # correlation id, topic count
    (name_len,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + name_len + 4  # name, partition count
    _index, error, base, append_time = struct.unpack_from(">ihqq", frame, pos)
    return error, base, append_time


def test_corrupt_legacy_crc_is_corrupt_message(broker):
    """A message whose CRC-32 does not match gets CORRUPT_MESSAGE; nothing is appended,
    and the connection stays open for the next (good) request."""
    topic = _topic("crc", broker.bootstrap)
    good = _message(0, 1, 0, 1234, b"k", b"v")
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    wire = WireClient.for_bootstrap(broker.bootstrap)
    try:
        error, base, _ = _produce_v2_answer(
            wire.request_frame(0, 2, _produce_v2_frame(topic, bytes(bad)))
        )
        assert (error, base) == (ErrorCode.corrupt_message, -1)
        error, base, _ = _produce_v2_answer(
            wire.request_frame(0, 2, _produce_v2_frame(topic, good))
        )
        assert (error, base) == (0, 0)
    finally:
        wire.close()


def test_legacy_gzip_wrapper_from_the_wire(broker):
    """A magic 1 gzip wrapper of three inner messages with relative offsets becomes three
    records at offsets 0-2 with their own timestamps."""
    topic = _topic("wrapper", broker.bootstrap)
    inner = b"".join(_message(i, 1, 0, 1000 + i, None, f"m{i}".encode()) for i in range(3))
    deflater = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    wrapper = _message(2, 1, 1, 1002, None, deflater.compress(inner) + deflater.flush())
    wire = WireClient.for_bootstrap(broker.bootstrap)
    try:
        error, base, _ = _produce_v2_answer(
            wire.request_frame(0, 2, _produce_v2_frame(topic, wrapper))
        )
    finally:
        wire.close()
    assert (error, base) == (0, 0)
    assert _ck_consume(broker.bootstrap, topic, 3) == [
        (i, None, f"m{i}".encode(), 1000 + i) for i in range(3)
    ]


def _fetch_v1_error(bootstrap: str, topic: str) -> int:
    """The partition error of a Fetch v1 of partition 0 of ``topic``."""
    wire = WireClient.for_bootstrap(bootstrap)
    try:
        frame = wire.request_frame(
            1,
            1,
            {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 0,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
            },
        )
    finally:
        wire.close()
    pos = 4 + 4 + 4  # correlation id, throttle time, topic count
    (name_len,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + name_len + 4
    _index, error = struct.unpack_from(">ih", frame, pos)
    return error


def test_downconversion_disabled_is_unsupported_version(broker):
    """message.downconversion.enable=false: Fetch v0-v3 gets UNSUPPORTED_VERSION for the
    partition, as Kafka answers; the topic's own clients still read it."""
    topic = _topic("nodown", broker.bootstrap, {"message.downconversion.enable": "false"})
    sent = _kp_produce(broker.bootstrap, topic, (0, 10, 0), None)  # up-conversion still on
    assert _fetch_v1_error(broker.bootstrap, topic) == ErrorCode.unsupported_version
    assert _ck_consume(broker.bootstrap, topic, N) == sent
    open_topic = _topic("down", broker.bootstrap)
    assert _fetch_v1_error(broker.bootstrap, open_topic) == 0


def test_api_versions_advertise_old_produce_and_fetch(broker):
    wire = WireClient.for_bootstrap(broker.bootstrap)
    try:
        resp = wire.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    finally:
        wire.close()
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[0] == (0, 9)
    assert ranges[1] == (0, 12)
    assert (ranges[8][0], ranges[9][0]) == (0, 0)  # OffsetCommit v0-1, OffsetFetch v0


def _kp_commit(bootstrap: str, topic: str, group: str, api_version, offset: int):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        group_id=group,
        enable_auto_commit=False,
    )
    tp = KTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(offset, "meta", -1)})
    committed = consumer.committed(tp)
    consumer.close()
    return committed


def test_offset_commit_v0_goes_to_zookeeper(broker):
    """kafka-python pinned to 0.8.1 commits with OffsetCommit v0 and reads back with
    OffsetFetch v0: Kafka 3.x (ZooKeeper mode) keeps those offsets in
    /consumers/<group>/offsets/<topic>/<partition>, not in __consumer_offsets."""
    topic = _topic("commit-v0", broker.bootstrap)
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert _kp_commit(broker.bootstrap, topic, group, (0, 8, 1), 17) == 17
    data, _ = broker.zk_client().get(f"/consumers/{group}/offsets/{topic}/0")
    assert data == b"17"
    modern = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        [tp] = modern.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        modern.close()
    assert tp.offset < 0  # nothing in the group coordinator


def test_offset_commit_v1_goes_to_the_group_coordinator(broker):
    """kafka-python pinned to 0.8.2 commits with OffsetCommit v1 (commit timestamp per
    partition) and fetches with OffsetFetch v1; a modern consumer sees the offset."""
    topic = _topic("commit-v1", broker.bootstrap)
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert _kp_commit(broker.bootstrap, topic, group, (0, 8, 2), 23) == 23
    modern = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        [tp] = modern.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        modern.close()
    assert tp.offset == 23
    wire = WireClient.for_bootstrap(broker.bootstrap)
    try:
        resp = wire.request(
            9, 3, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
        )
    finally:
        wire.close()
    [part] = resp.topics[0].partitions
    assert (part.committed_offset, part.metadata) == (23, "meta")


def test_old_admin_versions(broker):
    """CreateTopics v0-v1, DeleteTopics v0, OffsetForLeaderEpoch v0-v1, DescribeLogDirs
    v0, DescribeConfigs v0 (is_default) and DescribeAcls v0 are answered in their own
    layouts (they closed the connection before)."""
    name = f"admin-v0-{uuid.uuid4().hex[:6]}"
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1}
    topic |= {"assignments": [], "configs": [{"name": "retention.ms", "value": "100000"}]}
    wire = WireClient.for_bootstrap(broker.bootstrap)
    try:
        dry = wire.request(19, 1, {"topics": [topic], "timeout": 30_000, "validate_only": True})
        assert [(t.name, t.error_code, t.error_message) for t in dry.topics] == [(name, 0, None)]
        created = wire.request(19, 0, {"topics": [topic], "timeout": 30_000})
        assert [(t.name, t.error_code) for t in created.topics] == [(name, 0)]
        again = wire.request(19, 0, {"topics": [topic], "timeout": 30_000})
        assert [t.error_code for t in again.topics] == [ErrorCode.topic_already_exists]
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(5):
            producer.produce(name, value=b"x%d" % i, partition=0)
        assert producer.flush(30) == 0
        query = {"topics": [{"topic": name, "partitions": [{"partition": 0, "leader_epoch": 0}]}]}
        [p0] = wire.request(23, 0, query).topics[0].partitions
        assert (p0.error_code, p0.end_offset) == (0, 5)
        [p1] = wire.request(23, 1, query).topics[0].partitions
        assert (p1.error_code, p1.leader_epoch, p1.end_offset) == (0, 0, 5)
        dirs = wire.request(35, 0, {"topics": None})
        assert any(t.name == name for result in dirs.results for t in result.topics), dirs
        acls = wire.request(
            29,
            0,
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            },
        )
        assert acls.error_code == ErrorCode.security_disabled
        described = wire.request(
            32,
            0,
            {
                "resources": [
                    {"resource_type": 2, "resource_name": name, "configuration_keys": None}
                ]
            },
        )
        configs = {c.name: (c.value, c.is_default) for c in described.results[0].configs}
        assert configs["retention.ms"] == ("100000", False)
        assert configs["segment.bytes"] == ("1073741824", True)
        deleted = wire.request(20, 0, {"topic_names": [name], "timeout": 30_000})
        assert [(r.name, r.error_code) for r in deleted.responses] == [(name, 0)]
    finally:
        wire.close()


def test_zstd_topic_refuses_fetches_below_v10(broker):
    """A topic with compression.type=zstd answers Fetch below v10 (which cannot carry
    zstd, KIP-110) with UNSUPPORTED_COMPRESSION_TYPE, as Kafka's KafkaApis does."""
    topic = _topic("zstd", broker.bootstrap, {"compression.type": "zstd"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"z", partition=0)
    assert producer.flush(30) == 0
    assert _fetch_v1_error(broker.bootstrap, topic) == ErrorCode.unsupported_compression_type
    wire = WireClient.for_bootstrap(broker.bootstrap)
    try:
        partition = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
        body = {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0}
        body["topics"] = [{"topic": topic, "partitions": [partition]}]
        v4 = wire.request(1, 4, body)
        v10 = wire.request(1, 10, body | {"session_id": 0, "session_epoch": -1})
    finally:
        wire.close()
    assert v4.responses[0].partitions[0].error_code == ErrorCode.unsupported_compression_type
    assert v10.responses[0].partitions[0].error_code == 0
    assert v10.responses[0].partitions[0].records
