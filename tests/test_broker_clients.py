"""Unmodified Kafka clients against a real broker process: byte-for-byte round trips."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1, **{"message.max.bytes": str(6 * 1024 * 1024)})


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, name: str, partitions: int = 3, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name]
    fut.result(timeout=30)


def _records(n: int, keyed: bool = True) -> list[tuple[bytes | None, bytes, list]]:
    out = []
    for i in range(n):
        key = f"key-{i % 7}".encode() if keyed and i % 3 else None
        value = os.urandom(20) + f"value-{i}".encode()
        headers = [("h1", f"x{i}".encode()), ("empty", b"")] if i % 2 else []
        out.append((key, value, headers))
    return out


def _consume_all(
    bootstrap: str, topic: str, partitions: int, expected: int, **extra
) -> dict[int, list]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {p: [] for p in range(partitions)}
    deadline = time.time() + 60
    count = 0
    while count < expected and time.time() < deadline:
        for msg in consumer.consume(1000, timeout=1.0):
            if msg.error():
                raise KafkaException(msg.error())
            got[msg.partition()].append((msg.offset(), msg.key(), msg.value(), msg.headers() or []))
            count += 1
    consumer.close()
    return got


def _by_partition(sent: list[tuple[int, bytes | None, bytes, list]]) -> dict[int, list]:
    out: dict[int, list] = {}
    for partition, key, value, headers in sent:
        out.setdefault(partition, []).append((key, value, headers))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_round_trip(broker, codec):
    topic = _topic(f"ck-{codec}")
    _create(broker.bootstrap, topic, 3)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5}
    )
    sent = []

    def on_delivery(err, msg):
        assert err is None, err
        sent.append((msg.partition(), msg.key(), msg.value(), msg.headers() or []))

    records = _records(600)
    headers_of = {value: headers for _key, value, headers in records}
    for key, value, headers in records:
        producer.produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert len(sent) == 600
    got = _consume_all(broker.bootstrap, topic, 3, 600)
    # delivery reports carry no headers: take them from what was produced
    expected = _by_partition([(p, k, v, headers_of[v]) for p, k, v, _h in sent])
    for partition, items in got.items():
        offsets = [o for o, *_ in items]
        assert offsets == list(range(len(items))), "offsets must be dense from 0"
        assert [(k, v, [(hk, hv) for hk, hv in h]) for _, k, v, h in items] == [
            (k, v, [(hk, hv) for hk, hv in h]) for k, v, h in expected.get(partition, [])
        ]


def test_kafka_python_round_trip(broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = _topic("kp")
    _create(broker.bootstrap, topic, 2)
    for codec in (None, "gzip", "zstd"):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec)
        futures = [
            producer.send(
                topic,
                value=f"{codec}-{i}".encode(),
                key=b"k%d" % (i % 2),
                partition=i % 2,
                headers=[("n", b"%d" % i)],
            )
            for i in range(200)
        ]
        producer.flush()
        assert all(f.get(timeout=10).offset >= 0 for f in futures)
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000
    )
    consumer.assign([KTP(topic, 0), KTP(topic, 1)])
    consumer.seek_to_beginning()
    got = {0: [], 1: []}
    for msg in consumer:
        got[msg.partition].append((msg.offset, msg.value, msg.headers))
        if sum(len(v) for v in got.values()) == 600:
            break
    consumer.close()
    for partition in (0, 1):
        values = [v for _, v, _ in got[partition]]
        expected = [
            f"{c}-{i}".encode()
            for c in (None, "gzip", "zstd")
            for i in range(200)
            if i % 2 == partition
        ]
        assert values == expected
        assert [o for o, _, _ in got[partition]] == list(range(300))
        assert got[partition][0][2] == [("n", str(partition).encode())]


def test_aiokafka_round_trip(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    topic = _topic("aio")
    _create(broker.bootstrap, topic, 1)

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
        await producer.start()
        try:
            for i in range(300):
                await producer.send(
                    topic, value=b"aio-%d" % i, key=b"k", headers=[("i", b"%d" % i)]
                )
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            consumer.assign([ATP(topic, 0)])
            await consumer.seek_to_beginning(ATP(topic, 0))
            got = []
            while len(got) < 300:
                batch = await consumer.getmany(timeout_ms=2000)
                for msgs in batch.values():
                    got.extend(msgs)
                if not batch:
                    break
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert [m.value for m in got] == [b"aio-%d" % i for i in range(300)]
    assert [m.offset for m in got] == list(range(300))
    assert [m.headers for m in got[:2]] == [(("i", b"0"),), (("i", b"1"),)]


def test_kcat_round_trip(broker):
    topic = _topic("kcat")
    _create(broker.bootstrap, topic, 1)
    lines = "".join(f"key{i}:value {i}\n" for i in range(100))
    subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", "lz4"],
        input=lines.encode(),
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        [
            "kcat",
            "-b",
            broker.bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-J",
        ],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    msgs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [(m["offset"], m["key"], m["payload"]) for m in msgs] == [
        (i, f"key{i}", f"value {i}") for i in range(100)
    ]


def test_five_megabyte_record(broker):
    topic = _topic("big")
    _create(broker.bootstrap, topic, 1, {"max.message.bytes": str(6 * 1024 * 1024)})
    value = os.urandom(5 * 1024 * 1024)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "message.max.bytes": 6 * 1024 * 1024}
    )
    producer.produce(topic, value=value, partition=0)
    assert producer.flush(60) == 0
    got = _consume_all(
        broker.bootstrap,
        topic,
        1,
        1,
        **{"fetch.max.bytes": 8 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024},
    )
    assert got[0][0][2] == value


def test_offsets_for_times(broker):
    topic = _topic("times")
    _create(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, partition=0, timestamp=base + i * 1000)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
    assert found[0].offset == 5
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 99_000)], timeout=10)
    assert found[0].offset == -1
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, high) == (0, 10)
    consumer.close()


def test_watermarks_after_delete_records(broker):
    from confluent_kafka.admin import AdminClient

    topic = _topic("delrec")
    _create(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        producer.produce(topic, value=b"%d" % i, partition=0)
    producer.flush(10)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    result = admin.delete_records([TopicPartition(topic, 0, 20)])
    deleted = list(result.values())[0].result(timeout=10)
    assert deleted.low_watermark == 20
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "t", "auto.offset.reset": "earliest"}
    )
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (20, 50)
    got = _consume_all(broker.bootstrap, topic, 1, 30)
    assert [o for o, *_ in got[0]] == list(range(20, 50))
    consumer.close()
