"""ZooKeeper restarts mid-run: brokers reconnect (or register again after their
sessions expire), a controller is elected, and no acknowledged record is lost."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from quill_stack import ports, services
from tests.cluster_helpers import BackgroundProducer
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
        producer = BackgroundProducer(cluster.bootstrap, topic, partitions=2)
        producer.start()
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
        producer.stop(150)
        acked = producer.all_acked()
        assert not producer.failures, producer.failures[:3]
        assert len(acked) > 200
        data = _read_all(cluster.bootstrap, topic, 2)
        stored = [v for p in (0, 1) for _, v in data[p][2]]
        assert len(stored) == len(set(stored))
        assert not set(acked) - set(stored)
    finally:
        factory.stop_since(0)
        proc.stop()
