"""Crash safety and retention against a real broker process.

kill -9 mid-stream, garbage on the active segment, a truncated index: on restart every
acknowledged (and flushed) record is readable, the tail is cut at the last valid
batch, and the broker does not crash.
"""

from __future__ import annotations

import glob
import os
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def _create(bootstrap, name, partitions=1, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(
        timeout=30
    )


def _read_values(bootstrap, topic, partition=0, timeout=30.0):
    # earliest: retention may move the log start between the watermark query and the fetch
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "x",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    consumer.assign([TopicPartition(topic, partition, low)])
    values = []
    deadline = time.time() + timeout
    while high > low and (not values or values[-1][0] < high - 1) and time.time() < deadline:
        for msg in consumer.consume(1000, timeout=1.0):
            assert not msg.error(), msg.error()
            values.append((msg.offset(), msg.value()))
    consumer.close()
    return low, high, values


def _segment_files(broker, topic, ext):
    return sorted(glob.glob(os.path.join(broker.log_dir, f"{topic}-0", f"*.{ext}")))


def test_kill_9_during_produce_keeps_every_acknowledged_record(cluster_factory):
    cluster = cluster_factory(1, **{"log.flush.interval.messages": "1"})
    broker = cluster.brokers[0]
    topic = f"crash-{uuid.uuid4().hex[:6]}"
    _create(cluster.bootstrap, topic)
    acked: list[bytes] = []
    stop = threading.Event()

    def produce():
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "linger.ms": 1,
                "acks": 1,
                "message.timeout.ms": 5000,
                "retries": 0,
            }
        )
        i = 0

        def on_delivery(err, msg):
            if err is None:
                acked.append(msg.value())

        while not stop.is_set():
            producer.produce(topic, value=b"rec-%08d" % i, partition=0, on_delivery=on_delivery)
            i += 1
            producer.poll(0)
            if i % 200 == 0:
                time.sleep(0.005)
        producer.flush(10)

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(2.0)
    broker.kill()
    time.sleep(0.5)
    stop.set()
    t.join(30)
    assert len(acked) > 100
    broker.start()
    low, high, values = _read_values(cluster.bootstrap, topic)
    stored = [v for _, v in values]
    assert [o for o, _ in values] == list(range(low, high))
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged records lost"


def test_garbage_tail_and_truncated_index_are_recovered(cluster_factory):
    cluster = cluster_factory(1, **{"log.index.interval.bytes": "100"})
    broker = cluster.brokers[0]
    topic = f"garbage-{uuid.uuid4().hex[:6]}"
    _create(cluster.bootstrap, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    for i in range(200):
        producer.produce(topic, value=b"good-%d" % i, partition=0)
        if i % 10 == 0:
            producer.flush(10)
    producer.flush(10)
    broker.kill()
    [log_file] = _segment_files(broker, topic, "log")
    [index_file] = _segment_files(broker, topic, "index")
    good_size = os.path.getsize(log_file)
    with open(log_file, "ab") as f:
        f.write(os.urandom(777))
    with open(index_file, "r+b") as f:
        f.truncate(max(0, os.path.getsize(index_file) // 2 - 3))
    broker.start()
    low, high, values = _read_values(cluster.bootstrap, topic)
    assert (low, high) == (0, 200)
    assert [v for _, v in values] == [b"good-%d" % i for i in range(200)]
    assert os.path.getsize(log_file) == good_size
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce(topic, value=b"after", partition=0)
    assert producer.flush(10) == 0
    assert _read_values(cluster.bootstrap, topic)[1] == 201


def test_retention_by_bytes_moves_log_start(cluster_factory):
    cluster = cluster_factory(1, **{"log.retention.check.interval.ms": "500"})
    topic = f"retain-{uuid.uuid4().hex[:6]}"
    _create(cluster.bootstrap, topic, config={"segment.bytes": "2000", "retention.bytes": "3000"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    for _i in range(200):
        producer.produce(topic, value=b"x" * 50, partition=0)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "x"})
    deadline = time.time() + 20
    low = 0
    while time.time() < deadline:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        if low > 0:
            break
        time.sleep(0.5)
    consumer.close()
    assert high == 200
    assert low > 0, "retention.bytes never deleted a segment"
    assert len(_segment_files(cluster.brokers[0], topic, "log")) >= 1
    _low2, high2, values = _read_values(cluster.bootstrap, topic)
    first = values[0][0]
    assert high2 == 200 and first >= low and [o for o, _ in values] == list(range(first, 200))
