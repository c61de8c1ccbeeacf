"""A ZooKeeper ensemble for the stack (issue 27): QUILL_ZK_NODES=3 runs three servers
(zoo.cfg server.N lines, a myid each) and every process takes the multi-host
zookeeper.connect; a broker given host1:p1,host2:p2,host3:p3/chroot keeps working while
a minority of the ensemble is down. With QUILL_SECURITY=sasl_ssl every server of the
ensemble takes the SASL logins the standalone one takes and refuses anonymous sessions."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.zk.security import ZkCredentials, zk_client
from quill_stack import ports, services
from quill_stack.process import ManagedProcess
from quill_stack.services import ConfigError, EnsembleMember, StackConfig, build_stack
from quill_stack.state import owner_env


def test_zk_nodes_builds_an_ensemble(tmp_path):
    cfg = StackConfig.from_env({"QUILL_STATE_DIR": str(tmp_path), "QUILL_ZK_NODES": "3"})
    zks = [s for s in build_stack(cfg) if s.kind == "zookeeper"]
    assert [s.name for s in zks] == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    assert cfg.zk_connect == "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"
    for myid, spec in enumerate(zks, 1):
        files = {path.name: text for path, text in spec.files.items()}
        assert files["myid"] == f"{myid}\n"
        assert "server.1=127.0.0.1:2888:3888\n" in files["zoo.cfg"]
        assert "server.3=127.0.0.1:2890:3890\n" in files["zoo.cfg"]
        assert f"clientPort={2180 + myid}\n" in files["zoo.cfg"]
        assert "org.apache.zookeeper.server.quorum.QuorumPeerMain" in spec.argv
    brokers = [s for s in build_stack(cfg) if s.kind == "broker"]
    assert {b.config["QUILL_ZOOKEEPER_CONNECT"] for b in brokers} == {cfg.zk_connect}


def test_a_secure_stack_runs_an_ensemble_that_wants_logins(tmp_path):
    env = {"QUILL_STATE_DIR": str(tmp_path), "QUILL_ZK_NODES": "3", "QUILL_SECURITY": "sasl_ssl"}
    cfg = StackConfig.from_env(env)
    zks = [s for s in build_stack(cfg) if s.kind == "zookeeper"]
    assert len(zks) == 3
    for spec in zks:
        files = {path.name: text for path, text in spec.files.items()}
        assert "sessionRequireClientSASLAuth=true\n" in files["zoo.cfg"]
        assert "enforce.auth.schemes=sasl\n" in files["zoo.cfg"]
        assert "Server {" in files["jaas.conf"] and spec.private_files
        assert any(arg.endswith("jaas.conf") for arg in spec.argv)


def test_zk_nodes_must_be_odd(tmp_path):
    with pytest.raises(ConfigError, match="QUILL_ZK_NODES must be odd"):
        StackConfig.from_env({"QUILL_STATE_DIR": str(tmp_path), "QUILL_ZK_NODES": "2"})


SETTINGS = {"tickTime": "500", "minSessionTimeout": "1000", "maxSessionTimeout": "60000"}
SASL_USERS = {"kafka": "kafka-ensemble-secret"}


def _start_ensemble(state, members, sasl_users=None) -> list[ManagedProcess]:
    zks = [
        ManagedProcess(
            services.zookeeper_ensemble_spec(state, n, members, SETTINGS, sasl_users=sasl_users),
            owner_env(state),
        )
        for n in members
    ]
    for zk in zks:
        zk.start()
    return zks


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    state = tmp_path_factory.mktemp("ensemble")
    free = ports.free_ports(10)
    members = {n: EnsembleMember("127.0.0.1", *free[3 * n - 3 : 3 * n]) for n in (1, 2, 3)}
    zks = _start_ensemble(state, members)
    try:
        for zk in zks:
            zk.wait_healthy(90)
        connect = services.ensemble_connect(members, "/quill-ensemble")
        root = KazooClient(hosts=services.ensemble_connect(members), timeout=10)
        root.start(30)
        root.ensure_path("/quill-ensemble")
        root.stop()
        spec = services.broker_spec(state, 1, free[9], connect, 1, overrides={
            "zookeeper.session.timeout.ms": "6000"})  # fmt: skip
        broker = ManagedProcess(spec, owner_env(state))
        broker.start()
        broker.wait_healthy(90)
        yield zks, broker, f"127.0.0.1:{free[9]}"
    finally:
        for proc in [*zks, locals().get("broker")]:
            if proc is not None:
                proc.kill()


def _round_trip(bootstrap: str, topic: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce(topic, b"r%d" % i)
    assert producer.flush(60) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ens", "auto.offset.reset": "earliest"}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    for _ in range(60):
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            got.append(msg.value())
        if len(got) == 5:
            break
    consumer.close()
    return got


def test_broker_keeps_working_with_a_minority_down(ensemble):
    zks, broker, bootstrap = ensemble
    assert _round_trip(bootstrap, "before") == [b"r%d" % i for i in range(5)]
    zks[0].kill()  # one of three: a quorum remains
    try:
        assert _round_trip(bootstrap, "during") == [b"r%d" % i for i in range(5)]
        assert broker.alive()
    finally:
        zks[0].start()


def _refused(client) -> bool:
    try:
        client.start(timeout=10)
        client.get("/")  # enforce.auth: the session is closed at its first request
    except (KazooException, KazooTimeoutError):
        return True
    finally:
        client.stop()
        client.close()
    return False


def test_a_sasl_ensemble_takes_logins_only(tmp_path):
    free = ports.free_ports(9)
    members = {n: EnsembleMember("127.0.0.1", *free[3 * n - 3 : 3 * n]) for n in (1, 2, 3)}
    zks = _start_ensemble(tmp_path, members, SASL_USERS)
    try:
        for zk in zks:
            zk.wait_healthy(90)
        login = ZkCredentials("kafka", SASL_USERS["kafka"])
        for member in members.values():  # each server, not just the one kazoo picks
            one = f"127.0.0.1:{member.client_port}"
            kafka = zk_client(one, 10, login)
            kafka.start(timeout=30)
            try:
                kafka.ensure_path("/quill-secure")
                assert kafka.exists("/quill-secure") is not None
            finally:
                kafka.stop()
                kafka.close()
            anonymous = KazooClient(hosts=one, timeout=5, connection_retry=None)
            assert _refused(anonymous), f"{one} took an anonymous session"
    finally:
        for zk in zks:
            zk.kill()
