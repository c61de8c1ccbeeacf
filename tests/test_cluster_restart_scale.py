"""Restarts at scale (issue 27): ISR changes reach the controller in batches (Kafka's
isr_change_notification), the controller converges after a broker restart with a few
hundred partitions, a controller in the middle of that stops on SIGTERM, and a
ControlledShutdown goes ahead of a long queue of other controller events."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.zk.znodes import (
    ConfigEntityZNode,
    ConfigType,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
)
from tests.wait_helpers import wait_until

pytestmark = pytest.mark.cluster

PARTITIONS = 300
TOPIC = "restart-scale"
NOTIFICATIONS = "/isr_change_notification"
SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",  # no ISR flapping on a busy machine
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "1000",
}


def _states(zk, topic: str = TOPIC, partitions: int = PARTITIONS) -> dict[int, dict]:
    base = f"/brokers/topics/{topic}/partitions"
    pending = [(p, zk.get_async(f"{base}/{p}/state")) for p in range(partitions)]
    return {p: json.loads(r.get()[0]) for p, r in pending}


def _stats(zk, paths: list[str]) -> list:
    """The znodes' stats (None: absent), read in one pipelined batch."""
    return [r.get() for r in [zk.exists_async(path) for path in paths]]


def _full(zk, live: set[int]) -> bool:
    return all(set(s["isr"]) == live and s["leader"] in live for s in _states(zk).values())


def _metadata_full(address: str, live: set[int]) -> bool:
    """What a broker answers clients: it comes from the controller's UpdateMetadata."""
    admin = AdminClient({"bootstrap.servers": address})
    topic = admin.list_topics(TOPIC, timeout=30).topics.get(TOPIC)
    return (
        topic is not None
        and len(topic.partitions) == PARTITIONS
        and all(set(p.isrs) == live and p.leader in live for p in topic.partitions.values())
    )


@pytest.fixture(scope="module")
def scale_cluster(cluster_factory):
    cluster = cluster_factory(3, **SETTINGS)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], request_timeout=120)[TOPIC].result(120)
    zk = cluster.zk_client()
    wait_until(lambda: _full(zk, {1, 2, 3}), timeout=180, interval=1, what="every ISR full")
    return cluster


def _controller(zk) -> int:
    return json.loads(zk.get("/controller")[0])["brokerid"]


def test_restart_batches_isr_changes_and_converges(scale_cluster):
    cluster = scale_cluster
    zk = cluster.zk_client()
    zk.ensure_path(NOTIFICATIONS)
    wait_until(lambda: not zk.get_children(NOTIFICATIONS), timeout=60, what="no notification")
    before = zk.exists(NOTIFICATIONS).cversion  # +1 per child created, +1 per child deleted
    victim = max(b for b in (1, 2, 3) if b != _controller(zk))
    cluster.broker(victim).stop(timeout=120)
    assert not cluster.broker(victim).alive()
    cluster.broker(victim).start()
    # the leaders take the restarted broker back into the ISR of every partition: a
    # burst of PARTITIONS ISR changes, written by the leaders to the state znodes ...
    wait_until(lambda: _full(zk, {1, 2, 3}), timeout=180, interval=1, what="every ISR full again")
    # ... and told to the controller, whose metadata every broker then serves
    for broker in cluster.brokers:
        wait_until(
            lambda b=broker: _metadata_full(b.address, {1, 2, 3}),
            timeout=120,
            interval=1,
            what=f"broker {broker.id}'s metadata shows every ISR full",
        )
    # a topic can be created meanwhile and afterwards
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("after-restart", 1, 3)], operation_timeout=30)[
        "after-restart"
    ].result(60)
    # the controller deleted every notification it processed
    wait_until(lambda: not zk.get_children(NOTIFICATIONS), timeout=60, what="notifications gone")
    changes = zk.exists(NOTIFICATIONS).cversion - before
    written = changes // 2  # each notification: one create, one delete
    # one znode per ISR change would be >= PARTITIONS; batched, a handful per leader
    assert 1 <= written <= PARTITIONS // 10, written


