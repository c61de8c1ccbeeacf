"""Transactions on a 3-broker cluster: ``__transaction_state`` replicated and
compacted, and kill -9 of the transaction coordinator's broker in the middle of a
commit: the next coordinator loads the state from its replica and completes or
aborts the transaction; read_committed consumers never see half of it."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaException
from kio.schema.errors import ErrorCode as E

from tests.group_helpers import create_topic, unique
from tests.txn_helpers import (
    TXN_BROKER,
    end_offsets,
    init_pid,
    read_all,
    txn_producer,
    wait_txn_coordinator,
)
from tests.wait_helpers import wait_until
from tests.wire import WireClient

PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(cluster_factory):
    return cluster_factory(3, **TXN_BROKER, **{"zookeeper.session.timeout.ms": "4000"})


def _coordinator(bootstrap: str, txn_id: str) -> int:
    client = WireClient.for_bootstrap(bootstrap)
    try:
        return wait_txn_coordinator(client, txn_id).node_id
    finally:
        client.close()


def _end_offsets_or_none(bootstrap: str, topic: str, partitions: int, isolation: str):
    """end_offsets, or None while a leader is being elected after a kill."""
    try:
        return end_offsets(bootstrap, topic, partitions, isolation)
    except KafkaException:
        return None


def test_transaction_state_topic_is_replicated_and_compacted(cluster):
    from confluent_kafka.admin import AdminClient, ConfigResource

    assert _coordinator(cluster.bootstrap, unique("tx")) > 0
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # the broker that answers may not have had the controller's UpdateMetadata yet
    meta = wait_until(
        lambda: admin.list_topics(timeout=30).topics.get("__transaction_state"),
        what="__transaction_state in the metadata",
    )
    assert len(meta.partitions) == 5
    assert all(len(p.replicas) == 3 for p in meta.partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, "__transaction_state")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["min.insync.replicas"].value == "2"


def test_coordinator_killed_mid_commit_leaves_all_or_nothing(cluster):
    topic = unique("t-kill")
    create_topic(cluster.bootstrap, topic, PARTITIONS, rf=3)
    txn_id = unique("tx")
    coordinator_id = _coordinator(cluster.bootstrap, txn_id)
    # librdkafka needs about 10 s to find the new coordinator (reconnect backoff to
    # the dead one): a shorter timeout would let the coordinator abort and fence first
    producer = txn_producer(cluster.bootstrap, txn_id, **{"transaction.timeout.ms": 30000})
    producer.begin_transaction()
    sent = [f"v-{i}".encode() for i in range(60)]
    for i, v in enumerate(sent):
        producer.produce(topic, v, partition=i % PARTITIONS)
    producer.flush(30)
    outcome: list = []

    def commit() -> None:
        try:
            producer.commit_transaction(60)
            outcome.append("committed")
        except KafkaException as exc:
            outcome.append(exc.args[0])

    committer = threading.Thread(target=commit)
    committer.start()
    cluster.broker(coordinator_id).kill()
    try:
        committer.join(90)
        assert outcome, "commit_transaction did not return"
        committed = outcome[0] == "committed" if isinstance(outcome[0], str) else False
        if not committed and outcome[0].txn_requires_abort():
            producer.abort_transaction(60)
        survivors = ",".join(b.address for b in cluster.brokers if b.id != coordinator_id)
        # the new coordinator finishes the job: every partition stable again
        wait_until(
            lambda: (
                end_offsets(survivors, topic, PARTITIONS, "read_committed")
                == end_offsets(survivors, topic, PARTITIONS, "read_uncommitted")
            ),
            timeout=60,
            what="the transaction to complete",
        )
        got = read_all(survivors, topic, PARTITIONS, "read_committed")
        assert sorted(got) in ([], sorted(sent))  # never half of it
        if committed:
            assert sorted(got) == sorted(sent)
        # the producer goes on with the new coordinator
        producer.begin_transaction()
        producer.produce(topic, b"after", partition=0)
        producer.commit_transaction(60)
        got = read_all(survivors, topic, PARTITIONS, "read_committed")
        assert b"after" in got and len(got) in (1, len(sent) + 1)
    finally:
        cluster.broker(coordinator_id).start()


def test_new_coordinator_writes_the_markers_of_a_prepared_commit(cluster):
    """EndTxn is answered once PrepareCommit is committed; the markers cannot reach the
    data partition's leader (paused), the coordinator dies: the next one loads
    PrepareCommit, writes the markers and CompleteCommit."""
    from confluent_kafka.admin import AdminClient, NewTopic

    txn_id = unique("tx")
    coordinator_id = _coordinator(cluster.bootstrap, txn_id)
    data_leader = next(b for b in cluster.brokers if b.id != coordinator_id)
    topic = unique("t-prepared")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[data_leader.id]])])[
        topic
    ].result(30)
    producer = txn_producer(cluster.bootstrap, txn_id, **{"transaction.timeout.ms": 60000})
    producer.begin_transaction()
    sent = [f"p-{i}".encode() for i in range(10)]
    for v in sent:
        producer.produce(topic, v, partition=0)
    producer.flush(30)
    data_leader.pause()
    try:
        producer.commit_transaction(30)  # returns once PrepareCommit is written
        cluster.broker(coordinator_id).kill()
    finally:
        data_leader.resume()
    try:
        survivors = ",".join(b.address for b in cluster.brokers if b.id != coordinator_id)
        wait_until(
            lambda: (
                _end_offsets_or_none(survivors, topic, 1, "read_committed") == {0: len(sent) + 1}
            ),
            timeout=60,
            what="the new coordinator to write the COMMIT marker",
        )
        assert sorted(read_all(survivors, topic, 1, "read_committed")) == sorted(sent)
    finally:
        cluster.broker(coordinator_id).start()


def test_other_brokers_are_not_the_coordinator(cluster):
    txn_id = unique("tx")
    coordinator_id = _coordinator(cluster.bootstrap, txn_id)
    for b in cluster.brokers:
        if b.id == coordinator_id:
            continue
        client = WireClient("127.0.0.1", b.port)
        try:
            assert init_pid(client, txn_id).error_code == E.not_coordinator
        finally:
            client.close()
