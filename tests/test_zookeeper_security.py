"""ZooKeeper secured as Kafka secures it, against a real ZooKeeper that takes only SASL
DIGEST-MD5 logins (tests/conftest.py secured_zookeeper) and real brokers with
zookeeper.set.acl=true: anonymous sessions are refused; a user who can log in but is
not the brokers' principal can neither write Kafka's znodes nor read SCRAM credentials;
brokers create every znode with Kafka's ACLs; quill-zookeeper-security-migration
secures an open tree and opens it again."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, Id, Permissions

from broker.server.config import BrokerConfig, ConfigError
from broker.zk.client import KafkaZkClient
from broker.zk.security import (
    JAAS_CONFIG_ENV,
    ZkCredentials,
    credentials_from_env,
    read_client_credentials,
    zk_client,
)
from broker.zk.znodes import PERSISTENT_PATHS, AclZNodes, ConfigEntityZNode
from quill_stack.services import PROJECT_ROOT
from tests.wait_helpers import wait_until

KAFKA_ALL = ACL(Permissions.ALL, Id("sasl", "kafka"))
WORLD_READ = ACL(Permissions.READ, Id("world", "anyone"))
WORLD_ALL = ACL(Permissions.ALL, Id("world", "anyone"))
SECURE = [KAFKA_ALL, WORLD_READ]
SENSITIVE = [KAFKA_ALL]


def _started(client):
    client.start(timeout=20)
    return client


def _mallory(zookeeper, chroot: str = ""):
    """Logged in, but not the brokers' principal (creates what it creates with open ACLs)."""
    login = read_client_credentials(zookeeper.jaas["mallory"])
    return _started(zk_client(zookeeper.address + chroot, 10, login, set_acl=False))


@pytest.fixture
def mallory(secured_zookeeper):
    client = _mallory(secured_zookeeper)
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="module")
def secured(secured_cluster_factory):
    return secured_cluster_factory(2)


def _acls(client, path) -> list[ACL]:
    return sorted(client.get_acls(path)[0], key=lambda a: (a.id.scheme, a.perms))


def test_an_anonymous_session_is_refused(secured_zookeeper):
    anonymous = KazooClient(hosts=secured_zookeeper.address, timeout=5, connection_retry=None)
    try:
        with pytest.raises((KazooException, KazooTimeoutError)):
            anonymous.start(timeout=10)
            anonymous.get("/")  # enforce.auth: the session is closed at its first request
    finally:
        anonymous.stop()
        anonymous.close()


# kazoo raises the refused login on its connection thread, and gives up
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_wrong_password_is_refused(secured_zookeeper):
    wrong = zk_client(secured_zookeeper.address, 5, ZkCredentials("kafka", "guess"))
    try:
        with pytest.raises((KazooException, KazooTimeoutError)):
            wrong.start(timeout=10)
            wrong.get("/")
    finally:
        wrong.stop()
        wrong.close()


def test_brokers_create_znodes_with_kafkas_acls(secured):
    zk = secured.zk_client()
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(timeout=60)
    state = f"/brokers/topics/{topic}/partitions/1/state"
    wait_until(lambda: zk.exists(state) is not None, what=f"{state}")
    for path in (
        f"/brokers/topics/{topic}",
        f"/brokers/topics/{topic}/partitions",
        f"/brokers/topics/{topic}/partitions/0",
        state,  # leader and ISR
        f"/config/topics/{topic}",
        "/brokers/ids/1",
        "/controller",
        "/controller_epoch",
        "/cluster/id",
        "/brokers/topics",
        "/config",
        AclZNodes.literal_root,
    ):
        assert _acls(zk, path) == sorted(SECURE, key=lambda a: a.id.scheme), path
    for path in ("/config/users", "/config/brokers"):
        assert zk.get_acls(path)[0] == SENSITIVE, path


