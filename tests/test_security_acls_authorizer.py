"""AclAuthorizer's decisions and its ZooKeeper store, against the session's real ZooKeeper
(each test in its own chroot): super.users, allow.everyone.if.no.acl.found, deny before
allow, hosts, wildcard principal and resource, prefixes, implied operations, ALL, and
two authorizers kept in step by the change notifications."""

from __future__ import annotations

import uuid

import pytest
from kazoo.client import KazooClient

from broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
)
from broker.security.acl import AclOperation as Op
from broker.security.acl import PermissionType as P
from broker.security.acl import ResourceType as R
from broker.security.authorizer import (
    AclAuthorizer,
    AuthorizerConfigError,
    check_class_name,
    parse_super_users,
)
from broker.server.config import BrokerConfig, ConfigError
from tests.wait_helpers import wait_until

ALICE, BOB = "User:alice", "User:bob"


@pytest.fixture
def zk(zookeeper):
    root = KazooClient(hosts=zookeeper.address, timeout=10)
    root.start(timeout=10)
    chroot = f"/acl-{uuid.uuid4().hex[:10]}"
    root.ensure_path(chroot)
    client = KazooClient(hosts=zookeeper.address + chroot, timeout=10)
    client.start(timeout=10)
    yield client
    client.stop()
    root.stop()


def _authorizer(zk, **kwargs) -> AclAuthorizer:
    a = AclAuthorizer(**kwargs)
    a.start(zk)
    return a


def _acl(rtype, name, principal, op, permission=P.ALLOW, host="*", pattern=PatternType.LITERAL):
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, permission)
    )


def test_no_acl_means_allow_everyone_if_configured(zk):
    open_ = _authorizer(zk, allow_if_no_acl=True)
    closed = _authorizer(zk, allow_if_no_acl=False)
    assert open_.authorize(ALICE, "10.0.0.1", Op.WRITE, R.TOPIC, "t")
    assert not closed.authorize(ALICE, "10.0.0.1", Op.WRITE, R.TOPIC, "t")
    open_.create([_acl(R.TOPIC, "t", BOB, Op.READ)])
    # an ACL on the resource, even for someone else, closes it to the rest
    assert not open_.authorize(ALICE, "10.0.0.1", Op.WRITE, R.TOPIC, "t")
    assert open_.authorize(ALICE, "10.0.0.1", Op.WRITE, R.TOPIC, "other")


def test_super_users_pass_every_acl(zk):
    a = _authorizer(zk, super_users=parse_super_users("User:admin; User:ops"))
    a.create([_acl(R.TOPIC, "t", "User:admin", Op.ALL, P.DENY)])
    assert a.authorize("User:admin", "1.2.3.4", Op.WRITE, R.TOPIC, "t")
    assert a.authorize("User:ops", "1.2.3.4", Op.CLUSTER_ACTION, R.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, "1.2.3.4", Op.WRITE, R.TOPIC, "t")


def test_deny_wins_over_allow_and_all(zk):
    a = _authorizer(zk)
    a.create(
        [
            _acl(R.TOPIC, "t", ALICE, Op.ALL),
            _acl(R.TOPIC, "t", ALICE, Op.WRITE, P.DENY),
            _acl(R.TOPIC, "*", ALICE, Op.DELETE, P.DENY),
        ]
    )
    assert a.authorize(ALICE, "h", Op.READ, R.TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "t")
    assert not a.authorize(ALICE, "h", Op.DELETE, R.TOPIC, "t")  # the wildcard deny
    a.create([_acl(R.TOPIC, "u", ALICE, Op.ALL, P.DENY)])
    assert not a.authorize(ALICE, "h", Op.DESCRIBE, R.TOPIC, "u")  # deny ALL denies each op


def test_hosts_and_wildcard_principal(zk):
    a = _authorizer(zk)
    a.create(
        [
            _acl(R.TOPIC, "t", ALICE, Op.READ, host="10.0.0.1"),
            _acl(R.TOPIC, "t", "User:*", Op.WRITE),
            _acl(R.TOPIC, "t", "User:*", Op.WRITE, P.DENY, host="10.0.0.66"),
        ]
    )
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, R.TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, R.TOPIC, "t")
    assert a.authorize(BOB, "10.0.0.2", Op.WRITE, R.TOPIC, "t")
    assert not a.authorize(BOB, "10.0.0.66", Op.WRITE, R.TOPIC, "t")


