"""ZooKeeper restarts mid-run: brokers reconnect (or register again after their
sessions expire), a controller is elected, and no acknowledged record is lost."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from quill_stack import ports, services
from tests.cluster_helpers import FAST, BackgroundProducer, read_all
from tests.conftest import TEST_ZOOKEEPER_SETTINGS, ClusterFactory, Server, _start_server
from tests.wait_helpers import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SETTLED_S = 3.0


def _snapshot(zk, bootstrap: str, topic: str):
    """Who is registered (and by which session), the controller, and each partition's
    leader; None while any of them is missing."""
    try:
        ids = sorted(zk.get_children("/brokers/ids"))
        owners = [zk.exists(f"/brokers/ids/{i}").ephemeralOwner for i in ids]
        controller = zk.get("/controller")[0]
        meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    except Exception:  # a session moving, a broker between registrations
        return None
    parts = meta.topics[topic].partitions
    leaders = sorted((p, parts[p].leader) for p in parts)
    if len(ids) != 3 or len(leaders) != 2 or any(leader < 0 for _p, leader in leaders):
        return None
    return ids, owners, controller, leaders


def _settled(zk, bootstrap: str, topic: str):
    seen = {"state": None, "since": 0.0}

    def check() -> bool:
        state = _snapshot(zk, bootstrap, topic)
        if state is None or state != seen["state"]:
            seen.update(state=state, since=time.monotonic())
            return False
        return time.monotonic() - seen["since"] >= SETTLED_S

    return check


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
        # ZooKeeper restores the old sessions and their ephemeral znodes when it comes
        # back, so three ids and a /controller can be the old ones, about to expire.
        # Recovered means: the same registrations, controller and leaders for 3 s in a row.
        wait_until(_settled(zk, cluster.bootstrap, topic), timeout=90, what="the cluster to settle")
        producer.stop(150)
        acked = producer.all_acked()
        assert not producer.failures, producer.failures[:3]
        assert len(acked) > 200
        data = read_all(cluster.bootstrap, topic, 2)
        stored = [v for p in (0, 1) for _, v in data[p][2]]
        assert len(stored) == len(set(stored))
        assert not set(acked) - set(stored)
    finally:
        factory.stop_since(0)
        proc.stop()