def test_another_sasl_user_can_neither_write_nor_read_secrets(secured, secured_zookeeper):
    chroot = secured.chroot
    kafka = KafkaZkClient(
        secured.zk_connect, credentials=secured_zookeeper.credentials, set_acl=True
    )
    kafka.start()
    try:
        kafka.set_entity_config("users", "admin", {"SCRAM-SHA-512": "salt=...,stored_key=..."})
    finally:
        kafka.close()
    zk = secured.zk_client()
    assert zk.get_acls("/config/users/admin")[0] == SENSITIVE
    mallory = _mallory(secured_zookeeper, chroot)
    try:
        attacks = [
            lambda: mallory.get("/config/users/admin"),  # salt, stored_key, server_key
            lambda: mallory.get_children("/config/users"),
            lambda: mallory.create("/config/users/mallory", b'{"version":1,"config":{}}'),
            lambda: mallory.set("/config/users/admin", b'{"version":1,"config":{}}'),
            lambda: mallory.create(
                AclZNodes.path("LITERAL", "Topic", "*"), AclZNodes.encode([]), makepath=True
            ),
            lambda: mallory.create(f"{AclZNodes.literal_root}/Topic", b""),
            lambda: mallory.create("/brokers/topics/forged", b"{}"),
            lambda: mallory.delete("/brokers/topics", recursive=True),
            lambda: mallory.create("/config/changes/config_change_", b"{}", sequence=True),
        ]
        for index, attack in enumerate(attacks):
            with pytest.raises(NoAuthError):
                attack()
                pytest.fail(f"attack {index} was allowed")
        # what is not sensitive stays readable, as Kafka leaves it (world READ)
        assert mallory.get_children("/brokers/ids") == zk.get_children("/brokers/ids")
    finally:
        mallory.stop()
        mallory.close()


def test_set_acl_without_a_zookeeper_login_is_refused(tmp_path):
    base = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path)}
    with pytest.raises(ConfigError, match="zookeeper.set.acl is true"):
        BrokerConfig({**base, "zookeeper.set.acl": "true"})
    with pytest.raises(ConfigError, match="cannot read the JAAS file"):
        BrokerConfig({**base, "java.security.auth.login.config": str(tmp_path / "none.jaas")})
    (tmp_path / "server.jaas").write_text(
        'Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="b"; };'
    )
    with pytest.raises(ConfigError, match="no 'Client' section"):
        BrokerConfig({**base, "java.security.auth.login.config": str(tmp_path / "server.jaas")})


