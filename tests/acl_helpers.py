"""Shared by the ACL tests: a broker with the authorizer on, ACLs added through
confluent-kafka's AdminClient, raw requests from 127.0.0.1 or 127.0.0.2.

Over PLAINTEXT every client is User:ANONYMOUS, so the tests tell clients apart by host:
``secured_cluster`` gives 127.0.0.1 Cluster ALL (the broker's own inter-broker requests
need ClusterAction); raw requests from 127.0.0.2 have no Cluster ACL.
``allow.everyone.if.no.acl.found=true``: a resource without ACLs is open, one with ACLs
is open only to what they allow.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from broker.protocol.records import build_batch
from tests.wire import WireClient

OTHER_HOST = "127.0.0.2"  # a second client address on the loopback interface
ANON = "User:ANONYMOUS"


def secured_cluster(cluster_factory):
    """A one-broker cluster with the authorizer on, and an AdminClient for it."""
    c = cluster_factory(
        1,
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    add_acl(admin, ResourceType.BROKER, "kafka-cluster", AclOperation.ALL, host="127.0.0.1")
    return c, admin


def add_acl(admin, rtype, name, op, principal=ANON, host="*", allow=True, pattern=None):
    binding = AclBinding(
        rtype,
        name,
        pattern or ResourcePatternType.LITERAL,
        principal,
        host,
        op,
        AclPermissionType.ALLOW if allow else AclPermissionType.DENY,
    )
    for future in admin.create_acls([binding]).values():
        assert future.result(timeout=30) is None
    return binding


def new_topic(admin, prefix: str, exact: bool = False) -> str:
    name = prefix if exact else f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    return name


def one_batch(value: bytes = b"v") -> bytes:
    return build_batch([(None, value, [], int(time.time() * 1000))])


def wire_client(c, host: str | None = None) -> WireClient:
    return WireClient.for_bootstrap(c.bootstrap, source_host=host)


def metadata_request(wire: WireClient, topics: list[str] | None):
    body = {
        "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    return wire.request(3, 12, body)


def ready_topic(c, admin, prefix: str) -> tuple[str, WireClient]:
    """A new one-partition topic with its leader elected, and a raw client from 127.0.0.1."""
    topic = new_topic(admin, prefix)
    wire = wire_client(c)
    wait_leader(wire, topic)
    return topic, wire


def describe_acls(wire: WireClient, **fields):
    """A raw DescribeAcls v1: every ACL unless ``fields`` narrow the filter."""
    body = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1,
            "permission_type": 1}  # fmt: skip
    return wire.request(29, 1, {**body, **fields})


def wait_leader(wire: WireClient, topic: str):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = metadata_request(wire, [topic]).topics[0]
        if t.error_code == ErrorCode.none and t.partitions and t.partitions[0].leader_id >= 0:
            return t.partitions[0]
        time.sleep(0.2)
    raise AssertionError(f"{topic} has no leader")
