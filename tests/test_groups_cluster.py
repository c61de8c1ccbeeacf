"""Groups on a 3-broker cluster: __consumer_offsets replicated (RF 3), coordination
moving with the leadership of its partitions, and committed offsets surviving kill -9
of the coordinator's broker."""

from __future__ import annotations

import time

import pytest
from kio.schema.errors import ErrorCode as E

from broker.coordinator.group.codec import partition_for
from tests.group_helpers import (
    GROUP_BROKER,
    ConfluentMember,
    Ownership,
    all_values,
    commit,
    committed_offsets,
    fetched,
    find,
    produce,
    topic_and_group,
    unique,
)
from tests.wait_helpers import wait_until
from tests.wire import WireClient

PARTITIONS = 6
OFFSETS_PARTITIONS = 10


@pytest.fixture(scope="module")
def cluster(cluster_factory):
    return cluster_factory(3, **GROUP_BROKER, **{"zookeeper.session.timeout.ms": "4000"})


def _coordinator(client: WireClient, group: str) -> int:
    resp = find(client, group)
    return resp.node_id if resp.error_code == E.none else -1


def test_offsets_topic_is_compacted_and_replicated(cluster):
    from confluent_kafka.admin import AdminClient, ConfigResource

    client = WireClient.for_bootstrap(cluster.bootstrap)
    try:
        wait_until(lambda: _coordinator(client, "any") > 0, what="a coordinator")
    finally:
        client.close()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # the broker that answers may not have had the controller's UpdateMetadata yet
    meta = wait_until(
        lambda: admin.list_topics(timeout=30).topics.get("__consumer_offsets"),
        what="__consumer_offsets in the metadata",
    )
    assert len(meta.partitions) == OFFSETS_PARTITIONS
    assert all(len(p.replicas) == 3 for p in meta.partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"
    # every broker sends a group to the leader of its offsets partition
    group = unique("where")
    answers = set()
    for b in cluster.brokers:
        c = WireClient("127.0.0.1", b.port)
        try:
            answers.add(_coordinator(c, group))
        finally:
            c.close()
    leader = meta.partitions[partition_for(group, OFFSETS_PARTITIONS)].leader
    assert answers == {leader}


def test_commits_survive_kill_9_of_the_coordinator(cluster):
    topic, group = topic_and_group(cluster.bootstrap, "ha", 3, rf=3)
    client = WireClient.for_bootstrap(cluster.bootstrap)
    wait_until(lambda: _coordinator(client, group) > 0, what="a coordinator")
    coordinator_id = _coordinator(client, group)
    client.close()
    # ask a broker that survives from now on
    survivor = next(b for b in cluster.brokers if b.id != coordinator_id)
    client = WireClient("127.0.0.1", survivor.port)
    try:
        coord = WireClient("127.0.0.1", cluster.broker(coordinator_id).port)
        acked = commit(coord, group, topic, {0: 11, 1: 22, 2: 33}, metadata="before")
        coord.close()
        assert acked == {0: E.none, 1: E.none, 2: E.none}
        cluster.broker(coordinator_id).kill()
        # another broker takes over the partition and loads the group from its replica
        wait_until(
            lambda: _coordinator(client, group) not in (-1, coordinator_id),
            what="a new coordinator",
            interval=0.25,
        )
        new = WireClient("127.0.0.1", cluster.broker(_coordinator(client, group)).port)
        try:
            wait_until(
                lambda: fetched_or_none(new, group, topic) is not None, what="the group to load"
            )
            assert fetched(new, group, topic) == {
                0: (11, "before"),
                1: (22, "before"),
                2: (33, "before"),
            }
            assert commit(new, group, topic, {0: 12}) == {0: E.none}
        finally:
            new.close()
    finally:
        client.close()
        cluster.broker(coordinator_id).start()


def fetched_or_none(client, group, topic):
    resp = client.request(
        9,
        8,
        {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}]},
    )
    return None if resp.groups[0].error_code != E.none else resp


