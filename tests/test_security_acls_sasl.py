"""ACLs for authenticated users: a SASL_PLAINTEXT listener with PLAIN users alice, bob
and admin, ``allow.everyone.if.no.acl.found=false`` and ``super.users`` naming admin
(and ANONYMOUS: the PLAINTEXT inter-broker listener, as Kafka needs it).

bob, without ACLs, is refused for produce, consume, group join, topic creation and
transactions; ``quill-acls`` (over SASL, --command-config) lets alice through for
exactly what it names; a DENY overrides her ALLOW; the super user needs no ACL.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cli_helpers import tool
from tests.security_helpers import sasl_listener_cluster

pytestmark = pytest.mark.cluster

USERS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}
# librdkafka's codes for Kafka's errors
TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 29, 30, 31, 53


@pytest.fixture(scope="module")
def secure(cluster_factory, tmp_path_factory):
    c = sasl_listener_cluster(
        cluster_factory,
        "PLAIN",
        USERS,
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:admin;User:ANONYMOUS",
            "auto.create.topics.enable": "false",
        },
    )
    admin_props = tmp_path_factory.mktemp("acl-sasl") / "admin.properties"
    admin_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=admin\nsasl.password=admin-secret\n"
    )
    c.admin_props = str(admin_props)
    return c


def _conf(c, user: str, **extra) -> dict:
    return {
        "bootstrap.servers": c.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


def _acls(c, args: str):
    run = tool("acls", c.sasl_bootstrap, f"--command-config {c.admin_props} {args}")
    assert run.code == 0, run.err
    return run


def _create_topic(c, user: str, name: str):
    """None when created, else librdkafka's error code."""
    admin = AdminClient(_conf(c, user))
    try:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    except KafkaException as exc:
        return exc.args[0].code()
    return None


def _produce_error(c, user: str, topic: str):
    """None when the record is acknowledged, else librdkafka's error code."""
    outcome = []
    producer = Producer(_conf(c, user, **{"message.timeout.ms": 15000}))
    producer.produce(topic, b"v", on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(30)
    assert outcome, "no delivery report"
    return None if outcome[0] is None else outcome[0].code()


def _consume(c, user: str, topic: str, group: str) -> tuple[int, int | None]:
    """(records read, the first error code) within a bounded wait."""
    consumer = Consumer(_conf(c, user, **{"group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    read, error = 0, None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and error is None and read == 0:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            error = msg.error().code()
        else:
            read += 1
    consumer.close()
    return read, error


def _init_transactions_error(c, user: str, txn_id: str):
    producer = Producer(_conf(c, user, **{"transactional.id": txn_id}))
    try:
        producer.init_transactions(30)
    except KafkaException as exc:
        return exc.args[0].code()
    return None


def test_super_user_needs_no_acl(secure):
    topic = f"su-{uuid.uuid4().hex[:8]}"
    assert _create_topic(secure, "admin", topic) is None
    assert _produce_error(secure, "admin", topic) is None
    assert _consume(secure, "admin", topic, f"g-{topic}") == (1, None)


def test_a_user_without_acls_is_refused_and_quill_acls_lets_exactly_that_through(secure):
    c = secure
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group, txn_id = f"g-{topic}", f"tx-{topic}"
    assert _create_topic(c, "admin", topic) is None
    assert _produce_error(c, "admin", topic) is None  # one record to read

    # topic creation, produce, consume (group join), transactions: all refused
    assert _create_topic(c, "bob", f"bob-{topic}") == TOPIC_AUTH
    assert _produce_error(c, "bob", topic) == TOPIC_AUTH
    assert _consume(c, "bob", topic, group)[1] in (GROUP_AUTH, TOPIC_AUTH)
    assert _init_transactions_error(c, "bob", txn_id) == TXN_AUTH

    _acls(c, f"--add --allow-principal User:alice --producer --topic {topic}")
    assert _produce_error(c, "alice", topic) is None
    assert _consume(c, "alice", topic, group)[1] == GROUP_AUTH  # no group ACL yet
    _acls(c, f"--add --allow-principal User:alice --consumer --topic {topic} --group {group}")
    assert _consume(c, "alice", topic, group) == (1, None)
    assert _init_transactions_error(c, "alice", txn_id) == TXN_AUTH
    _acls(c, f"--add --allow-principal User:alice --producer --transactional-id {txn_id}")
    assert _init_transactions_error(c, "alice", txn_id) is None

    # exactly that: bob is still refused, and alice elsewhere too
    assert _produce_error(c, "bob", topic) == TOPIC_AUTH
    assert _consume(c, "bob", topic, group)[1] in (GROUP_AUTH, TOPIC_AUTH)
    assert _create_topic(c, "alice", f"alice-{topic}") == TOPIC_AUTH

    listed = _acls(c, "--list --principal User:alice")
    assert listed.out.count("principal=User:alice") == 7  # topic W,D,C,R; group R; txn W,D


def test_a_prefixed_acl_and_a_deny_overriding_allow(secure):
    c = secure
    prefix = f"p{uuid.uuid4().hex[:6]}-"
    topic = prefix + "orders"
    assert _create_topic(c, "admin", topic) is None
    _acls(c, f"--add --allow-principal User:alice --operation All --topic {prefix} "
          "--resource-pattern-type prefixed")  # fmt: skip
    assert _produce_error(c, "alice", topic) is None
    assert _consume(c, "alice", topic, f"admin-only-{prefix}")[1] == GROUP_AUTH
    _acls(c, f"--add --deny-principal User:alice --operation Write --topic {topic}")
    assert _produce_error(c, "alice", topic) == TOPIC_AUTH
    _acls(c, f"--add --allow-principal User:alice --operation Read --group g-{prefix}")
    assert _consume(c, "alice", topic, f"g-{prefix}") == (1, None)  # Read still allowed
