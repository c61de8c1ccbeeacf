"""The controller's admin APIs with Kafka's own clients on one 3-broker cluster:
AlterPartitionReassignments / ListPartitionReassignments (kafka-python, as librdkafka has
no call for them) with Kafka's cancel semantics, and ElectLeaders PREFERRED and UNCLEAN
(confluent-kafka and kafka-python), each error code Kafka gives."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ElectionType, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kio.schema.errors import ErrorCode

from broker.zk.znodes import (
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    ReassignPartitionsZNode,
)
from tests.ops_helpers import (
    alter_configs,
    assignment,
    controller_id,
    create_topic,
    described,
    state,
    unique,
)
from tests.wait_helpers import wait_until
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

SETTINGS = {
    "zookeeper.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}


@pytest.fixture(scope="module")
def ops_cluster(cluster_factory):
    return cluster_factory(3, **SETTINGS)


def _kadmin(cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)


def _high_watermark(cluster, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("hw")})
    try:
        return consumer.get_watermark_offsets(CTopicPartition(topic, partition), timeout=20)[1]
    finally:
        consumer.close()


def test_reassign_list_and_cancel_with_kafka_python(ops_cluster):
    cluster = ops_cluster
    topic = create_topic(cluster, "move", [[1, 2]])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(300):
        producer.produce(topic, key=b"%d" % i, value=bytes(1000), partition=0)
    assert producer.flush(30) == 0
    # hold the new replica back: broker 3 follows partition 0 at 2 kB/s
    alter_configs(
        cluster.bootstrap, "topic", topic, {"follower.replication.throttled.replicas": "0:3"}
    )
    alter_configs(cluster.bootstrap, "broker", "3", {"follower.replication.throttled.rate": "2000"})
    wait_until(
        lambda: (
            described(cluster.bootstrap, "broker", "3", "follower.replication.throttled.rate")
            == "2000"
        ),
        what="broker 3's throttle",
    )
    admin = _kadmin(cluster)
    tp = KTopicPartition(topic, 0)
    assert admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
    listing = admin.list_partition_reassignments()
    assert listing[tp] == {"replicas": [1, 2, 3], "adding_replicas": [3], "removing_replicas": [1]}
    data, _ = cluster.zk_client().get(ReassignPartitionsZNode.path)
    assert json.loads(data) == {
        "version": 1,
        "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 3]}],
    }
    moving = Path(cluster.broker(3).log_dir) / f"{topic}-0"
    wait_until(moving.exists, what="broker 3 to start following")

    # cancel (a null replica list): back to the original replicas, the added one dropped
    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    wait_until(lambda: assignment(cluster, topic)["partitions"]["0"] == [1, 2], what="cancel")
    after = assignment(cluster, topic)
    assert after["adding_replicas"] == {} and after["removing_replicas"] == {}
    st = state(cluster, topic, 0)
    assert st["leader"] in (1, 2) and set(st["isr"]) <= {1, 2}
    assert admin.list_partition_reassignments() == {}
    wait_until(lambda: cluster.zk_client().exists(ReassignPartitionsZNode.path) is None,
               what="the request znode to go")  # fmt: skip
    wait_until(lambda: not moving.exists(), what="broker 3 to delete its copy")
    result = admin.alter_partition_reassignments({tp: None})
    assert result == {tp: NoReassignmentInProgressError}

    # refused requests change nothing
    unknown = KTopicPartition(unique("nosuch"), 0)
    assert admin.alter_partition_reassignments({unknown: [1]}) == {
        unknown: UnknownTopicOrPartitionError
    }
    assert admin.alter_partition_reassignments({tp: [2, 9]}) == {
        tp: InvalidReplicationAssignmentError
    }
    assert assignment(cluster, topic)["partitions"]["0"] == [1, 2]

    # unthrottled, the same move completes and keeps every record
    alter_configs(cluster.bootstrap, "broker", "3", {"follower.replication.throttled.rate": None})
    alter_configs(
        cluster.bootstrap, "topic", topic, {"follower.replication.throttled.replicas": None}
    )
    assert admin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
    wait_until(
        lambda: assignment(cluster, topic)["partitions"]["0"] == [2, 3],
        timeout=90,
        what="the reassignment to complete",
    )
    assert sorted(state(cluster, topic, 0)["isr"]) == [2, 3]
    assert _high_watermark(cluster, topic, 0) == 300
    admin.close()


def test_non_controller_answers_not_controller(ops_cluster):
    cluster = ops_cluster
    other = next(b for b in (1, 2, 3) if b != controller_id(cluster))
    w = WireClient("127.0.0.1", cluster.broker(other).port)
    try:
        alter = w.request(45, 0, {"timeout": 30000, "topics": []})
        assert alter.error_code == ErrorCode.not_controller and alter.error_message
        listing = w.request(46, 0, {"timeout": 30000, "topics": None})
        assert listing.error_code == ErrorCode.not_controller
        elect = w.request(43, 2, {"election_type": 0, "topic_partitions": None, "timeout": 30000})
        assert elect.error_code == ErrorCode.not_controller
    finally:
        w.close()


def _elect(bootstrap: str, election_type, partitions, attempts: int = 5):
    """confluent-kafka's elect_leaders, retried on NOT_CONTROLLER (librdkafka may still
    address the old controller right after a move, as Kafka's admin client retries)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for attempt in range(attempts):
        try:
            return admin.elect_leaders(election_type, partitions).result(30)
        except Exception as exc:  # noqa: BLE001
            if attempt == attempts - 1 or "NOT_CONTROLLER" not in str(exc):
                raise
            time.sleep(1.0)


def _name(err) -> str | None:
    return None if err is None else err.name()


