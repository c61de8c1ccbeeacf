"""Recording real clients' frames for the fuzzers: a proxy that keeps every request and
response passing through it, and short sessions of each client library.

Used by tests/test_fuzz_wire.py (mutates the recorded requests on live connections)
and tests/fuzz/make_corpus.py (seeds the atheris corpora with them).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time

from tests.proxy import DroppingProxy

_SIZE = struct.Struct(">i")


class RecordingProxy(DroppingProxy):
    """A DroppingProxy that keeps each request frame (api key, version, bytes without
    the size prefix) and each response frame with the api key and version it answers.

    Start it before the broker and advertise its port (``advertised.listeners``) so
    that every connection a client opens after bootstrap goes through it too.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[int, int, bytes]] = []
        self.responses: list[tuple[int, int, bytes]] = []
        self._pending: dict[tuple[int, int], tuple[int, int]] = {}
        self._buffers: dict[tuple[int, bool], bytearray] = {}
        self._record_lock = threading.Lock()
        super().__init__()

    def _connect(self, client: socket.socket) -> None:
        """A connection made before the target is known (the broker's own controller
        channel, at start-up) waits for it instead of being closed."""

        def wait_then_connect() -> None:
            deadline = time.monotonic() + 120
            while self.target is None and time.monotonic() < deadline:
                time.sleep(0.05)
            super(RecordingProxy, self)._connect(client)

        threading.Thread(target=wait_then_connect, daemon=True).start()

    def _on_data(self, client: socket.socket, to_upstream: bool, data: bytes) -> None:
        key = (id(client), to_upstream)
        buf = self._buffers.setdefault(key, bytearray())
        buf += data
        while len(buf) >= 4 and len(buf) - 4 >= _SIZE.unpack_from(buf, 0)[0]:
            size = _SIZE.unpack_from(buf, 0)[0]
            if size < 0:  # not Kafka framing: record nothing more of this stream
                buf.clear()
                return
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            self._record(id(client), to_upstream, frame)

    def _record(self, conn_id: int, is_request: bool, frame: bytes) -> None:
        if len(frame) < 8 if is_request else len(frame) < 4:
            return
        with self._record_lock:
            if is_request:
                key, version, corr = struct.unpack_from(">hhi", frame, 0)
                self.requests.append((key, version, frame))
                self._pending[(conn_id, corr)] = (key, version)
            else:
                (corr,) = _SIZE.unpack_from(frame, 0)
                answered = self._pending.pop((conn_id, corr), None)
                if answered is not None:
                    self.responses.append((*answered, frame))


def confluent_sessions(bootstrap: str, topic: str, group: str) -> int:
    """librdkafka: admin, a producer per codec, a transactional producer, a consumer
    group. Returns the number of records it wrote to ``topic``."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    extra = f"{topic}-admin"
    for fut in admin.create_topics([NewTopic(extra, 1, 1)]).values():
        fut.result(30)
    for fut in admin.create_partitions([NewPartitions(extra, 2)]).values():
        fut.result(30)
    for fut in admin.describe_configs([ConfigResource("topic", extra)]).values():
        fut.result(30)
    admin.list_consumer_groups().result(30)
    for fut in admin.delete_topics([extra]).values():
        fut.result(30)

    written = 0
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        for i in range(20):
            producer.produce(
                topic,
                key=b"k%d" % i,
                value=b"%s-%d " % (codec.encode(), i) * 8,
                headers=[("h", b"v")],
            )
        assert producer.flush(30) == 0
        written += 20
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(topic, key=b"t%d" % i, value=b"txn")
    txn.commit_transaction(30)
    written += 5

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < written and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    assert seen == written, f"the consumer group read {seen} of {written} records"
    return written


def kafka_python_session(bootstrap: str, topic: str, group: str) -> int:
    """kafka-python: a gzip producer (its own framing), a consumer group."""
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    for i in range(10):
        producer.send(topic, key=b"kp%d" % i, value=b"kafka-python")
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"{group}-kp",
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    for _ in consumer:
        pass
    consumer.commit()
    consumer.close()
    return 10


def aiokafka_session(bootstrap: str, topic: str, group: str) -> int:
    """aiokafka: a producer and a consumer group member."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="zstd")
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, key=b"ak%d" % i, value=b"aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=f"{group}-ak", auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=5000)
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(run())
    return 10


def record_all_clients(bootstrap: str, topic: str, group: str) -> int:
    """Run every client's session against ``bootstrap``; records written to ``topic``."""
    written = confluent_sessions(bootstrap, topic, group)
    written += kafka_python_session(bootstrap, topic, group)
    written += aiokafka_session(bootstrap, topic, group)
    return written