def _migrate(zookeeper, acl: str, connect: str, jaas=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != JAAS_CONFIG_ENV}
    if jaas:
        env[JAAS_CONFIG_ENV] = str(jaas)
    argv = [sys.executable, "-m", "broker.cli.zookeeper_security_migration"]
    argv += [f"--zookeeper.acl={acl}", f"--zookeeper.connect={connect}"]
    return subprocess.run(
        argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_migration_secures_an_open_tree_and_opens_it_again(secured_zookeeper, mallory):
    chroot = f"/quill-migrate-{uuid.uuid4().hex[:8]}"
    connect = secured_zookeeper.address + chroot
    root = _started(zk_client(secured_zookeeper.address, 10, secured_zookeeper.credentials))
    root.ensure_path(chroot)
    root.stop()
    root.close()
    # a cluster's tree as brokers without zookeeper.set.acl left it: every znode open
    open_tree = _started(zk_client(connect, 10, secured_zookeeper.credentials, set_acl=False))
    kafka = _started(zk_client(connect, 10, secured_zookeeper.credentials))
    try:
        for path in PERSISTENT_PATHS:
            open_tree.ensure_path(path)
        open_tree.create("/brokers/topics/orders/partitions/0/state", b"{}", makepath=True)
        users = ConfigEntityZNode.path("users", "bob")
        open_tree.create(users, b'{"version":1,"config":{"SCRAM-SHA-512":"x"}}')
        assert mallory.get(chroot + users)[0]  # today: anyone reads bob's credential

        done = _migrate(secured_zookeeper, "secure", connect, secured_zookeeper.jaas["kafka"])
        assert done.returncode == 0, done.stderr
        assert "/brokers: " in done.stdout and "set secure" in done.stdout
        for path in ("/", "/brokers", "/brokers/topics/orders/partitions/0/state", "/config"):
            assert _acls(kafka, path) == sorted(SECURE, key=lambda a: a.id.scheme), path
        assert kafka.get_acls(users)[0] == SENSITIVE
        assert kafka.get_acls("/config/users")[0] == SENSITIVE
        with pytest.raises(NoAuthError):
            mallory.get(chroot + users)
        with pytest.raises(NoAuthError):
            mallory.set(chroot + "/brokers/topics/orders/partitions/0/state", b"{}")

        done = _migrate(secured_zookeeper, "unsecure", connect, secured_zookeeper.jaas["kafka"])
        assert done.returncode == 0, done.stderr
        for path in ("/", "/brokers/topics/orders/partitions/0/state", users, "/kafka-acl"):
            assert kafka.get_acls(path)[0] == [WORLD_ALL], path
        mallory.set(chroot + "/brokers/topics/orders/partitions/0/state", b"{}")
    finally:
        kafka.delete(chroot, recursive=True)
        for client in (open_tree, kafka):
            client.stop()
            client.close()


def test_migration_tool_wants_a_login_and_has_help(secured_zookeeper):
    done = _migrate(secured_zookeeper, "secure", secured_zookeeper.address)
    assert done.returncode == 1
    assert "No JAAS configuration file" in done.stderr
    argv = [sys.executable, "-m", "broker.cli.zookeeper_security_migration", "--help"]
    shown = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0
    for option in ("--zookeeper.acl", "--zookeeper.connect", "--enable.path.check"):
        assert option in shown.stdout


def test_the_console_and_workers_write_with_the_same_policy(secured, secured_zookeeper, settings):
    """cluster_client.zk (the console's quotas, the workers' compaction requests) logs
    in as the brokers' principal and creates znodes with Kafka's ACLs; without a login
    it gets no session at all."""
    from cluster_client import zk as console_zk
    from cluster_client.errors import ClusterUnavailable

    settings.QUILL_ZOOKEEPER_CONNECT = secured.zk_connect
    settings.QUILL_ZOOKEEPER_CREDENTIALS = secured_zookeeper.credentials
    console_zk.reset()
    try:
        console_zk.set_entity_config("users/carol", {"producer_byte_rate": "1024"})
        console_zk.set_entity_config("clients/app", {"producer_byte_rate": "1024"})
        client = console_zk.client()
        client.create("/admin/compact/orders", b"{}", makepath=True)  # as operations/kinds/compact
    finally:
        console_zk.reset()
    zk = secured.zk_client()
    assert zk.get_acls("/config/users/carol")[0] == SENSITIVE
    for path in ("/config/clients/app", "/admin/compact", "/admin/compact/orders"):
        assert _acls(zk, path) == sorted(SECURE, key=lambda a: a.id.scheme), path
    mallory = _mallory(secured_zookeeper, secured.chroot)
    try:
        with pytest.raises(NoAuthError):
            mallory.get("/config/users/carol")
    finally:
        mallory.stop()
        mallory.close()

    settings.QUILL_ZOOKEEPER_CREDENTIALS = None
    try:
        with pytest.raises((ClusterUnavailable, KazooException)):
            console_zk.set_entity_config("users/mallory", {})
    finally:
        console_zk.reset()


def test_the_jaas_section_name_is_honoured(tmp_path, monkeypatch):
    jaas = tmp_path / "zk.jaas"
    jaas.write_text(
        "ZkClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        '  username="kafka" password="s3cret";\n};\n'
    )
    base = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "log.dirs": str(tmp_path)}
    base["java.security.auth.login.config"] = str(jaas)
    with pytest.raises(ConfigError, match="no 'Client' section"):
        BrokerConfig(base)
    config = BrokerConfig({**base, "zookeeper.sasl.clientconfig": "ZkClient"})
    assert config.zookeeper_credentials == ZkCredentials("kafka", "s3cret")
    assert "s3cret" not in repr(config.zookeeper_credentials)
    monkeypatch.setenv(JAAS_CONFIG_ENV, str(jaas))
    monkeypatch.setenv("QUILL_ZOOKEEPER_SASL_CLIENTCONFIG", "ZkClient")
    assert credentials_from_env() == ZkCredentials("kafka", "s3cret")
