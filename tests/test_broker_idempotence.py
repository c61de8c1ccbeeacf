"""Idempotent producer: librdkafka with enable.idempotence=true while the network drops
every connection again and again: no duplicates, no gaps, order kept."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.proxy import DroppingProxy
from tests.wire import WireClient


def test_idempotent_producer_survives_dropped_connections(cluster_factory):
    proxy = DroppingProxy()
    try:
        cluster = cluster_factory(
            1, **{"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}
        )
        proxy.target = ("127.0.0.1", cluster.brokers[0].port)
        bootstrap = f"127.0.0.1:{proxy.port}"
        topic = f"idem-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "batch.num.messages": 50,
                "message.timeout.ms": 60000,
            }
        )
        stop = threading.Event()
        delivered = [0]

        def chaos():
            # every 0.3 s, once some record was acknowledged since the last drop: the
            # connections die mid-stream again and again, and on a loaded machine the
            # producer still gets a word in between (else it only ever times out)
            seen = -1
            while not stop.is_set():
                time.sleep(0.3)
                if delivered[0] != seen:
                    seen = delivered[0]
                    proxy.drop_all()

        t = threading.Thread(target=chaos, daemon=True)
        t.start()
        errors = []

        def on_delivery(err, msg) -> None:
            if err:
                errors.append(err)
            else:
                delivered[0] += 1

        n = 20000
        for i in range(n):
            producer.produce(
                topic,
                value=b"%08d" % i,
                partition=i % 2,
                on_delivery=on_delivery,
            )
            if i % 500 == 0:
                producer.poll(0.01)
        remaining = producer.flush(90)
        stop.set()
        t.join()
        assert remaining == 0 and not errors, errors[:3]
        assert proxy.drops >= 3

        direct = f"127.0.0.1:{cluster.brokers[0].port}"
        wire = WireClient.for_bootstrap(direct)
        for p in (0, 1):
            assert wire.list_offset(topic, p, -1).offset == n // 2, "duplicates or losses"
        wire.close()
        consumer = Consumer(
            {"bootstrap.servers": direct, "group.id": "x", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        got = {0: [], 1: []}
        deadline = time.time() + 60
        while sum(map(len, got.values())) < n and time.time() < deadline:
            for msg in consumer.consume(1000, 1.0):
                got[msg.partition()].append(int(msg.value()))
        consumer.close()
        for p in (0, 1):
            assert got[p] == list(range(p, n, 2))
    finally:
        proxy.close()
