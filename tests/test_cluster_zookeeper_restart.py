"""ZooKeeper restarts mid-run: brokers reconnect (or register again after their
sessions expire), a controller is elected, and no acknowledged record is lost."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from quill_stack import ports, services
from tests.conftest import TEST_ZOOKEEPER_SETTINGS, ClusterFactory, Server, _start_server
from tests.test_cluster_replication import FAST, _read_all, _wait

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_zookeeper_restart_loses_nothing(tmp_path):
    state = tmp_path / "zookeeper"
    port = ports.free_port()
    proc = _start_server(
        services.zookeeper_spec(state, port, settings=TEST_ZOOKEEPER_SETTINGS), state
    )
    factory = ClusterFactory(Server("127.0.0.1", port, proc), tmp_path / "clusters")
    try:
        cluster = factory(3, **FAST)
        topic = f"zkr-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "2"})])[
            topic
        ].result(30)
        acked: list[bytes] = []
        failed: list = []
        stop = threading.Event()

        def produce():
            producer = Producer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 120000,
                }
            )
            i = 0
            while not stop.is_set():
                try:
                    producer.produce(
                        topic,
                        value=b"%08d" % i,
                        partition=i % 2,
                        on_delivery=lambda e, m: (
                            acked.append(m.value()) if e is None else failed.append(e)
                        ),
                    )
                    i += 1
                except BufferError:
                    pass
                producer.poll(0.002 if i % 20 == 0 else 0)
            producer.flush(120)

        t = threading.Thread(target=produce)
        t.start()
        time.sleep(1.5)
        proc.stop()
        time.sleep(4.0)  # longer than the brokers' 2 s session timeout
        proc.start()
        proc.wait_healthy()
        zk = cluster.zk_client()
        _wait(
            lambda: len(zk.get_children("/brokers/ids")) == 3,
            timeout=60,
            what="all brokers registered again",
        )
        _wait(lambda: zk.exists("/controller"), timeout=30, what="a controller")
        time.sleep(2.0)
        stop.set()
        t.join(150)
        assert not failed, failed[:3]
        assert len(acked) > 200
        data = _read_all(cluster.bootstrap, topic, 2)
        stored = [v for p in (0, 1) for _, v in data[p][2]]
        assert len(stored) == len(set(stored))
        assert not set(acked) - set(stored)
    finally:
        factory.stop_since(0)
        proc.stop()
