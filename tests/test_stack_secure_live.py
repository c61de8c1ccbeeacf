"""`make up SECURE=1` for real: `quill-stack up` with QUILL_SECURITY=sasl_ssl (two brokers
replicating over their SASL_SSL listener, the worker, the console and its monitor) in a
temp state dir on free ports. Real clients: confluent-kafka with the admin's properties
produces and consumes; a plaintext client, a wrong password and a user without ACLs are
refused; the console, through its API, creates a topic, produces and reads a record and
shows the partition's offsets, all over SASL_SSL as the admin."""

from __future__ import annotations

import json
import logging
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, Id, Permissions

from broker.cli.common import read_properties_file
from broker.security.scram_credentials import ScramCredential
from broker.zk.client import KafkaZkClient
from broker.zk.security import ZkCredentials, zk_client
from cluster_client import client_socket
from quill_stack import health, ports
from quill_stack import secure as secure_stack
from quill_stack.redis_auth import with_password
from quill_stack.services import WORKER_NODE
from tests.ops_stack_helpers import _token
from tests.stack_helpers import quill_stack, stack_env
from tests.wait_helpers import wait_until

pytestmark = pytest.mark.slow

# librdkafka's retries (refused logins, brokers gone after the stack stops) stay out of
# the output; the tests read errors from error_cb and the clients' answers
QUIET = logging.getLogger("tests.secure.rdkafka")
QUIET.setLevel(logging.CRITICAL)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    state_dir = tmp_path_factory.mktemp("secure-stack")
    env = stack_env(state_dir, QUILL_BROKERS="2", QUILL_SECURITY="sasl_ssl")
    base = int(env["QUILL_BROKER_BASE_PORT"])
    while ports.port_in_use(base) or ports.port_in_use(base + 1):  # two brokers: two ports
        base = ports.free_port()
    env["QUILL_BROKER_BASE_PORT"] = str(base)
    up = quill_stack(env, "up", timeout=400)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        admin = read_properties_file(str(state_dir / "client-admin.properties"))
        broker_ports = [base, base + 1]
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in broker_ports)
        admin["logger"] = QUIET
        yield {
            "env": env,
            "dir": state_dir,
            "admin": admin,
            "bootstrap": bootstrap,
            "ports": broker_ports,
        }
    finally:
        down = quill_stack(env, "down", timeout=200)
        assert down.returncode == 0, down.stdout + down.stderr


def _zk_connect(secure) -> str:
    return f"127.0.0.1:{secure['env']['QUILL_ZK_PORT']}"


def _create(conf: dict, topic: str, partitions: int = 1, rf: int = 2) -> None:
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(timeout=60)

    def led() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        parts = meta.partitions if meta else {}
        return bool(parts) and all(p.leader >= 0 and len(p.isrs) == rf for p in parts.values())

    wait_until(led, what=f"a leader and a full ISR for {topic}")


def test_admin_properties_produce_and_consume(secure):
    conf = {"bootstrap.servers": secure["bootstrap"], **secure["admin"]}
    topic = f"secure-{uuid.uuid4().hex[:6]}"
    _create(conf, topic)
    producer = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for i in range(10):
        producer.produce(topic, key=b"k%d" % i, value=b"value-%d" % i)
    assert producer.flush(60) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 120
    while len(got) < 10 and time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            got.append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    assert got == [(i, b"k%d" % i, b"value-%d" % i) for i in range(10)]


