"""Helpers for tests/test_cluster_*.py: a producer that keeps sending from a thread while
a test kills brokers, moves replicas or restarts ZooKeeper, and remembers what the
cluster acknowledged, so the test can check afterwards that none of it was lost."""

from __future__ import annotations

import json
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

#: broker settings for cluster tests: a killed broker's session ends in 2 s
FAST = {
    "zookeeper.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "2000",
    "group.initial.rebalance.delay.ms": "0",
}


def partition_state(cluster, topic: str, partition: int) -> dict:
    """The partition's state znode (leader, ISR, epochs) as the controller wrote it."""
    zk = cluster.zk_client()
    data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return json.loads(data)


def read_all(bootstrap, topic, partitions, timeout=60.0):
    """partition -> (low, high, [(offset, value)]): every record between the watermarks
    (done once the next offset reaches the high watermark: a compacted log's offsets have
    gaps)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "r", "enable.auto.commit": False}
    )
    out = {}
    for p in range(partitions):
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        out[p] = (low, high, [])
    consumer.assign([TopicPartition(topic, p, out[p][0]) for p in range(partitions)])

    def behind(low, high, values) -> bool:
        return (values[-1][0] + 1 if values else low) < high

    deadline = time.time() + timeout
    while any(behind(*part) for part in out.values()) and time.time() < deadline:
        for msg in consumer.consume(1000, 1.0):
            assert not msg.error(), msg.error()
            out[msg.partition()][2].append((msg.offset(), msg.value()))
    consumer.close()
    return out


class BackgroundProducer(threading.Thread):
    """Numbered records (``b"%09d"``, so their order sorts as bytes) sent round robin over
    ``partitions`` with acks=all and idempotence, until ``stop()``.

    ``acked[p]`` holds the values partition ``p`` acknowledged, in delivery order;
    ``failures`` the delivery errors. A full local queue (BufferError) is waited out,
    not counted. Every ``poll_every``-th record polls for ``poll_s`` seconds, which paces
    the loop; the others poll without waiting.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        partitions: int = 1,
        config: dict | None = None,
        poll_every: int = 20,
        poll_s: float = 0.002,
        flush_s: float = 120,
    ) -> None:
        super().__init__(name=f"produce-{topic}")
        self.config = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            **(config or {}),
        }
        self.topic = topic
        self.partitions = partitions
        self.poll_every = poll_every
        self.poll_s = poll_s
        self.flush_s = flush_s
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.failures: list = []
        self._stopping = threading.Event()

    def all_acked(self) -> list[bytes]:
        return [value for p in range(self.partitions) for value in self.acked[p]]

    def stop(self, timeout: float) -> None:
        """Stop sending, flush what is in flight, and wait up to ``timeout`` seconds."""
        self._stopping.set()
        self.join(timeout)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked[msg.partition()].append(msg.value())
        else:
            self.failures.append(err)

    def run(self) -> None:
        producer = Producer(self.config)
        i = 0
        while not self._stopping.is_set():
            try:
                producer.produce(
                    self.topic,
                    value=b"%09d" % i,
                    partition=i % self.partitions,
                    on_delivery=self._delivered,
                )
                i += 1
            except BufferError:
                pass
            producer.poll(self.poll_s if i % self.poll_every == 0 else 0)
        producer.flush(self.flush_s)


def assert_read_back_once(
    producer: BackgroundProducer, bootstrap: str, also_sent: frozenset[bytes] = frozenset()
) -> list[bytes]:
    """The checker's core (issue 27): every record ``producer`` saw acknowledged is read
    back exactly once, in the order it was acknowledged within its partition, and
    nothing is read that neither it nor the test (``also_sent``) sent. Returns every
    value read."""
    data = read_all(bootstrap, producer.topic, producer.partitions)
    read = []
    for p in range(producer.partitions):
        stored = [value for _offset, value in data[p][2]]
        assert len(stored) == len(set(stored)), f"partition {p}: a record was stored twice"
        positions = {value: i for i, value in enumerate(stored)}
        acked = producer.acked[p]
        lost = [value for value in acked if value not in positions]
        assert not lost, f"partition {p}: {len(lost)} acknowledged record(s) lost: {lost[:3]}"
        order = [positions[value] for value in acked]
        assert order == sorted(order), f"partition {p}: acknowledged records out of order"
        sent = [v for v in stored if v not in also_sent]
        assert all(len(v) == 9 and v.isdigit() for v in sent), "a record never sent was read"
        read += stored
    return read