def test_prefixed_and_wildcard_resources(zk):
    a = _authorizer(zk)
    a.create(
        [
            _acl(R.TOPIC, "orders-", ALICE, Op.WRITE, pattern=PatternType.PREFIXED),
            _acl(R.GROUP, "*", ALICE, Op.READ),
        ]
    )
    assert a.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "orders-eu")
    assert a.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "orders-")
    assert not a.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "orders")
    assert not a.authorize(ALICE, "h", Op.WRITE, R.TOPIC, "xorders-eu")
    assert a.authorize(ALICE, "h", Op.READ, R.GROUP, "any-group")
    assert not a.authorize(ALICE, "h", Op.READ, R.TOPIC, "any-group")  # other resource type


def test_implied_operations(zk):
    a = _authorizer(zk)
    a.create(
        [
            _acl(R.TOPIC, "r", ALICE, Op.READ),
            _acl(R.TOPIC, "w", ALICE, Op.WRITE),
            _acl(R.TOPIC, "c", ALICE, Op.ALTER_CONFIGS),
        ]
    )
    assert a.authorize(ALICE, "h", Op.DESCRIBE, R.TOPIC, "r")
    assert a.authorize(ALICE, "h", Op.DESCRIBE, R.TOPIC, "w")
    assert not a.authorize(ALICE, "h", Op.READ, R.TOPIC, "w")  # Write does not imply Read
    assert a.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, R.TOPIC, "c")
    assert not a.authorize(ALICE, "h", Op.DESCRIBE, R.TOPIC, "c")


def test_authorize_any_for_idempotent_producers(zk):
    a = _authorizer(zk)
    assert not a.authorize_any(ALICE, "h", Op.WRITE, R.TOPIC)
    a.create([_acl(R.TOPIC, "t", ALICE, Op.WRITE)])
    assert a.authorize_any(ALICE, "h", Op.WRITE, R.TOPIC)
    a.create([_acl(R.TOPIC, "*", ALICE, Op.WRITE, P.DENY)])
    assert not a.authorize_any(ALICE, "h", Op.WRITE, R.TOPIC)


def test_a_second_broker_follows_the_change_notifications(zk):
    writer = _authorizer(zk)
    reader = _authorizer(zk)
    binding = _acl(R.TOPIC, "orders-", ALICE, Op.READ, pattern=PatternType.PREFIXED)
    writer.create([binding])
    wait_until(lambda: reader.authorize(ALICE, "h", Op.READ, R.TOPIC, "orders-1"))
    removed = writer.delete([AclBindingFilter(resource_type=R.TOPIC, principal=ALICE)])
    assert removed == [[binding]]
    wait_until(lambda: not reader.authorize(ALICE, "h", Op.READ, R.TOPIC, "orders-1"))
    # and a broker started later loads what is there
    writer.create([_acl(R.GROUP, "g", BOB, Op.READ)])
    late = _authorizer(zk)
    assert late.describe(AclBindingFilter()) == [_acl(R.GROUP, "g", BOB, Op.READ)]


def test_config_names_kafkas_classes_and_refuses_others():
    assert check_class_name("kafka.security.authorizer.AclAuthorizer")
    assert check_class_name("kafka.security.auth.SimpleAclAuthorizer")
    assert check_class_name("acl")
    assert not check_class_name("")
    with pytest.raises(AuthorizerConfigError, match="authorizer.class.name"):
        check_class_name("org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    base = {"broker.id": "1", "zookeeper.connect": "localhost:2181"}
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({**base, "authorizer.class.name": "com.example.Mine"})
    with pytest.raises(ConfigError, match="super.users"):
        BrokerConfig({**base, "authorizer.class.name": "acl", "super.users": "alice"})
    cfg = BrokerConfig({**base, "authorizer.class.name": "acl", "super.users": "User:a;User:b"})
    assert AclAuthorizer.from_config(cfg).super_users == {"User:a", "User:b"}
