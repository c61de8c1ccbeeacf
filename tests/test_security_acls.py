"""ACLs end to end on a real broker with Kafka's AclAuthorizer on.

Over PLAINTEXT every client is User:ANONYMOUS, so the tests tell clients apart by host:
confluent-kafka and most raw requests come from 127.0.0.1, which holds Cluster ALL (as
the broker's own inter-broker requests need ClusterAction); raw requests from
127.0.0.2 have no Cluster ACL. ``allow.everyone.if.no.acl.found=true``: a resource
without ACLs is open, one with ACLs is open only to what they allow.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from tests.acl_helpers import (
    ANON,
    OTHER_HOST,
    add_acl,
    describe_acls,
    metadata_request,
    new_topic,
    one_batch,
    ready_topic,
    secured_cluster,
    wait_leader,
    wire_client,
)
from tests.cli_helpers import tool


@pytest.fixture(scope="module")
def secured(cluster_factory):
    return secured_cluster(cluster_factory)


# -- the ACL APIs and ZooKeeper ----------------------------------------------------------------
def test_acls_are_kept_in_zookeeper_as_kafka_keeps_them(secured):
    c, admin = secured
    zk = c.zk_client()
    name = f"zk-{uuid.uuid4().hex[:8]}"
    add_acl(admin, ResourceType.TOPIC, name, AclOperation.READ, principal="User:alice")
    add_acl(admin, ResourceType.GROUP, name, AclOperation.READ, principal="User:alice",
         pattern=ResourcePatternType.PREFIXED, allow=False, host="10.0.0.1")  # fmt: skip
    data, _ = zk.get(f"/kafka-acl/Topic/{name}")
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    data, _ = zk.get(f"/kafka-acl-extended/prefixed/Group/{name}")
    assert json.loads(data)["acls"] == [
        {
            "principal": "User:alice",
            "permissionType": "Deny",
            "operation": "Read",
            "host": "10.0.0.1",
        }  # fmt: skip
    ]
    literal = [zk.get(f"/kafka-acl-changes/{n}")[0] for n in zk.get_children("/kafka-acl-changes")]
    assert f"TOPIC:{name}".encode() in literal
    assert all(n.startswith("acl_changes_") for n in zk.get_children("/kafka-acl-changes"))
    extended = [
        json.loads(zk.get(f"/kafka-acl-extended-changes/{n}")[0])
        for n in zk.get_children("/kafka-acl-extended-changes")
    ]
    assert {"version": 1, "resourceType": "GROUP", "name": name,
            "patternType": "PREFIXED"} in extended  # fmt: skip

    found = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            name,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )  # fmt: skip
    ).result(timeout=30)
    assert {(b.restype, b.resource_pattern_type, b.permission_type) for b in found} == {
        (ResourceType.TOPIC, ResourcePatternType.LITERAL, AclPermissionType.ALLOW),
        (ResourceType.GROUP, ResourcePatternType.PREFIXED, AclPermissionType.DENY),
    }
    assert len(found) == 2

    # MATCH: the prefixed group ACL applies to a longer group name
    matched = admin.describe_acls(
        AclBindingFilter(
            ResourceType.GROUP,
            name + "-x",
            ResourcePatternType.MATCH,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )  # fmt: skip
    ).result(timeout=30)
    assert [(b.name, b.resource_pattern_type) for b in matched] == [
        (name, ResourcePatternType.PREFIXED)
    ]

    flt = AclBindingFilter(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    deleted = admin.delete_acls([flt])[flt].result(timeout=30)
    assert [(b.name, b.principal, b.operation) for b in deleted] == [
        (name, "User:alice", AclOperation.READ)
    ]
    assert zk.exists(f"/kafka-acl/Topic/{name}") is None  # no ACL left: the znode goes


def test_an_acl_with_an_unknown_operation_or_type_is_refused_and_nothing_written(secured):
    c, admin = secured
    zk = c.zk_client()
    wire = wire_client(c)
    name = f"bad-{uuid.uuid4().hex[:8]}"
    good = {"resource_type": 2, "resource_name": name, "resource_pattern_type": 3,
            "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}  # fmt: skip
    for bad in (
        {"operation": 99},
        {"resource_type": 42},
        {"permission_type": 1},  # ANY is a filter value, not a permission
        {"resource_pattern_type": 2},  # MATCH
        {"principal": "alice"},
        {"resource_type": 4},  # a cluster ACL must name kafka-cluster
    ):
        resp = wire.request(30, 1, {"creations": [{**good, **bad}]})
        assert resp.results[0].error_code == ErrorCode.invalid_request, bad
        assert resp.results[0].error_message
    assert zk.exists(f"/kafka-acl/Topic/{name}") is None
    resp = describe_acls(wire, resource_type_filter=2, resource_name_filter=name, operation=99)
    assert resp.error_code == ErrorCode.invalid_request
    assert wire.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    wire.close()


def test_acl_apis_need_cluster_rights(secured):
    c, _admin = secured
    other = wire_client(c, OTHER_HOST)  # no Cluster ACL for this host
    resp = describe_acls(other)
    assert resp.error_code == ErrorCode.cluster_authorization_failed
    resp = other.request(30, 1, {"creations": [{
        "resource_type": 2, "resource_name": "x", "resource_pattern_type": 3,
        "principal": ANON, "host": "*", "operation": 2, "permission_type": 3}]})  # fmt: skip
    assert resp.results[0].error_code == ErrorCode.cluster_authorization_failed
    other.close()


# -- topics ---------------------------------------------------------------------------------
def test_deny_write_refuses_produce_and_removing_it_lets_it_through(secured):
    c, admin = secured
    topic, wire = ready_topic(c, admin, "deny")
    deny = add_acl(admin, ResourceType.TOPIC, topic, AclOperation.WRITE, allow=False)
    assert wire.produce(topic, 0, one_batch()).error_code == ErrorCode.topic_authorization_failed
    producer = Producer({"bootstrap.servers": c.bootstrap, "message.timeout.ms": 10000})
    errors = []
    producer.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == 29  # TOPIC_AUTHORIZATION_FAILED
    # the topic has an ACL now, so allow.everyone.if.no.acl.found no longer opens it:
    # Read is refused too, though the deny names Write only (Kafka's semantics)
    assert wire.fetch(topic, 0, 0).error_code == ErrorCode.topic_authorization_failed

    admin.delete_acls([deny_filter := _filter_of(deny)])[deny_filter].result(timeout=30)
    r = wire.produce(topic, 0, one_batch(b"after"))
    assert r.error_code == ErrorCode.none and r.base_offset == 0
    wire.close()


def _filter_of(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                            b.operation, b.permission_type)  # fmt: skip


def test_a_topic_with_acls_for_others_only_is_hidden_and_refused(secured):
    c, admin = secured
    hidden = new_topic(admin, "hidden")
    visible = new_topic(admin, "visible")
    wire = wire_client(c)
    wait_leader(wire, hidden)
    add_acl(admin, ResourceType.TOPIC, hidden, AclOperation.ALL, principal="User:bob")
    listed = {t.name for t in metadata_request(wire, None).topics}
    assert visible in listed and hidden not in listed
    asked = metadata_request(wire, [hidden, visible]).topics
    assert [(t.name, t.error_code) for t in asked] == [
        (hidden, ErrorCode.topic_authorization_failed),
        (visible, ErrorCode.none),
    ]
    assert wire.produce(hidden, 0, one_batch()).error_code == ErrorCode.topic_authorization_failed
    assert wire.fetch(hidden, 0, 0).error_code == ErrorCode.topic_authorization_failed
    offset = wire.list_offset(hidden, 0, -1)
    assert offset.error_code == ErrorCode.topic_authorization_failed
    wire.close()


def test_prefixed_acls_match_names_that_start_with_the_prefix(secured):
    c, admin = secured
    prefix = f"pfx{uuid.uuid4().hex[:6]}-"
    inside = new_topic(admin, prefix + "in", exact=True)
    outside = new_topic(admin, prefix[:-1], exact=True)  # without its dash: not covered
    wire = wire_client(c)
    wait_leader(wire, inside)
    wait_leader(wire, outside)
    add_acl(admin, ResourceType.TOPIC, prefix, AclOperation.WRITE, allow=False,
         pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    assert wire.produce(inside, 0, one_batch()).error_code == ErrorCode.topic_authorization_failed
    assert wire.produce(outside, 0, one_batch()).error_code == ErrorCode.none
    wire.close()


def test_deny_overrides_allow(secured):
    c, admin = secured
    topic, wire = ready_topic(c, admin, "both")
    assert wire.produce(topic, 0, one_batch()).error_code == ErrorCode.none
    add_acl(admin, ResourceType.TOPIC, topic, AclOperation.ALL)
    add_acl(admin, ResourceType.TOPIC, topic, AclOperation.WRITE, allow=False)
    assert wire.produce(topic, 0, one_batch()).error_code == ErrorCode.topic_authorization_failed
    fetched = wire.fetch(topic, 0, 0)
    assert fetched.error_code == ErrorCode.none and fetched.high_watermark == 1
    wire.close()


def test_host_of_an_acl_must_match_the_client_address(secured):
    c, admin = secured
    topic = new_topic(admin, "host")
    add_acl(admin, ResourceType.TOPIC, topic, AclOperation.ALL, host=OTHER_HOST)
    here, there = wire_client(c), wire_client(c, OTHER_HOST)
    wait_leader(there, topic)
    assert here.produce(topic, 0, one_batch()).error_code == ErrorCode.topic_authorization_failed
    assert there.produce(topic, 0, one_batch()).error_code == ErrorCode.none
    here.close()
    there.close()


def test_creating_a_topic_needs_create(secured):
    c, admin = secured
    prefix = f"nocreate{uuid.uuid4().hex[:6]}-"
    add_acl(admin, ResourceType.TOPIC, prefix, AclOperation.CREATE, allow=False,
         pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    other = wire_client(c, OTHER_HOST)  # no Cluster Create from there, and the topic's is denied
    assert other.create_topic(prefix + "a").error_code == ErrorCode.topic_authorization_failed
    assert other.create_topic(f"free-{uuid.uuid4().hex[:6]}").error_code == ErrorCode.none
    # from 127.0.0.1 Cluster Create (ALL) is enough, as in Kafka
    assert wire_client(c).create_topic(prefix + "b").error_code == ErrorCode.none
    listed = {t.name for t in metadata_request(other, None).topics}
    assert prefix + "a" not in listed


def test_created_topic_configs_need_describe_configs(secured):
    """CreateTopics answers a topic's configs and layout only to a principal that may
    DescribeConfigs it; otherwise topic_config_error_code says why (Kafka 2.4+)."""
    c, admin = secured
    prefix = f"noconf{uuid.uuid4().hex[:6]}-"
    add_acl(admin, ResourceType.TOPIC, prefix, AclOperation.DESCRIBE_CONFIGS, host=OTHER_HOST,
            allow=False, pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    add_acl(
        admin,
        ResourceType.TOPIC,
        prefix,
        AclOperation.CREATE,
        host=OTHER_HOST,
        pattern=ResourcePatternType.PREFIXED,
    )  # fmt: skip  (an ACL there: no allow-everyone)
    other = wire_client(c, OTHER_HOST)
    hidden = other.create_topic(prefix + "a", partitions=2)
    assert hidden.error_code == ErrorCode.none
    assert hidden.topic_config_error_code == ErrorCode.topic_authorization_failed
    assert (hidden.num_partitions, hidden.replication_factor, hidden.configs) == (-1, -1, ())
    shown = other.create_topic(f"conf-{uuid.uuid4().hex[:6]}", partitions=2)  # no ACLs there
    assert (shown.topic_config_error_code, shown.num_partitions) == (ErrorCode.none, 2)
    assert "cleanup.policy" in {cfg.name for cfg in shown.configs}


# -- groups and transactions ----------------------------------------------------------------
def test_group_read_denied_refuses_join_and_commit(secured):
    c, admin = secured
    topic = new_topic(admin, "grp")
    group = f"g-{uuid.uuid4().hex[:8]}"
    add_acl(admin, ResourceType.GROUP, group, AclOperation.READ, allow=False)
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    seen = None
    deadline = time.monotonic() + 30
    while seen is None and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is not None:
            seen = msg.error()
    consumer.close()
    assert seen is not None and seen.code() == 30  # GROUP_AUTHORIZATION_FAILED
    wire = wire_client(c)
    resp = wire.request(12, 4, {"group_id": group, "generation_id": 1, "member_id": "m",
                                "group_instance_id": None})  # fmt: skip
    assert resp.error_code == ErrorCode.group_authorization_failed
    wire.close()


def test_transactional_id_write_denied(secured):
    c, admin = secured
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    add_acl(admin, ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.WRITE, allow=False)
    wire = wire_client(c)
    resp = wire.request(22, 4, {"transactional_id": txn_id, "transaction_timeout": 60000,
                                "producer_id": -1, "producer_epoch": -1})  # fmt: skip
    assert resp.error_code == ErrorCode.transactional_id_authorization_failed
    producer = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": txn_id})
    with pytest.raises(KafkaException) as info:
        producer.init_transactions(30)
    assert info.value.args[0].code() == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    wire.close()


# -- the controller's requests need ClusterAction --------------------------------------------
def _leader_and_isr(topic: str, leader: int, epoch: int) -> dict:
    state = {"partition_index": 0, "controller_epoch": 1000, "leader": leader,
             "leader_epoch": epoch, "isr": [leader], "zk_version": 99, "replicas": [leader],
             "adding_replicas": [], "removing_replicas": [], "is_new": False}  # fmt: skip
    return {
        "controller_id": 99,
        "controller_epoch": 1000,
        "broker_epoch": -1,
        "topic_states": [{"topic_name": topic, "partition_states": [state]}],
        "live_leaders": [{"broker_id": 99, "host_name": "127.0.0.1", "port": 1}],
    }


def test_replayed_controller_requests_without_cluster_action_change_nothing(secured):
    c, admin = secured
    topic = new_topic(admin, "lai")
    here = wire_client(c)
    before = wait_leader(here, topic)
    other = wire_client(c, OTHER_HOST)
    resp = other.request(4, 4, _leader_and_isr(topic, leader=99, epoch=before.leader_epoch + 5))
    assert resp.error_code == ErrorCode.cluster_authorization_failed
    resp = other.request(6, 7, {"controller_id": 99, "controller_epoch": 1000,
                                "broker_epoch": -1, "topic_states": [], "live_brokers": []})  # fmt: skip
    assert resp.error_code == ErrorCode.cluster_authorization_failed
    resp = other.request(5, 3, {"controller_id": 99, "controller_epoch": 1000,
                                "broker_epoch": -1, "topic_states": [{
                                    "topic_name": topic, "partition_states": [{
                                        "partition_index": 0, "leader_epoch": -2,
                                        "delete_partition": True}]}]})  # fmt: skip
    assert resp.error_code == ErrorCode.cluster_authorization_failed
    resp = other.request(7, 3, {"broker_id": 1, "broker_epoch": -1})
    assert resp.error_code == ErrorCode.cluster_authorization_failed
    # a follower fetch needs ClusterAction too
    resp = other.request(1, 12, {
        "replica_id": 2, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1000}]}],
        "forgotten_topics_data": [], "rack_id": ""})  # fmt: skip
    assert resp.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    other.close()

    after = metadata_request(here, [topic]).topics[0].partitions[0]
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)
    assert len(metadata_request(here, None).brokers) == 1  # UpdateMetadata did not empty the cache
    r = here.produce(topic, 0, one_batch())
    assert (r.error_code, r.base_offset) == (ErrorCode.none, 0)  # still the leader, log kept
    # the refused requests did not raise the controller epoch: the real controller's
    # next requests (a new topic) are still obeyed
    wait_leader(here, new_topic(admin, "lai-after"))
    here.close()


# -- quill-acls ------------------------------------------------------------------------------
def test_quill_acls_add_list_remove(secured):
    c, admin = secured
    topic, wire = ready_topic(c, admin, "cli")
    run = tool("acls", c.bootstrap, f"--add --allow-principal User:bob --producer --topic {topic}")
    assert run.code == 0, run.err
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`: \n" in run.out
    for op in ("CREATE", "DESCRIBE", "WRITE"):
        assert f"\t(principal=User:bob, host=*, operation={op}, permissionType=ALLOW)" in run.out
    assert f"Current ACLs for resource `{pattern}`: \n" in run.out
    # ACLs for bob now exist on the topic: ANONYMOUS is refused
    assert wire.produce(topic, 0, one_batch()).error_code == ErrorCode.topic_authorization_failed

    listed = tool("acls", c.bootstrap, f"--list --topic {topic}")
    assert listed.code == 0, listed.err
    assert listed.out.count("principal=User:bob") == 3

    run = tool("acls", c.bootstrap, f"--add --allow-principal {ANON} --operation Write "
               f"--topic {topic}")  # fmt: skip
    assert run.code == 0, run.err
    assert wire.produce(topic, 0, one_batch()).error_code == ErrorCode.none

    kept = tool("acls", c.bootstrap, f"--remove --topic {topic}", stdin="n\n")
    assert "Are you sure you want to delete all ACLs for resource filter" in kept.out
    assert tool("acls", c.bootstrap, f"--list --topic {topic}").out.count("principal=") == 4
    log = Path(c.brokers[0].log_path).read_text(errors="replace")
    assert (
        f"Principal = User:ANONYMOUS is Denied Operation = Write from host = 127.0.0.1 "
        f"on resource = Topic:{topic}"
    ) in log

    run = tool("acls", c.bootstrap, f"--remove --force --topic {topic}")
    assert run.code == 0, run.err
    listed = tool("acls", c.bootstrap, f"--list --topic {topic}")
    assert "principal=" not in listed.out
    assert wire.produce(topic, 0, one_batch()).error_code == ErrorCode.none  # open again

    bad = tool("acls", c.bootstrap, f"--add --allow-principal User:bob --operation Fly "
               f"--topic {topic}")  # fmt: skip
    assert bad.code == 1 and "Fly" in bad.err
    bad = tool("acls", c.bootstrap, "--add --allow-principal User:bob --operation Read --cluster")
    assert bad.code == 1 and "Cluster" in bad.err
    wire.close()


def test_acl_apis_without_an_authorizer_answer_security_disabled(cluster):
    c = cluster(1)
    wire = wire_client(c)
    resp = describe_acls(wire)
    assert resp.error_code == ErrorCode.security_disabled
    # KIP-430 without an authorizer: every operation of the resource type, as Kafka says
    assert wire.create_topic("ops-open").error_code == ErrorCode.none
    wait_leader(wire, "ops-open")
    resp = wire.request(3, 10, {"topics": [{"name": "ops-open", "topic_id": None}],
                                "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": True,
                                "include_topic_authorized_operations": True})  # fmt: skip
    assert resp.topics[0].topic_authorized_operations == sum(
        1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11)
    )
    assert resp.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    deadline = time.monotonic() + 60
    while True:  # the group's coordinator comes with the offsets topic, made on demand
        wire.request(10, 3, {"key": "g", "key_type": 0})
        group = wire.request(15, 5, {"groups": ["g"], "include_authorized_operations": True})
        if group.groups[0].error_code == ErrorCode.none:
            break
        assert time.monotonic() < deadline, group
        time.sleep(0.5)
    assert group.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    plain = wire.request(60, 0, {"include_cluster_authorized_operations": False})
    assert plain.cluster_authorized_operations == -(2**31)  # not asked: "unknown"
    wire.close()


def test_kafka_python_admin_creates_describes_and_deletes_acls(secured):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ACLResourcePatternType as Pattern
    from kafka.admin import ResourceType as KpType

    c, _admin = secured
    name = f"kp-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        acl = ACL("User:dave", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(KpType.TOPIC, name, Pattern.PREFIXED))  # fmt: skip
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        selector = ACLFilter("User:dave", None, ACLOperation.ANY, ACLPermissionType.ANY,
                             ResourcePatternFilter(KpType.TOPIC, name, Pattern.ANY))  # fmt: skip
        found, error = admin.describe_acls(selector)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:dave", ACLOperation.READ, name)
        ]
        deleted = admin.delete_acls([selector])
        assert [len(matches) for _f, matches, _e in deleted] == [1]
        found, _error = admin.describe_acls(selector)
        assert found == []
    finally:
        admin.close()


def test_authorized_operations_bit_fields(secured):
    c, admin = secured
    topic, wire = ready_topic(c, admin, "ops")
    add_acl(admin, ResourceType.TOPIC, topic, AclOperation.READ)
    resp = wire.request(3, 10, {"topics": [{"name": topic, "topic_id": None}],
                                "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": True,
                                "include_topic_authorized_operations": True})  # fmt: skip
    read, describe = 1 << 3, 1 << 8  # Kafka's AclOperation codes; Read implies Describe
    assert resp.topics[0].topic_authorized_operations == read | describe
    cluster_ops = (5, 7, 8, 9, 10, 11, 12)  # every Cluster operation: 127.0.0.1 has ALL
    assert resp.cluster_authorized_operations == sum(1 << op for op in cluster_ops)
    other = wire_client(c, OTHER_HOST)
    resp = other.request(60, 0, {"include_cluster_authorized_operations": True})
    assert resp.cluster_authorized_operations == 0
    other.close()
    wire.close()