def test_group_moves_with_its_coordinator(cluster):
    """A live group whose coordinator dies: the members find the new coordinator, rejoin
    and go on from the committed offsets."""
    topic, group = topic_and_group(cluster.bootstrap, "move", PARTITIONS, rf=3)
    sent = produce(cluster.bootstrap, topic, 120, PARTITIONS)
    ownership = Ownership()
    members = [
        ConfluentMember(
            cluster.bootstrap, group, topic, f"m{i}", ownership, **{"auto.commit.interval.ms": 100}
        )
        for i in range(3)
    ]
    for m in members:
        m.start()
    client = WireClient.for_bootstrap(cluster.bootstrap)
    try:
        wait_until(lambda: all_values(members) >= sent, what="every record")
        time.sleep(0.5)  # let auto-commit store the positions
        coordinator_id = _coordinator(client, group)
        cluster.broker(coordinator_id).kill()
        more = produce_when_possible(cluster.bootstrap, topic)
        wait_until(lambda: all_values(members) >= sent | more, timeout=90, what="records after")
    finally:
        client.close()
        for m in members:
            m.stop()
        cluster.broker(coordinator_id).start()
    committed = committed_offsets(cluster.bootstrap, group, topic, PARTITIONS)
    assert sum(committed.values()) == 240


def produce_when_possible(bootstrap: str, topic: str) -> set[bytes]:
    deadline = time.monotonic() + 60
    while True:
        try:
            return produce(bootstrap, topic, 120, PARTITIONS, start=1000)
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def test_offsets_of_a_deleted_topic_leave_every_group(cluster):
    """Kafka's handleDeletedPartitions: once a topic is deleted its committed offsets
    are gone from the group, and tombstones keep them gone for the next coordinator."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    gone, group = topic_and_group(cluster.bootstrap, "deleted", 3, rf=3)
    kept, _ = topic_and_group(cluster.bootstrap, "kept", 2, rf=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tps = [TopicPartition(gone, p, 5 + p) for p in range(3)]
    tps += [TopicPartition(kept, p, 7) for p in range(2)]
    request = ConsumerGroupTopicPartitions(group, tps)
    admin.alter_consumer_group_offsets([request])[group].result(30)

    def committed() -> dict:
        fs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        result = fs[group].result(30)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}

    assert committed() == {**{(gone, p): 5 + p for p in range(3)}, (kept, 0): 7, (kept, 1): 7}
    admin.delete_topics([gone])[gone].result(30)
    wait_until(lambda: all(t != gone for t, _ in committed()), what="the deleted topic's offsets")
    assert committed() == {(kept, 0): 7, (kept, 1): 7}
    client = WireClient.for_bootstrap(cluster.bootstrap)
    coordinator_id = _coordinator(client, group)
    client.close()
    # The tombstones are written without waiting for followers (as Kafka's cleanup does);
    # once every replica has them, kill -9 the coordinator: the next one loads the log.
    wait_until(
        lambda: _replicated(cluster, partition_for(group, OFFSETS_PARTITIONS), coordinator_id),
        what="the tombstones on every replica",
    )
    cluster.broker(coordinator_id).kill()
    try:
        survivor = next(b for b in cluster.brokers if b.id != coordinator_id)
        client = WireClient("127.0.0.1", survivor.port)
        try:
            wait_until(
                lambda: _coordinator(client, group) not in (-1, coordinator_id),
                what="a new coordinator",
                interval=0.25,
            )
        finally:
            client.close()
        wait_until(lambda: _safe(committed) is not None, what="the group to load")
        assert committed() == {(kept, 0): 7, (kept, 1): 7}
    finally:
        cluster.broker(coordinator_id).start()


def _replicated(cluster, partition: int, leader_id: int) -> bool:
    """Every replica's log end offset of __consumer_offsets-<partition> is the leader's."""
    ends = []
    for b in cluster.brokers:
        client = WireClient("127.0.0.1", b.port)
        try:
            ends.append(client.list_offset("__consumer_offsets", partition, -1, replica_id=-2))
        finally:
            client.close()
    leader = WireClient("127.0.0.1", cluster.broker(leader_id).port)
    try:
        hw = leader.list_offset("__consumer_offsets", partition, -1).offset
    finally:
        leader.close()
    return all(e.error_code == E.none and e.offset == hw for e in ends)


def _safe(read):
    try:
        return read()
    except Exception:  # noqa: BLE001 - the coordinator is still loading
        return None
