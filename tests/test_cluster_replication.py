"""Replication on a real 3-broker cluster: ISR, HW, acks=all, failover, truncation by
leader epoch, unclean election. Real ZooKeeper, real broker processes, librdkafka."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from broker.protocol.records import decode_records, scan_valid_prefix
from tests.cluster_helpers import FAST, BackgroundProducer, partition_state, read_all
from tests.ops_helpers import read_controller
from tests.wait_helpers import wait_until
from tests.wire import WireClient

pytestmark = pytest.mark.cluster


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _create(cluster, topic, partitions=1, rf=3, config=None):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config=config or {})])[topic].result(30)
    wait_until(lambda: len(partition_state(cluster, topic, 0)["isr"]) == rf, what="full ISR")


@pytest.mark.slow
def test_acks_all_survives_repeated_leader_kills(cluster_factory):
    """Eight kill -9s of partition 0's leader under an acks=all producer; the long soak
    (100 runs of kills, pauses and partitions, with the checker) is bench/faults.py."""
    cluster = cluster_factory(3, **FAST)
    topic = _name("kills")
    _create(cluster, topic, partitions=2, config={"min.insync.replicas": "2"})
    producer = BackgroundProducer(
        cluster.bootstrap, topic, partitions=2, poll_every=50, poll_s=0.001
    )
    producer.start()
    try:
        for _ in range(8):
            leader = wait_until(
                lambda: (
                    partition_state(cluster, topic, 0)["leader"] > 0
                    and partition_state(cluster, topic, 0)["leader"]
                ),
                what="a leader",
            )
            cluster.broker(leader).kill()
            wait_until(
                lambda old=leader: partition_state(cluster, topic, 0)["leader"] not in (-1, old),
                what="a new leader",
            )
            cluster.broker(leader).start()
            wait_until(
                lambda: len(partition_state(cluster, topic, 0)["isr"]) >= 2, what="ISR of two"
            )
    finally:
        producer.stop(180)
    acked = producer.acked
    assert not producer.failures, producer.failures[:3]
    assert sum(map(len, acked.values())) > 1000
    data = read_all(cluster.bootstrap, topic, 2)
    for p in (0, 1):
        low, high, values = data[p]
        stored = [v for _, v in values]
        assert [o for o, _ in values] == list(range(low, high))
        assert len(stored) == len(set(stored)), "a record was stored twice"
        assert stored == sorted(stored), "order within the partition changed"
        missing = set(acked[p]) - set(stored)
        assert not missing, f"{len(missing)} acknowledged records lost in partition {p}"


def test_paused_follower_leaves_isr_and_rejoins_and_hw_never_goes_back(cluster_factory):
    cluster = cluster_factory(3, **FAST)
    topic = _name("pause")
    _create(cluster, topic, config={"min.insync.replicas": "2"})
    state = partition_state(cluster, topic, 0)
    follower = next(b for b in state["isr"] if b != state["leader"])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 1})
    hws: list[int] = []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "h"})

    def sample():
        hws.append(
            consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
        )

    cluster.broker(follower).pause()
    try:
        wait_until(
            lambda: follower not in partition_state(cluster, topic, 0)["isr"],
            timeout=20,
            what="ISR shrink",
        )
        for i in range(100):
            producer.produce(topic, value=b"during-%d" % i, partition=0)
        assert producer.flush(30) == 0
        sample()
    finally:
        cluster.broker(follower).resume()
    wait_until(
        lambda: follower in partition_state(cluster, topic, 0)["isr"], timeout=20, what="ISR expand"
    )
    for i in range(100):
        producer.produce(topic, value=b"after-%d" % i, partition=0)
        if i % 10 == 0:
            sample()
    assert producer.flush(30) == 0
    sample()
    consumer.close()
    assert hws == sorted(hws) and hws[-1] == 200


def test_divergent_old_leader_truncates_by_leader_epoch(cluster_factory):
    # followers stay in the ISR while paused (long lag and session timeouts), so one of
    # them can be elected cleanly after the leader took writes they never fetched
    cluster = cluster_factory(
        3, **{"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "15000"}
    )
    topic = _name("diverge")
    _create(cluster, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=b"agreed-%d" % i, partition=0)
    assert producer.flush(30) == 0
    old = partition_state(cluster, topic, 0)["leader"]
    followers = [b for b in (1, 2, 3) if b != old]
    for b in followers:
        cluster.broker(b).pause()
    time.sleep(1.2)  # any fetch they had parked at the leader (max wait 500 ms) has returned
    w = WireClient("127.0.0.1", cluster.broker(old).port)
    from broker.protocol.records import build_batch

    batch = build_batch(
        [(None, b"divergent-%d" % i, [], int(time.time() * 1000)) for i in range(5)]
    )
    r = w.produce(topic, 0, batch, acks=1)
    assert r.error_code == ErrorCode.none and r.base_offset == 10
    w.close()
    cluster.broker(old).kill()
    for b in followers:
        cluster.broker(b).resume()
    new = wait_until(
        lambda: (
            partition_state(cluster, topic, 0)["leader"] in followers
            and partition_state(cluster, topic, 0)["leader"]
        ),
        what="new leader",
    )
    producer = Producer(
        {"bootstrap.servers": ",".join(cluster.broker(b).address for b in followers), "acks": "all"}
    )
    for i in range(3):
        producer.produce(topic, value=b"new-leader-%d" % i, partition=0)
    assert producer.flush(30) == 0
    cluster.broker(old).start()
    wait_until(
        lambda: old in partition_state(cluster, topic, 0)["isr"],
        timeout=30,
        what="old leader back in ISR",
    )
    values = []
    for seg in sorted(Path(cluster.broker(old).log_dir, f"{topic}-0").glob("*.log")):
        data = seg.read_bytes()
        end, headers = scan_valid_prefix(data)
        for h in headers:
            values += [r.value for r in decode_records(data[h.position : h.position + h.size])]
    assert values == [b"agreed-%d" % i for i in range(10)] + [
        b"new-leader-%d" % i for i in range(3)
    ]
    assert new != old


def test_unclean_election_off_keeps_partition_offline_on_elects(cluster_factory):
    cluster = cluster_factory(2, **FAST)
    clean, unclean = _name("clean"), _name("unclean")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for topic, flag in ((clean, "false"), (unclean, "true")):
        admin.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=1,
                    replica_assignment=[[1, 2]],
                    config={"unclean.leader.election.enable": flag},
                )
            ]
        )[topic].result(30)
        wait_until(lambda t=topic: len(partition_state(cluster, t, 0)["isr"]) == 2, what="full ISR")
    cluster.broker(2).pause()
    for topic in (clean, unclean):
        wait_until(
            lambda t=topic: partition_state(cluster, t, 0)["isr"] == [1],
            timeout=20,
            what="ISR shrink to the leader",
        )
    cluster.broker(1).kill()
    cluster.broker(2).resume()
    assert wait_until(
        lambda: partition_state(cluster, unclean, 0)["leader"] == 2,
        timeout=20,
        what="unclean election",
    )
    time.sleep(1.0)
    assert partition_state(cluster, clean, 0)["leader"] == -1, "clean topic must stay offline"
    cluster.broker(1).start()
    wait_until(
        lambda: partition_state(cluster, clean, 0)["leader"] == 1,
        timeout=20,
        what="the ISR member back as leader",
    )


def test_errors_from_followers_and_min_isr(cluster_factory):
    cluster = cluster_factory(3, **FAST)
    topic = _name("errs")
    _create(cluster, topic, config={"min.insync.replicas": "3"})
    state = partition_state(cluster, topic, 0)
    follower = (
        next(b for b in state["replicas"] if b != state["leader"])
        if "replicas" in state
        else next(b for b in (1, 2, 3) if b != state["leader"])
    )
    from broker.protocol.records import build_batch

    batch = build_batch([(None, b"x", [], int(time.time() * 1000))])
    w = WireClient("127.0.0.1", cluster.broker(follower).port)
    assert w.produce(topic, 0, batch).error_code == ErrorCode.not_leader_or_follower
    w.close()
    cluster.broker(follower).kill()
    wait_until(
        lambda: follower not in partition_state(cluster, topic, 0)["isr"],
        timeout=20,
        what="ISR shrink",
    )
    leader = cluster.broker(partition_state(cluster, topic, 0)["leader"])
    w = WireClient("127.0.0.1", leader.port)
    before = w.list_offset(topic, 0, -1).offset
    assert w.produce(topic, 0, batch, acks=-1).error_code == ErrorCode.not_enough_replicas
    assert w.produce(topic, 0, batch, acks=1).error_code == ErrorCode.none
    wait_until(
        lambda: w.list_offset(topic, 0, -1).offset == before + 1,
        what="HW to cover the acks=1 write",
    )
    w.close()


def test_controller_failover(cluster_factory):
    cluster = cluster_factory(3, **FAST)
    zk = cluster.zk_client()
    first = json.loads(zk.get("/controller")[0])["brokerid"]
    epoch = int(zk.get("/controller_epoch")[0])
    cluster.broker(first).kill()
    second = wait_until(
        lambda: (c := read_controller(zk)) not in (None, first) and c,
        timeout=20,
        what="a new controller",
    )
    assert int(zk.get("/controller_epoch")[0]) == epoch + 1
    topic = _name("after")
    others = ",".join(b.address for b in cluster.brokers if b.id != first)
    admin = AdminClient({"bootstrap.servers": others})
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
    producer = Producer({"bootstrap.servers": others, "acks": "all"})
    producer.produce(topic, value=b"ok", partition=1)
    assert producer.flush(30) == 0
    assert second != first


def test_an_admin_client_asking_during_an_election_gets_the_elected_controller(cluster_factory):
    """Issue 27: right after a failover a broker may know no controller yet (the old
    /controller is gone, the watch has not brought the new one). librdkafka's admin
    client told "no controller" once its brokers are up never asks again, so its
    CreateTopics hung. A broker that knows none now asks ZooKeeper and waits for the
    election. Here the election is held open: a session of the test's owns /controller
    naming no broker (-1), which no broker takes over until it is deleted."""
    cluster = cluster_factory(2, **FAST)
    zk, holder = cluster.zk_client(), cluster.zk_client()
    no_controller = json.dumps({"version": 1, "brokerid": -1, "timestamp": "0"}).encode()
    tx = holder.transaction()
    tx.delete("/controller")
    tx.create("/controller", no_controller, ephemeral=True)
    assert not [r for r in tx.commit() if isinstance(r, Exception)]
    for broker in cluster.brokers:
        wait_until(
            lambda b=broker: "controller is now broker -1" in b.log_tail(),
            what=f"broker {broker.id} to know no controller",
        )
    topic = _name("elect")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    created = admin.create_topics([NewTopic(topic, 2, 2)])[topic]
    time.sleep(1)  # the client asks for the controller meanwhile (no assertion on time)
    holder.delete("/controller")  # the election ends
    created.result(30)
    elected = wait_until(lambda: (c := read_controller(zk)) is not None and c >= 0 and c)
    assert elected in {b.id for b in cluster.brokers}
    for broker in cluster.brokers:
        wire = WireClient("127.0.0.1", broker.port)
        try:
            assert wire.request(3, 1, {"topics": []}).controller_id == elected
        finally:
            wire.close()
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 2


def test_controlled_shutdown_moves_leaderships_first(cluster_factory):
    cluster = cluster_factory(3, **FAST)
    topic = _name("ctrl")
    _create(cluster, topic, partitions=6, config={"min.insync.replicas": "2"})
    victim = partition_state(cluster, topic, 0)["leader"]
    led_before = [p for p in range(6) if partition_state(cluster, topic, p)["leader"] == victim]
    assert led_before
    assert cluster.broker(victim).stop() == 0, "SIGTERM must end in a clean exit"
    for p in range(6):
        state = partition_state(cluster, topic, p)
        assert state["leader"] != victim and state["leader"] > 0
        assert victim not in state["isr"]
    others = ",".join(b.address for b in cluster.brokers if b.id != victim)
    producer = Producer({"bootstrap.servers": others, "acks": "all", "message.timeout.ms": 10000})
    for p in range(6):
        producer.produce(topic, value=b"after-shutdown", partition=p)
    assert producer.flush(30) == 0
    cluster.broker(victim).start()
    wait_until(
        lambda: all(victim in partition_state(cluster, topic, p)["isr"] for p in range(6)),
        what="rejoin",
    )


def test_debugging_replica_id_reads_each_replicas_leo(cluster_factory):
    cluster = cluster_factory(3, **FAST)
    topic = _name("leo")
    _create(cluster, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(7):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    state = partition_state(cluster, topic, 0)
    follower = next(b for b in (1, 2, 3) if b != state["leader"])
    w = WireClient("127.0.0.1", cluster.broker(follower).port)

    def list_latest(replica_id):
        return (
            w.request(
                2,
                7,
                {
                    "replica_id": replica_id,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                            ],
                        }
                    ],
                },
            )
            .topics[0]
            .partitions[0]
        )

    assert list_latest(-1).error_code == ErrorCode.not_leader_or_follower
    wait_until(lambda: list_latest(-2).offset == 7, what="the follower's LEO")
    w.close()


def test_stale_controller_epoch_is_refused(cluster_factory):
    cluster = cluster_factory(1)
    topic = _name("fence")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    epoch = int(cluster.zk_client().get("/controller_epoch")[0])
    w = WireClient.for_bootstrap(cluster.bootstrap)
    stale = w.request(
        4,
        4,
        {
            "controller_id": 99,
            "controller_epoch": epoch - 1,
            "topic_states": [
                {
                    "topic_name": topic,
                    "partition_states": [
                        {
                            "partition_index": 0,
                            "controller_epoch": epoch - 1,
                            "leader": 99,
                            "leader_epoch": 50,
                            "isr": [99],
                            "zk_version": 99,
                            "replicas": [99],
                        }
                    ],
                }
            ],
            "live_leaders": [],
        },
    )
    assert stale.error_code == ErrorCode.stale_controller_epoch
    assert (
        w.request(
            6,
            7,
            {
                "controller_id": 99,
                "controller_epoch": epoch - 1,
                "topic_states": [],
                "live_brokers": [],
            },
        ).error_code
        == ErrorCode.stale_controller_epoch
    )
    assert (
        w.request(
            5, 3, {"controller_id": 99, "controller_epoch": epoch - 1, "topic_states": []}
        ).error_code
        == ErrorCode.stale_controller_epoch
    )
    # nothing changed: the broker still leads and serves the partition
    from broker.protocol.records import build_batch

    batch = build_batch([(None, b"still-leader", [], int(time.time() * 1000))])
    assert w.produce(topic, 0, batch).error_code == ErrorCode.none
    md = w.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    assert md.topics[0].partitions[0].leader_id == cluster.brokers[0].id
    w.close()


def test_a_follower_behind_the_leaders_log_start_starts_over_there(cluster_factory):
    """A follower that was away while the leader's log start moved past its log end
    (DeleteRecords here; retention does the same) starts its log over at the leader's
    log start, catches up and rejoins the ISR. The leader's OFFSET_OUT_OF_RANGE carries
    its log start for that (Kafka's follower asks with ListOffsets); without it the
    follower truncated and fetched from its own end again, for ever."""
    cluster = cluster_factory(3, **FAST)
    topic = _name("behind")
    _create(cluster, topic)
    state = partition_state(cluster, topic, 0)
    follower = next(b for b in state["isr"] if b != state["leader"])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 1})
    for i in range(10):
        producer.produce(topic, value=b"before-%d" % i, partition=0)
    assert producer.flush(30) == 0
    cluster.broker(follower).kill()
    wait_until(lambda: follower not in partition_state(cluster, topic, 0)["isr"], what="ISR shrink")
    for i in range(100):
        producer.produce(topic, value=b"away-%d" % i, partition=0)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    [deleted] = admin.delete_records([TopicPartition(topic, 0, 60)]).values()
    assert deleted.result(30).low_watermark == 60
    cluster.broker(follower).start()
    wait_until(
        lambda: follower in partition_state(cluster, topic, 0)["isr"],
        timeout=90,
        what="the follower back in the ISR",
    )
    w = WireClient("127.0.0.1", cluster.broker(follower).port)

    def follower_offset(timestamp: int) -> int:  # replica_id -2: the replica's own log
        request = {
            "replica_id": -2,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                    ],
                }
            ],
        }
        return w.request(2, 7, request).topics[0].partitions[0].offset

    try:
        assert (follower_offset(-2), follower_offset(-1)) == (60, 110)
    finally:
        w.close()
    low, high, values = read_all(cluster.bootstrap, topic, 1)[0]
    assert (low, high) == (60, 110)
    assert [v for _, v in values] == [b"away-%d" % i for i in range(50, 100)]
