"""Reading and writing records with librdkafka: a partition from an offset (never
joining a group, never committing), the timestamp of the record at an offset (for lag
in time), and producing one record."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from cluster_client import clusters
from cluster_client.admin import RDKAFKA_LOG
from cluster_client.errors import ClusterUnavailable, OpError

_lock = threading.Lock()
_clients: dict[tuple[str, str, str], Consumer | Producer] = {}  # (kind, cluster, bootstrap)
_ts_cache: OrderedDict = OrderedDict()  # (cluster, topic, partition, offset) -> timestamp ms
TS_CACHE_SIZE = 20_000


def _new_consumer() -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": clusters.current().bootstrap,
            "group.id": f"quill-console-reader-{uuid.uuid4().hex[:8]}",  # never joined
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "client.id": "quill-console",
            "fetch.wait.max.ms": 50,
            "socket.timeout.ms": 8000,
            "logger": RDKAFKA_LOG,
            **clusters.current().client_security,
        }
    )


def _client(kind: str, make):
    """One reader and one producer per cluster (keyed by its name and bootstrap)."""
    key = (kind, clusters.current().name, clusters.current().bootstrap)
    if key not in _clients:
        _clients[key] = make()
    return _clients[key]


def _reader() -> Consumer:
    return _client("reader", _new_consumer)


def fetch(
    assign: dict[tuple[str, int], int],
    want: int,
    timeout_s: float = 3.0,
    unfinished: set | None = None,
) -> list:
    """Up to `want` records per partition starting at the given offsets (librdkafka
    Message objects), stopping at each partition's end. ``unfinished``, when given,
    receives the partitions that reached neither `want` records nor their end before
    the timeout: what they returned may stop short of the end."""
    with _lock:
        consumer = _reader()
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in assign.items()])
        got: dict[tuple[str, int], list] = {k: [] for k in assign}
        open_parts = set(assign)
        deadline = time.monotonic() + timeout_s
        try:
            while open_parts and time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=0.2):
                    key = (msg.topic(), msg.partition())
                    if key not in open_parts:
                        continue
                    if msg.error():
                        if msg.error().code() == KafkaError._PARTITION_EOF:
                            open_parts.discard(key)
                            continue
                        raise OpError(f"Reading {key[0]}-{key[1]}: {msg.error().str()}")
                    got[key].append(msg)
                    if len(got[key]) >= want:
                        open_parts.discard(key)
        finally:
            consumer.unassign()
    if unfinished is not None:
        unfinished.update(open_parts)
    return [m for msgs in got.values() for m in msgs]


def timestamps_at(offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The timestamp (ms) of the record at each offset, cached (records do not change)."""
    out, missing = {}, {}
    name = clusters.current().name
    for part, offset in offsets.items():
        hit = _ts_cache.get((name, *part, offset))
        if hit is not None:
            out[part] = hit
        else:
            missing[part] = offset
    if missing:
        for msg in fetch(missing, want=1, timeout_s=2.0):
            part = (msg.topic(), msg.partition())
            ts = msg.timestamp()[1]
            out[part] = ts
            _ts_cache[(name, *part, msg.offset())] = ts
        while len(_ts_cache) > TS_CACHE_SIZE:
            _ts_cache.popitem(last=False)
    return out


def _new_producer() -> Producer:
    return Producer(
        {
            "bootstrap.servers": clusters.current().bootstrap,
            "client.id": "quill-console",
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 10000,
            "logger": RDKAFKA_LOG,
            **clusters.current().client_security,
        }
    )


def produce(topic: str, partition: int | None, key, value, headers: list) -> dict:
    result: dict = {}

    def delivered(err, msg):
        result["error"] = err
        result["msg"] = msg

    with _lock:
        producer = _client("producer", _new_producer)
        kwargs = {"key": key, "value": value, "headers": headers or None, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        try:
            producer.produce(topic, **kwargs)
        except (KafkaException, BufferError) as exc:
            raise OpError(f"Producing to {topic!r} failed: {exc}") from exc
        remaining = producer.flush(12)
    if remaining or "msg" not in result:
        raise ClusterUnavailable(f"Producing to {topic!r}: no acknowledgement within 12 s.")
    if result["error"] is not None:
        raise OpError(f"Producing to {topic!r} failed: {result['error'].str()}")
    msg = result["msg"]
    return {
        "topic": topic,
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": msg.timestamp()[1],
    }
