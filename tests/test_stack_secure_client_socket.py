"""The console's protocol socket (cluster_client/wire.py through
cluster_client.client_socket) on a real broker's SASL_PLAINTEXT listener: the SCRAM-SHA-512
credentials that `python -m quill_stack.secure users` writes for the stack's admin log in,
ListOffsets then answers as on the plaintext listener; PLAIN works too; a wrong password
and a mechanism the listener does not offer are refused with the broker's words. The
listener's sessions last 2 s (KIP-368): the console's socket opens a new one in time."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_client import client_socket, wire
from quill_stack import secure
from tests.security_helpers import sasl_listener_cluster

pytestmark = pytest.mark.cluster

TOPIC = "secure-socket"
RECORDS = 7
LIFETIME_MS = 2000


@pytest.fixture(scope="module")
def sasl_cluster(cluster_factory, tmp_path_factory):
    cluster = sasl_listener_cluster(
        cluster_factory,
        "PLAIN,SCRAM-SHA-512",
        {"ops": "ops-secret"},
        **{"listener.name.sasl_plaintext.connections.max.reauth.ms": str(LIFETIME_MS)},
    )
    state_dir = tmp_path_factory.mktemp("secure-socket")
    # the tests' ZooKeeper takes no SASL logins (test_zookeeper_security has one that does)
    written = secure.ensure_scram_users(state_dir, cluster.zk_connect, zk_login=False)
    assert written == ["broker", "admin"]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(RECORDS):
        producer.produce(TOPIC, b"r%d" % i)
    assert producer.flush(30) == 0
    cluster.sasl_address = ("127.0.0.1", cluster.sasl_port)
    cluster.state_dir = state_dir
    return cluster


def _conf(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def test_the_stack_admin_reads_offsets_over_scram(sasl_cluster, monkeypatch):
    properties = sasl_cluster.state_dir / "client.properties"
    password = secure.password(sasl_cluster.state_dir, "admin")
    properties.write_text(
        "".join(f"{k}={v}\n" for k, v in _conf("SCRAM-SHA-512", "admin", password).items())
    )
    monkeypatch.setenv("QUILL_CLIENT_CONFIG", str(properties))  # as the stack sets it
    sock = wire.BrokerSocket(*sasl_cluster.sasl_address)
    try:
        call = wire.list_offsets_call({(TOPIC, 0): wire.LATEST, ("nope", 0): wire.LATEST})
        assert sock.pipeline([call])[0] == {(TOPIC, 0): RECORDS, ("nope", 0): None}
    finally:
        sock.close()


def test_the_console_socket_outlives_its_sasl_sessions(sasl_cluster, monkeypatch):
    """The broker closes a socket whose session ended at its next request; the console's
    socket opens a new one 90% into each session, so no call fails."""
    properties = sasl_cluster.state_dir / "ops.properties"
    properties.write_text(
        "".join(f"{k}={v}\n" for k, v in _conf("PLAIN", "ops", "ops-secret").items())
    )
    monkeypatch.setenv("QUILL_CLIENT_CONFIG", str(properties))
    sock = wire.BrokerSocket(*sasl_cluster.sasl_address)
    try:
        call = wire.list_offsets_call({(TOPIC, 0): wire.LATEST})
        first = None
        for _ in range(3):
            assert sock.pipeline([call])[0] == {(TOPIC, 0): RECORDS}
            first = first or sock.sock
            time.sleep(LIFETIME_MS / 1000 + 0.2)  # the session is over
        assert sock.pipeline([call])[0] == {(TOPIC, 0): RECORDS}
        assert sock.sock is not first  # renewed, not killed
    finally:
        sock.close()


def test_plain_users_from_the_listeners_jaas_config(sasl_cluster):
    sock = client_socket.connect(sasl_cluster.sasl_address, 10, _conf("PLAIN", "ops", "ops-secret"))
    sock.close()


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        (_conf("SCRAM-SHA-512", "admin", "wrong"), "invalid credentials"),
        (_conf("PLAIN", "ops", "wrong"), "Invalid username or password"),
        (
            _conf("SCRAM-SHA-256", "admin", "x"),
            "does not enable SASL mechanism SCRAM-SHA-256 (it offers PLAIN, SCRAM-SHA-512",
        ),
    ],
)
def test_refusals_name_the_reason_and_the_broker_serves_on(sasl_cluster, conf, message):
    with pytest.raises(client_socket.AuthenticationFailed) as caught:
        client_socket.connect(sasl_cluster.sasl_address, 10, conf)
    assert message in str(caught.value)
    good = _conf("PLAIN", "ops", "ops-secret")
    client_socket.connect(sasl_cluster.sasl_address, 10, good).close()