def test_preferred_election_with_confluent_kafka(ops_cluster):
    cluster = ops_cluster
    topic = create_topic(cluster, "pref", [[1, 2], [2, 1]])
    p0, p1 = CTopicPartition(topic, 0), CTopicPartition(topic, 1)
    cluster.broker(1).stop()  # controlled shutdown: partition 0's leadership goes to 2
    try:
        wait_until(lambda: state(cluster, topic, 0)["leader"] == 2, what="failover")
        result = _elect(cluster.broker(2).address, ElectionType.PREFERRED, [p0])
        assert _name(result[p0]) == "PREFERRED_LEADER_NOT_AVAILABLE"
    finally:
        cluster.broker(1).start()
    wait_until(lambda: 1 in state(cluster, topic, 0)["isr"], what="broker 1 back in sync")
    result = _elect(cluster.bootstrap, ElectionType.PREFERRED, [p0, p1])
    assert result[p0] is None and _name(result[p1]) == "ELECTION_NOT_NEEDED"
    assert state(cluster, topic, 0)["leader"] == 1
    unknown = CTopicPartition(unique("nosuch"), 0)
    assert _name(_elect(cluster.bootstrap, ElectionType.PREFERRED, [unknown])[unknown]) == (
        "UNKNOWN_TOPIC_OR_PART"  # librdkafka's name for it
    )


def _kelect(cluster, election_type: int, topic: str, partition: int) -> int:
    admin = _kadmin(cluster)
    try:
        response = admin.elect_leaders(election_type, {topic: [partition]}, raise_errors=False)
    finally:
        admin.close()
    ((_topic, results),) = [(r[0], r[1]) for r in response.replica_election_results]
    return results[0][1]


def test_unclean_election_with_kafka_python(ops_cluster):
    cluster = ops_cluster
    topic = create_topic(cluster, "unclean", [[3, 2]])
    lonely = create_topic(cluster, "lonely", [[3]])
    assert _kelect(cluster, 1, topic, 0) == ErrorCode.election_not_needed  # leader alive
    cluster.broker(2).stop()
    wait_until(lambda: state(cluster, topic, 0)["isr"] == [3], what="ISR to shrink to 3")
    cluster.broker(3).stop()
    try:
        wait_until(lambda: state(cluster, topic, 0)["leader"] == -1, what="partition offline")
        cluster.broker(2).start()
        wait_until(lambda: controller_id(cluster) in (1, 2), what="a live controller")
        time.sleep(1.0)
        assert state(cluster, topic, 0)["leader"] == -1  # unclean elections are off
        assert _kelect(cluster, 1, lonely, 0) == ErrorCode.eligible_leaders_not_available
        assert _kelect(cluster, 1, topic, 0) == ErrorCode.none
        st = state(cluster, topic, 0)
        assert st["leader"] == 2 and st["isr"] == [2]
    finally:
        cluster.broker(3).start()
    wait_until(lambda: state(cluster, lonely, 0)["leader"] == 3, what="broker 3 back")


def _log_bytes(cluster, broker: int, topic: str) -> int:
    path = Path(cluster.broker(broker).log_dir) / f"{topic}-0"
    return sum(f.stat().st_size for f in path.glob("*.log")) if path.exists() else 0


def _set_default_broker_config(cluster, config: dict[str, str]) -> None:
    """As kafka-configs --entity-type brokers --entity-default does in ZooKeeper mode
    (librdkafka cannot name the default broker entity)."""
    zk = cluster.zk_client()
    path = ConfigEntityZNode.path("brokers", "<default>")
    zk.ensure_path(path)
    zk.set(path, ConfigEntityZNode.encode(config))
    zk.create(
        f"{ConfigEntityChangeNotificationZNode.path}/{ConfigEntityChangeNotificationZNode.prefix}",
        ConfigEntityChangeNotificationZNode.encode("brokers/<default>"),
        sequence=True,
    )


def test_leader_throttle_from_the_default_broker_config(ops_cluster):
    """leader.replication.throttled.rate at /config/brokers/<default> holds back the
    replicas leader.replication.throttled.replicas names; deleting it lets them finish."""
    cluster = ops_cluster
    topic = create_topic(cluster, "leaderthrottle", [[1]])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for _ in range(3000):
        producer.produce(topic, value=bytes(1000), partition=0)
    assert producer.flush(30) == 0
    total = _log_bytes(cluster, 1, topic)
    alter_configs(
        cluster.bootstrap, "topic", topic, {"leader.replication.throttled.replicas": "0:1"}
    )
    _set_default_broker_config(cluster, {"leader.replication.throttled.rate": "1000"})
    wait_until(
        lambda: (
            described(cluster.bootstrap, "broker", "1", "leader.replication.throttled.rate")
            == "1000"
        ),
        what="broker 1 to take the default rate",
    )
    admin = _kadmin(cluster)
    tp = KTopicPartition(topic, 0)
    try:
        assert admin.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
        wait_until(lambda: _log_bytes(cluster, 2, topic) > 0, what="the first fetch")
        time.sleep(3.0)  # unthrottled, the copy takes well under a second
        # the first fetch (at most replica.fetch.max.bytes, 1 MB) goes before the rate is
        # known, as in Kafka; then 1,000 B/s holds the rest back
        assert _log_bytes(cluster, 2, topic) <= 1_100_000 < total
        assert assignment(cluster, topic)["adding_replicas"] == {"0": [2]}
    finally:
        _set_default_broker_config(cluster, {})
    wait_until(
        lambda: assignment(cluster, topic)["adding_replicas"] == {},  # [1, 2] all along
        timeout=90,
        what="the move to finish once the throttle is gone",
    )
    assert assignment(cluster, topic)["partitions"]["0"] == [1, 2]
    assert _log_bytes(cluster, 2, topic) == total
    admin.close()
