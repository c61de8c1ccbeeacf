"""Every API refuses what Kafka's KafkaApis refuses, with Kafka's error code where Kafka
puts it, and the response still parses as the version asked for.

Raw requests come from 127.0.0.2, which has no Cluster ACL; the topic, group and
transactional id under test have ACLs for User:bob only, so ANONYMOUS is refused on
them while resources without ACLs stay open (allow.everyone.if.no.acl.found=true).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AclOperation, ResourceType
from kio.schema.errors import ErrorCode as E

from broker.zk.znodes import TopicZNode, topic_id_bytes
from tests.acl_helpers import (
    OTHER_HOST,
    add_acl,
    new_topic,
    secured_cluster,
    wait_leader,
    wire_client,
)

T = f"closed-{uuid.uuid4().hex[:6]}"  # a topic with ACLs for bob only
OPEN = f"open-{uuid.uuid4().hex[:6]}"  # a topic without ACLs
G = f"g-closed-{uuid.uuid4().hex[:6]}"  # a group with ACLs for bob only
X = f"tx-closed-{uuid.uuid4().hex[:6]}"  # a transactional id with ACLs for bob only


@pytest.fixture(scope="module")
def setup(cluster_factory):
    c, admin = secured_cluster(cluster_factory)
    for name in (T, OPEN):
        new_topic(admin, name, exact=True)
    here = wire_client(c)
    for name in (T, OPEN):
        wait_leader(here, name)
    # the group exists (offsets committed from 127.0.0.1 before its ACL): ListGroups must hide it
    _commit_until_done(here, G, T)
    for rtype, name in (
        (ResourceType.TOPIC, T),
        (ResourceType.GROUP, G),
        (ResourceType.TRANSACTIONAL_ID, X),
    ):
        add_acl(admin, rtype, name, AclOperation.ALL, principal="User:bob")
    other = wire_client(c, OTHER_HOST)
    yield c, here, other
    other.close()
    here.close()


def _commit_until_done(wire, group: str, topic: str) -> None:
    """Commit offset 0 for the group, waiting for its coordinator (the offsets topic is
    created on the first FindCoordinator)."""
    deadline = time.monotonic() + 60
    while True:
        wire.request(10, 3, {"key": group, "key_type": 0})
        code = wire.request(8, 8, _commit(group, topic)).topics[0].partitions[0].error_code
        if code == E.none:
            return
        assert time.monotonic() < deadline, f"offset commit still fails: {code!r}"
        time.sleep(0.5)


def _commit(group: str, topic: str) -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": topic, "partitions": [{"partition_index": 0,
                                                       "committed_offset": 0}]}]}  # fmt: skip


def _p0(topic: str, index: str = "partition_index", **extra) -> list[dict]:
    return [{"name": topic, "partitions": [{index: 0, **extra}]}]


CASES = [
    # (label, api key, version, body, path to the error code, expected)
    ("DeleteTopics v6", 20, 6, {"topics": [{"name": T}], "timeout": 5000},
     "responses.0.error_code", E.topic_authorization_failed),
    ("DeleteTopics v4", 20, 4, {"topic_names": [T], "timeout": 5000},
     "responses.0.error_code", E.topic_authorization_failed),
    ("CreatePartitions", 37, 3, {"topics": [{"name": T, "count": 3, "assignments": None}],
                                 "timeout": 5000},
     "results.0.error_code", E.topic_authorization_failed),
    ("DescribeConfigs topic", 32, 4, {"resources": [{"resource_type": 2, "resource_name": T,
                                                     "configuration_keys": None}]},
     "results.0.error_code", E.topic_authorization_failed),
    ("DescribeConfigs broker", 32, 1, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                      "configuration_keys": None}]},
     "results.0.error_code", E.cluster_authorization_failed),
    ("AlterConfigs", 33, 1, {"resources": [{"resource_type": 2, "resource_name": T, "configs": [
        {"name": "retention.ms", "value": "1000"}]}]},
     "responses.0.error_code", E.topic_authorization_failed),
    ("IncrementalAlterConfigs", 44, 1, {"resources": [{"resource_type": 2, "resource_name": T,
        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}]}]},
     "responses.0.error_code", E.topic_authorization_failed),
    ("DeleteRecords", 21, 2, {"topics": _p0(T, offset=-1), "timeout": 5000},
     "topics.0.partitions.0.error_code", E.topic_authorization_failed),
    ("OffsetForLeaderEpoch consumer", 23, 4, {"replica_id": -1, "topics": [{"topic": T,
        "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
     "topics.0.partitions.0.error_code", E.topic_authorization_failed),
    ("OffsetForLeaderEpoch follower", 23, 4, {"replica_id": 2, "topics": [{"topic": OPEN,
        "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
     "topics.0.partitions.0.error_code", E.cluster_authorization_failed),
    ("OffsetCommit topic", 8, 8, _commit("g-open", T),
     "topics.0.partitions.0.error_code", E.topic_authorization_failed),
    ("OffsetCommit group", 8, 8, _commit(G, OPEN),
     "topics.0.partitions.0.error_code", E.group_authorization_failed),
    ("OffsetCommit v2 group", 8, 2, {"group_id": G, "generation_id_or_member_epoch": -1,
        "member_id": "", "retention_time_ms": -1, "topics": _p0(OPEN, committed_offset=0)},
     "topics.0.partitions.0.error_code", E.group_authorization_failed),
    ("OffsetFetch v6 group", 9, 6, {"group_id": G, "topics": None},
     "error_code", E.group_authorization_failed),
    ("OffsetFetch v1 group", 9, 1, {"group_id": G, "topics": [{"name": OPEN,
                                                                "partition_indexes": [0]}]},
     "topics.0.partitions.0.error_code", E.group_authorization_failed),
    ("OffsetFetch v8 group", 9, 8, {"groups": [{"group_id": G, "topics": None}]},
     "groups.0.error_code", E.group_authorization_failed),
    ("OffsetFetch topic", 9, 6, {"group_id": "g-open", "topics": [{"name": T,
                                                                   "partition_indexes": [0]}]},
     "topics.0.partitions.0.error_code", E.topic_authorization_failed),
    ("FindCoordinator v3 group", 10, 3, {"key": G, "key_type": 0},
     "error_code", E.group_authorization_failed),
    ("FindCoordinator v3 txn", 10, 3, {"key": X, "key_type": 1},
     "error_code", E.transactional_id_authorization_failed),
    ("FindCoordinator v4", 10, 4, {"key_type": 0, "coordinator_keys": [G]},
     "coordinators.0.error_code", E.group_authorization_failed),
    ("Heartbeat", 12, 4, {"group_id": G, "generation_id": 1, "member_id": "m"},
     "error_code", E.group_authorization_failed),
    ("SyncGroup", 14, 5, {"group_id": G, "generation_id": 1, "member_id": "m",
                          "assignments": []},
     "error_code", E.group_authorization_failed),
    ("LeaveGroup", 13, 5, {"group_id": G, "members": [{"member_id": "m"}]},
     "error_code", E.group_authorization_failed),
    ("OffsetDelete", 47, 0, {"group_id": G, "topics": [{"name": OPEN, "partitions": [
        {"partition_index": 0}]}]},
     "error_code", E.group_authorization_failed),
    ("DescribeGroups", 15, 5, {"groups": [G]}, "groups.0.error_code", E.group_authorization_failed),
    ("DeleteGroups", 42, 2, {"groups_names": [G]}, "results.0.error_code",
     E.group_authorization_failed),
    ("InitProducerId txn", 22, 4, {"transactional_id": X, "transaction_timeout": 60000,
                                   "producer_id": -1, "producer_epoch": -1},
     "error_code", E.transactional_id_authorization_failed),
    ("InitProducerId idempotent", 22, 4, {"transactional_id": None, "transaction_timeout": -1,
                                          "producer_id": -1, "producer_epoch": -1},
     "error_code", E.cluster_authorization_failed),
    ("AddPartitionsToTxn txn", 24, 3, {"v3_and_below_transactional_id": X,
        "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": OPEN, "partitions": [0]}]},
     "results_by_topic_v3_and_below.0.results_by_partition.0.partition_error_code",
     E.transactional_id_authorization_failed),
    ("AddPartitionsToTxn topic", 24, 3, {"v3_and_below_transactional_id": "tx-open",
        "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": T, "partitions": [0]},
                                {"name": OPEN, "partitions": [0]}]},
     "results_by_topic_v3_and_below.*.results_by_partition.0.partition_error_code",
     [E.topic_authorization_failed, E.operation_not_attempted]),
    ("AddOffsetsToTxn txn", 25, 3, {"transactional_id": X, "producer_id": 1,
                                    "producer_epoch": 0, "group_id": "g-open"},
     "error_code", E.transactional_id_authorization_failed),
    ("AddOffsetsToTxn group", 25, 3, {"transactional_id": "tx-open", "producer_id": 1,
                                      "producer_epoch": 0, "group_id": G},
     "error_code", E.group_authorization_failed),
    ("EndTxn", 26, 3, {"transactional_id": X, "producer_id": 1, "producer_epoch": 0,
                       "committed": True},
     "error_code", E.transactional_id_authorization_failed),
    ("TxnOffsetCommit", 28, 3, {"transactional_id": X, "group_id": "g-open", "producer_id": 1,
        "producer_epoch": 0, "generation_id": -1, "member_id": "",
        "topics": _p0(OPEN, committed_offset=0)},
     "topics.0.partitions.0.error_code", E.transactional_id_authorization_failed),
    ("WriteTxnMarkers", 27, 1, {"markers": [{"producer_id": 1, "producer_epoch": 0,
        "transaction_result": True, "topics": [{"name": OPEN, "partition_indexes": [0]}],
        "coordinator_epoch": 0}]},
     "markers.0.topics.0.partitions.0.error_code", E.cluster_authorization_failed),
    ("DescribeTransactions", 65, 0, {"transactional_ids": [X]},
     "transaction_states.0.error_code", E.transactional_id_authorization_failed),
    ("ElectLeaders v2", 43, 2, {"election_type": 0, "topic_partitions": None, "timeout": 5000},
     "error_code", E.cluster_authorization_failed),
    ("ElectLeaders v0", 43, 0, {"topic_partitions": [{"topic": OPEN, "partitions": [0]}],
                                "timeout": 5000},
     "replica_election_results.0.partition_result.0.error_code", E.cluster_authorization_failed),
    ("AlterPartitionReassignments", 45, 0, {"timeout": 5000, "topics": []},
     "error_code", E.cluster_authorization_failed),
    ("ListPartitionReassignments", 46, 0, {"timeout": 5000, "topics": None},
     "error_code", E.cluster_authorization_failed),
    ("DescribeLogDirs v4", 35, 4, {"topics": None}, "error_code", E.cluster_authorization_failed),
    ("DescribeClientQuotas", 48, 1, {"components": [], "strict": False},
     "error_code", E.cluster_authorization_failed),
    ("DescribeUserScramCredentials", 50, 0, {"users": [{"name": "alice"}]},
     "error_code", E.cluster_authorization_failed),
    ("AlterUserScramCredentials", 51, 0, {"deletions": [{"name": "alice", "mechanism": 1}],
                                          "upsertions": []},
     "results.0.error_code", E.cluster_authorization_failed),
    ("AlterClientQuotas", 49, 1, {"entries": [{"entity": [{"entity_type": "client-id",
        "entity_name": "c"}], "ops": [{"key": "producer_byte_rate", "value": 1000.0,
                                       "remove": False}]}], "validate_only": False},
     "entries.0.error_code", E.cluster_authorization_failed),
]  # fmt: skip


def _at(resp, path: str):
    parts = path.split(".")
    value = resp
    for i, part in enumerate(parts):
        if part == "*":
            rest = ".".join(parts[i + 1 :])
            return [_at(item, rest) for item in value]
        value = value[int(part)] if part.isdigit() else getattr(value, part)
    return value


@pytest.mark.parametrize(("label", "api", "version", "body", "path", "expected"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_refused_with_kafkas_code(setup, label, api, version, body, path, expected):
    _c, _here, other = setup
    resp = other.request(api, version, body)
    assert _at(resp, path) == expected


def test_lists_hide_what_the_principal_may_not_describe(setup):
    c, _here, other = setup
    here = wire_client(c)  # Cluster Describe from 127.0.0.1: every group
    assert G in {g.group_id for g in here.request(16, 4, {"states_filter": []}).groups}
    listed = other.request(16, 4, {"states_filter": []})
    assert listed.error_code == E.none and G not in {g.group_id for g in listed.groups}
    # the group's offsets, asked for all topics by a client allowed on the group (bob's
    # ACL covers G only for bob, so use an open group): the closed topic is left out
    _commit_until_done(here, "g-open-2", OPEN)
    resp = other.request(9, 6, {"group_id": "g-open-2", "topics": None})
    assert [t.name for t in resp.topics] == [OPEN]
    here.close()


def test_refused_requests_changed_nothing(setup):
    c, here, _other = setup
    zk = c.zk_client()
    # DeleteTopics, CreatePartitions, AlterConfigs were refused: T is there as it was
    assert zk.exists(f"/brokers/topics/{T}") is not None
    assert zk.get_children(f"/brokers/topics/{T}/partitions") == ["0"]
    assert zk.exists(f"/admin/delete_topics/{T}") is None
    config = zk.get(f"/config/topics/{T}")[0] if zk.exists(f"/config/topics/{T}") else b"{}"
    assert b"retention.ms" not in config
    # DeleteGroups was refused: the group is still listed (Cluster Describe from 127.0.0.1)
    assert G in {g.group_id for g in here.request(16, 4, {"states_filter": []}).groups}


def test_delete_by_topic_id_is_checked_under_the_topics_name(setup):
    c, _here, other = setup
    data, _ = c.zk_client().get(f"/brokers/topics/{T}")
    topic_id = uuid.UUID(bytes=topic_id_bytes(TopicZNode.decode(data).topic_id))
    resp = other.request(20, 6, {"topics": [{"name": None, "topic_id": topic_id}],
                                 "timeout": 5000})  # fmt: skip
    assert resp.responses[0].error_code == E.topic_authorization_failed
    assert resp.responses[0].topic_id == topic_id
    assert c.zk_client().exists(f"/brokers/topics/{T}") is not None
