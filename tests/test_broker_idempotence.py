"""Idempotent producer: librdkafka with enable.idempotence=true while the network drops
every connection again and again: no duplicates, no gaps, order kept."""

from __future__ import annotations

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
        delivered = [0]
        errors = []

        def on_delivery(err, msg) -> None:
            if err:
                errors.append(err)
            else:
                delivered[0] += 1

        # Ten rounds: queue 2,000 records, wait for the first acknowledgement of the
        # round, then cut every connection while the rest are in flight. Driving the
        # drops from the producer's progress (not a timer) makes them happen mid-stream
        # however fast or loaded the machine is.
        n, rounds = 20000, 10
        per_round = n // rounds
        drops_in_flight = 0
        i = 0
        for _ in range(rounds):
            before = delivered[0]
            for _ in range(per_round):
                producer.produce(topic, value=b"%08d" % i, partition=i % 2, on_delivery=on_delivery)
                i += 1
            deadline = time.time() + 60
            while delivered[0] == before and time.time() < deadline:
                producer.poll(0.005)
            if len(producer) > 0:
                drops_in_flight += 1
            proxy.drop_all()
        remaining = producer.flush(90)
        assert remaining == 0 and not errors, errors[:3]
        assert delivered[0] == n
        print("drops with records in flight:", drops_in_flight)
        assert drops_in_flight >= 3, f"only {drops_in_flight} drops hit records in flight"

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