def test_notifications_are_deleted_after_processing(scale_cluster):
    """A notification in Kafka's JSON written by hand (as a leader does) is processed
    and deleted, and so is a malformed one."""
    zk = scale_cluster.zk_client()
    path = zk.create(
        f"{NOTIFICATIONS}/isr_change_",
        json.dumps(
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": p} for p in range(5)]}
        ).encode(),
        sequence=True,
    )
    wait_until(lambda: zk.exists(path) is None, timeout=60, what="notification deleted")
    malformed = zk.create(f"{NOTIFICATIONS}/isr_change_", b"not json", sequence=True)
    wait_until(lambda: zk.exists(malformed) is None, timeout=60, what="malformed one deleted")


def test_controller_stops_on_sigterm_mid_restart(scale_cluster):
    cluster = scale_cluster
    zk = cluster.zk_client()
    controller = _controller(zk)
    other = max(b for b in (1, 2, 3) if b != controller)
    cluster.broker(other).stop(timeout=120)
    cluster.broker(other).launch()  # its return is work for the controller ...
    # ... which is stopped while it does it: it must exit by itself (0), not be killed
    code = cluster.broker(controller).stop(timeout=240)
    assert code == 0, code
    live = {1, 2, 3} - {controller}
    cluster.broker(other).wait_healthy()
    wait_until(lambda: _controller_or_none(zk) in live, timeout=60, what="a new controller")
    wait_until(
        lambda: all(s["leader"] in live for s in _states(zk).values()),
        timeout=180,
        interval=1,
        what="every partition led by a live broker",
    )
    cluster.broker(controller).start()
    wait_until(lambda: _full(zk, {1, 2, 3}), timeout=180, interval=1, what="every ISR full again")


def _controller_or_none(zk) -> int | None:
    try:
        return _controller(zk)
    except Exception:  # noqa: BLE001 - no controller at this moment
        return None


BACKLOG = 400  # topics written to ZooKeeper at once: one controller event each


def test_controlled_shutdown_goes_ahead_of_a_backlog(scale_cluster):
    """A stopping broker's ControlledShutdown is handled while the controller still has
    hundreds of queued events (topics written to ZooKeeper in one transaction, as an old
    admin tool would), not after them: its state writes come before the last backlog
    topic's, and the shutdown completes (the broker did not stop without it)."""
    cluster = scale_cluster
    zk = cluster.zk_client()
    wait_until(lambda: _full(zk, {1, 2, 3}), timeout=180, interval=1, what="every ISR full")
    victim = max(b for b in (1, 2, 3) if b != _controller(zk))
    names = [f"backlog-{i}" for i in range(BACKLOG)]
    tx = zk.transaction()
    for name in names:
        tx.create(ConfigEntityZNode.path(ConfigType.TOPIC, name), ConfigEntityZNode.encode({}))
        tx.create(TopicZNode.path(name), TopicZNode.encode(TopicAssignment({0: [1, 2, 3]})))
    assert not [r for r in tx.commit() if isinstance(r, Exception)]
    # the controller queued one event per topic and works through them; once it began:
    first = TopicPartitionStateZNode.path(names[0], 0)
    wait_until(lambda: zk.exists(first) is not None, timeout=120, what="the backlog begun")
    said_before = len(open(cluster.broker(victim).log_path, "rb").read())
    assert cluster.broker(victim).stop(timeout=300) == 0
    with open(cluster.broker(victim).log_path, "rb") as f:
        said = f.read()[said_before:].decode(errors="replace")
    assert "controlled shutdown done" in said, said[-2000:]
    assert "did not complete" not in said, said[-2000:]
    main = [TopicPartitionStateZNode.path(TOPIC, p) for p in range(PARTITIONS)]
    assert all(victim not in s["isr"] for s in _states(zk).values())
    shutdown_zxid = min(stat.mzxid for stat in _stats(zk, main))  # the shutdown's writes
    backlog = [TopicPartitionStateZNode.path(name, 0) for name in names]
    wait_until(
        lambda: None not in _stats(zk, backlog), timeout=300, interval=1, what="the backlog done"
    )
    created = [stat.czxid for stat in _stats(zk, backlog)]
    after = sum(1 for zxid in created if zxid > shutdown_zxid)
    assert after > 0, f"all {BACKLOG} backlog topics were handled before the shutdown"
    cluster.broker(victim).start()
    wait_until(lambda: _full(zk, {1, 2, 3}), timeout=180, interval=1, what="every ISR full again")