def test_kcat_with_the_admin_properties_file(secure):
    """README's lines: Debian's kcat reads the stack's client-admin.properties with -F
    (librdkafka's names: SASL_SSL, SCRAM-SHA-512, the admin's password, the stack's CA)
    and produces and consumes over SASL_SSL."""
    topic = f"kcat-{uuid.uuid4().hex[:6]}"
    props = str(secure["dir"] / "client-admin.properties")
    bin_dir = Path(sys.executable).parent
    created = subprocess.run(
        [bin_dir / "quill-topics", "--bootstrap-server", secure["bootstrap"]]
        + ["--command-config", props, "--create", "--topic", topic],
        capture_output=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr.decode()
    kcat = ["kcat", "-F", props, "-b", secure["bootstrap"], "-t", topic]
    produced = subprocess.run(
        [*kcat, "-P", "-K:"], input=b"k1:one\nk2:two\nk3:three\n", capture_output=True, timeout=120
    )
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run(
        [*kcat, "-C", "-o", "beginning", "-c", "3", "-e", "-f", "%p %o %k %s\n"],
        capture_output=True,
        timeout=120,
    )
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout == b"0 0 k1 one\n0 1 k2 two\n0 2 k3 three\n"
    listed = subprocess.run([*kcat[:5], "-L"], capture_output=True, timeout=120)
    assert listed.returncode == 0, listed.stderr.decode()
    assert f' topic "{topic}" with 1 partitions:'.encode() in listed.stdout


def test_a_plaintext_client_and_a_wrong_password_are_refused(secure):
    host, port = "127.0.0.1", secure["ports"][0]
    # a plaintext ApiVersions to the TLS port gets no Kafka answer
    assert not health.api_versions(host, port, timeout=5)[0]
    plain = AdminClient({"bootstrap.servers": secure["bootstrap"], "logger": QUIET})
    # (no metadata: librdkafka retries until the timeout, which only makes the test wait)
    with pytest.raises(KafkaException):
        plain.list_topics(timeout=3)
    wrong = {**secure["admin"], "sasl.password": "not-the-password"}
    errors: list[KafkaError] = []
    refused = AdminClient(
        {"bootstrap.servers": secure["bootstrap"], **wrong, "error_cb": errors.append}
    )
    with pytest.raises(KafkaException):
        refused.list_topics(timeout=3)

    def refused_as_authentication() -> bool:
        refused.poll(0.5)  # serves error_cb
        return KafkaError._AUTHENTICATION in {e.code() for e in errors}

    wait_until(refused_as_authentication, timeout=60, what="an authentication error")
    plain = refused = None  # destroyed: no more retries against the brokers
    # the console's own protocol socket: TLS verified, SCRAM refused with the broker's code
    no_logger = {k: v for k, v in wrong.items() if k != "logger"}
    with pytest.raises(client_socket.AuthenticationFailed, match="invalid credentials"):
        client_socket.connect((host, port), 10, no_logger)
    good = {k: v for k, v in secure["admin"].items() if k != "logger"}
    client_socket.connect((host, port), 10, good).close()


def test_a_user_without_acls_is_refused(secure):
    """allow.everyone.if.no.acl.found=false: an authenticated user with no ACL cannot
    write (Kafka's TOPIC_AUTHORIZATION_FAILED)."""
    login = secure_stack.zookeeper_credentials(secure["dir"])
    zk = KafkaZkClient(_zk_connect(secure), credentials=login, set_acl=True)
    zk.start()
    try:
        credential = ScramCredential.from_password("SCRAM-SHA-512", "alice-secret")
        zk.set_entity_config("users", "alice", {"SCRAM-SHA-512": credential.to_config_value()})
    finally:
        zk.close()
    conf = {"bootstrap.servers": secure["bootstrap"], **secure["admin"]}
    topic = f"noacl-{uuid.uuid4().hex[:6]}"
    _create(conf, topic)
    alice = {**conf, "sasl.username": "alice", "sasl.password": "alice-secret"}
    errors = []
    producer = Producer({**alice, "message.timeout.ms": 20000})
    producer.produce(topic, b"no", on_delivery=lambda err, msg: errors.append(err))

    def answered():
        producer.poll(0.5)
        return errors

    wait_until(answered, what="alice's produce to be answered")
    assert errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _api(secure, token, method, path, body=None):
    """The console's API over HTTPS (the secure stack serves it with its CA's certificate)."""
    context = ssl.create_default_context(cafile=str(secure["dir"] / "tls" / "ca.crt"))
    request = urllib.request.Request(
        f"https://127.0.0.1:{secure['env']['QUILL_CONSOLE_PORT']}/api{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60, context=context) as response:
        return response.status, json.load(response)


@pytest.fixture(scope="module")
def token(secure) -> str:
    """An API token of a console user with the admin role."""
    settings = {
        **secure["env"],
        "QUILL_CLIENT_CONFIG": str(secure["dir"] / "client-admin.properties"),
    }
    return _token(secure["dir"], settings, "admin")[1]


def test_the_console_works_end_to_end_over_sasl_ssl(secure, token):
    topic = f"console-{uuid.uuid4().hex[:6]}"
    body = {"name": topic, "partitions": 1, "replication_factor": 2}
    assert _api(secure, token, "POST", "/topics", body)[0] == 201
    status, produced = _api(secure, token, "POST", "/messages", {"topic": topic, "value": "hello"})
    assert status == 201, produced
    _, read = _api(secure, token, "GET", f"/messages?topic={topic}&partition=0&mode=offset&value=0")
    assert [r["value"] for r in read["records"]] == ["hello"]
    assert (read["start"], read["end"]) == (0, 1)

    def offsets_shown():  # ListOffsets and DescribeLogDirs on the console's own socket
        detail = _api(secure, token, "GET", f"/topics/{topic}")[1]
        return detail if detail["records"] == 1 and not detail["errors"] else None

    detail = wait_until(offsets_shown, what="the console to show the topic's offsets")
    assert detail["replication_factor"] == 2


def test_the_worker_moves_replicas_and_elects_leaders_over_sasl_ssl(secure, token):
    """A reassignment (AlterPartitionReassignments to the controller) and a preferred
    leader election (ElectLeaders), run by the Celery worker with the admin's
    credentials, as any operator would through the console."""
    topic = f"ops-{uuid.uuid4().hex[:6]}"
    assert (
        _api(secure, token, "POST", "/topics", {"name": topic, "replication_factor": 2})[0] == 201
    )
    conf = {"bootstrap.servers": secure["bootstrap"], **secure["admin"]}
    admin = AdminClient(conf)

    def partition():
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        part = meta.partitions.get(0) if meta else None
        return part if part is not None and part.leader >= 0 and len(part.isrs) == 2 else None

    before = wait_until(partition, what=f"{topic} to be fully replicated")
    replicas = list(reversed(before.replicas))
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}

    def run(body: dict) -> dict:
        status, started = _api(secure, token, "POST", "/operations", body)
        assert status == 202, started

        def ended():
            op = _api(secure, token, "GET", f"/operations/{started['id']}")[1]
            return op if op["state"] in ("succeeded", "failed", "cancelled") else None

        op = wait_until(ended, timeout=180, what=f"operation {started['id']} to end")
        assert op["state"] == "succeeded", (op["error"], op["steps"][-5:])
        return op

    run({"kind": "reassign", "plan": plan})
    op = run({"kind": "elect-leaders", "partitions": [{"topic": topic, "partition": 0}]})
    moved = {"topic": topic, "partition": 0, "from": before.leader, "to": replicas[0]}
    assert op["result"]["elected"] == [moved]
    assert wait_until(lambda: partition() and partition().leader == replicas[0], what="leader")


def test_the_console_adds_a_user_and_an_acl_that_let_exactly_it_write(secure, token):
    """The console's users and ACL APIs (secusers' and secacl's) on the secure stack: the
    stack's users are listed, a new SCRAM user is refused until an ACL from the console
    lets it write to exactly one topic."""
    users = {u["user"]: u for u in _api(secure, token, "GET", "/security/scram-users")[1]}
    assert {"admin", "broker"} <= set(users)
    assert users["admin"]["credentials"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    body = {"user": "carol", "password": "carol-secret"}
    assert _api(secure, token, "POST", "/security/scram-users", body)[0] == 200
    topic = f"carol-{uuid.uuid4().hex[:6]}"
    assert (
        _api(secure, token, "POST", "/topics", {"name": topic, "replication_factor": 2})[0] == 201
    )
    carol = {
        "bootstrap.servers": secure["bootstrap"],
        **secure["admin"],
        "sasl.username": "carol",
        "sasl.password": "carol-secret",
        "message.timeout.ms": 20000,
    }

    def produce() -> KafkaError | None:
        results = []
        producer = Producer(carol)
        producer.produce(topic, b"from carol", on_delivery=lambda err, msg: results.append(err))
        wait_until(lambda: producer.poll(0.5) >= 0 and results, what="carol's produce answered")
        return results[0]

    # her credential may take a moment to reach every broker (a change notification)
    denied = wait_until(
        lambda: (
            (err := produce()) is not None
            and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            and err
        ),
        what="carol to authenticate and be refused",
    )
    assert denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    acl = {"resource_type": "TOPIC", "resource_name": topic, "principal": "User:carol"}
    assert _api(secure, token, "POST", "/security/acls", {**acl, "operation": "WRITE"})[0] == 200
    assert wait_until(lambda: produce() is None, what="carol's write to be allowed")


# ---------------------------------------------------------------- ZooKeeper and Redis


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_zookeeper_refuses_anonymous_sessions_and_other_logins(secure):
    """The attack of issue 25: an anonymous kazoo client wrote /config/users/mallory and
    an Allow-All ACL. Now its session is closed at its first request; a wrong password
    never gets a session."""
    for login in (None, ZkCredentials(secure_stack.ZOOKEEPER_USER, "guess")):
        client = zk_client(_zk_connect(secure), 5, login, set_acl=False, connection_retry=None)
        try:
            with pytest.raises((KazooException, KazooTimeoutError)):
                client.start(timeout=10)
                client.create("/config/users/mallory", b'{"version":1,"config":{}}')
        finally:
            client.stop()
            client.close()


def test_znodes_are_the_brokers_principals_and_credentials_hidden(secure):
    conf = {"bootstrap.servers": secure["bootstrap"], **secure["admin"]}
    topic = f"zkacl-{uuid.uuid4().hex[:6]}"
    _create(conf, topic)
    zk = zk_client(_zk_connect(secure), 10, secure_stack.zookeeper_credentials(secure["dir"]))
    zk.start(timeout=30)
    try:
        owner = ACL(Permissions.ALL, Id("sasl", secure_stack.ZOOKEEPER_USER))
        world_read = ACL(Permissions.READ, Id("world", "anyone"))
        for path in (f"/brokers/topics/{topic}", f"/brokers/topics/{topic}/partitions/0/state"):
            assert zk.get_acls(path)[0] == [owner, world_read], path
        for user in secure_stack.USERS:  # salt, stored_key, server_key: nobody else's
            assert zk.get_acls(f"/config/users/{user}")[0] == [owner], user
    finally:
        zk.stop()
        zk.close()


def test_redis_refuses_a_client_without_the_password(secure):
    port = int(secure["env"]["QUILL_REDIS_PORT"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"PING\r\n")
        assert sock.recv(100).startswith(b"-NOAUTH")
    password = (secure["dir"] / "secrets" / "redis.password").read_text()
    assert health.redis("127.0.0.1", port, password=password) == (True, "PONG")
    # the worker answers Celery's ping through the same Redis, with the password
    url = with_password(f"redis://127.0.0.1:{port}/0", password)
    assert health.celery_worker(url, WORKER_NODE, timeout=10)[0]
