"""Three brokers with the authorizer on and allow.everyone.if.no.acl.found=false.

The inter-broker listener is PLAINTEXT, so the controller's requests and the followers'
fetches come from User:ANONYMOUS: as in Kafka, such a cluster needs
super.users=User:ANONYMOUS (or a ClusterAction ACL) to replicate. ACLs written through
one broker reach the others by ZooKeeper change notifications. With a SASL
inter-broker listener the brokers' own user is the super user instead.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.acl_helpers import add_acl, describe_acls, metadata_request
from tests.security_helpers import plain_inter_broker
from tests.wire import WireClient


def test_three_brokers_replicate_and_share_acls(cluster):
    c = cluster(
        3,
        **{
            "authorizer.class.name": "acl",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:ANONYMOUS",
        },
    )
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    topic = f"rep-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(topic, str(i).encode(), partition=i % 2)
    assert producer.flush(60) == 0

    wire = WireClient.for_bootstrap(c.bootstrap)
    deadline = time.monotonic() + 60
    while True:  # the followers fetch (ClusterAction) and join the ISR
        parts = metadata_request(wire, [topic]).topics[0].partitions
        if all(sorted(p.isr_nodes) == [1, 2, 3] for p in parts):
            break
        assert time.monotonic() < deadline, [p.isr_nodes for p in parts]
        time.sleep(0.5)
    wire.close()

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    seen = set()
    deadline = time.monotonic() + 60
    while len(seen) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.add(int(msg.value()))
    consumer.close()
    assert seen == set(range(100))

    add_acl(admin, ResourceType.TOPIC, "shared-", AclOperation.READ, principal="User:carol",
            pattern=ResourcePatternType.PREFIXED)  # fmt: skip
    for broker in c.brokers:  # each broker's own cache, through its own DescribeAcls
        w = WireClient("127.0.0.1", broker.port)
        deadline = time.monotonic() + 30
        while True:
            resources = describe_acls(w, resource_type_filter=2).resources
            names = [(r.resource_name, r.pattern_type) for r in resources]
            if ("shared-", 4) in names:
                break
            assert time.monotonic() < deadline, f"broker {broker.id} never saw the ACL"
            time.sleep(0.2)
        w.close()


def test_brokers_authenticated_over_sasl_need_only_their_own_super_user(cluster):
    """The inter-broker listener is SASL_PLAINTEXT (PLAIN user "broker", the only super
    user): the controller's requests and the followers' fetches pass as User:broker,
    while ANONYMOUS on the PLAINTEXT listener gets nothing without an ACL."""
    settings, internal = plain_inter_broker(3)
    c = cluster(
        3,
        **{
            **settings,
            "authorizer.class.name": "acl",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:broker",
        },
    )
    as_broker = {
        "bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in internal.values()),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "broker",
        "sasl.password": "broker-secret",
    }
    topic = f"sasl-rep-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(as_broker)
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "3"})])[topic].result(
        timeout=30
    )
    producer = Producer({**as_broker, "acks": "all", "message.timeout.ms": 60000})
    errors = []
    for i in range(20):
        producer.produce(topic, str(i).encode(), on_delivery=lambda e, _m: errors.append(e))
    assert producer.flush(90) == 0
    assert errors == [None] * 20  # acks=all with min.insync.replicas=3: all three replicate

    anonymous = Producer({"bootstrap.servers": c.bootstrap, "message.timeout.ms": 15000})
    refused = []
    anonymous.produce(topic, b"x", on_delivery=lambda e, _m: refused.append(e))
    anonymous.flush(30)
    assert refused and refused[0] is not None and refused[0].code() == 29
