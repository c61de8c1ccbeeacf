"""Named listeners, on bare metal: two brokers, each with an INTERNAL listener (brokers
talk on it: inter.broker.listener.name) and an EXTERNAL one advertised under another
address, both mapped to PLAINTEXT, as a docker-compose setup has them. A client gets the
endpoints of the listener it connected on; the registration JSON is Kafka's; SSL/SASL
listeners without their settings, unmapped names and an inter-broker listener that is
not advertised refuse start-up."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.server.config import BrokerConfig, ConfigError
from quill_stack import ports
from tests.wait_helpers import wait_until

pytestmark = pytest.mark.cluster

EXTERNAL_HOST = "localhost"  # advertised for EXTERNAL; INTERNAL advertises 127.0.0.1
PROTOCOL_MAP = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
TOPIC = "two-listeners"


@pytest.fixture(scope="module")
def external_ports():
    return dict(zip((1, 2), ports.free_ports(2), strict=True))


@pytest.fixture(scope="module")
def two_listeners(cluster_factory, external_ports):
    def listeners(host):
        return lambda broker_id, port: (
            f"INTERNAL://127.0.0.1:{port},EXTERNAL://{host}:{external_ports[broker_id]}"
        )

    return cluster_factory(
        2,
        **{
            "listeners": listeners("127.0.0.1"),
            "advertised.listeners": listeners(EXTERNAL_HOST),
            "listener.security.protocol.map": PROTOCOL_MAP,
            "inter.broker.listener.name": "INTERNAL",
        },
    )


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _brokers_seen(bootstrap: str) -> dict[int, tuple[str, int]]:
    meta = _admin(bootstrap).list_topics(timeout=30)
    return {b.id: (b.host, b.port) for b in meta.brokers.values()}


def test_registration_lists_both_listeners_as_kafka_writes_them(two_listeners, external_ports):
    zk = two_listeners.zk_client()
    for broker in two_listeners.brokers:
        data, _ = zk.get(f"/brokers/ids/{broker.id}")
        body = json.loads(data)
        assert body["endpoints"] == [
            f"INTERNAL://127.0.0.1:{broker.port}",
            f"EXTERNAL://{EXTERNAL_HOST}:{external_ports[broker.id]}",
        ]
        assert body["listener_security_protocol_map"] == {
            "INTERNAL": "PLAINTEXT",
            "EXTERNAL": "PLAINTEXT",
        }
        # the legacy fields: the first PLAINTEXT endpoint
        assert (body["host"], body["port"]) == ("127.0.0.1", broker.port)


def test_each_client_is_told_the_addresses_of_its_own_listener(two_listeners, external_ports):
    internal = {b.id: ("127.0.0.1", b.port) for b in two_listeners.brokers}
    external = {i: (EXTERNAL_HOST, p) for i, p in external_ports.items()}
    # the non-controller broker learnt the endpoints from UpdateMetadata, the other from
    # ZooKeeper: ask each broker on each listener
    for broker in two_listeners.brokers:
        on_internal = f"127.0.0.1:{broker.port}"
        on_external = f"{EXTERNAL_HOST}:{external_ports[broker.id]}"
        assert (
            wait_until(lambda a=on_internal: _brokers_seen(a) == internal, what="internal") is True
        )
        assert (
            wait_until(lambda a=on_external: _brokers_seen(a) == external, what="external") is True
        )


def test_records_and_group_coordinator_through_the_external_listener(two_listeners, external_ports):
    bootstrap = ",".join(f"{EXTERNAL_HOST}:{p}" for p in external_ports.values())
    admin = _admin(bootstrap)
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=2)])
    futures[TOPIC].result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(TOPIC, key=str(i).encode(), value=f"value-{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0
    # acks=all on RF 2: the followers fetched over INTERNAL; both replicas are in sync
    meta = admin.list_topics(TOPIC, timeout=30).topics[TOPIC]
    assert all(sorted(p.isrs) == [1, 2] for p in meta.partitions.values())

    group = "two-listeners-group"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        values = set()
        deadline = time.monotonic() + 90
        while len(values) < 100 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                values.add(msg.value())
        assert values == {f"value-{i}".encode() for i in range(100)}
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)])
        assert [tp.offset for tp in committed] == [50, 50]
        # FindCoordinator answered with the coordinator's EXTERNAL address
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        coordinator = described.coordinator
        assert (coordinator.host, coordinator.port) == (
            EXTERNAL_HOST,
            external_ports[coordinator.id],
        )
    finally:
        consumer.close()


def _config(**props) -> BrokerConfig:
    return BrokerConfig({"broker.id": "1", "zookeeper.connect": "127.0.0.1:1", **props})


@pytest.mark.parametrize(
    "props, named",
    [
        (  # a name the map does not know
            {"listeners": "INTERNAL://127.0.0.1:9092"},
            "listener.security.protocol.map",
        ),
        (  # the inter-broker listener must be advertised
            {
                "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
                "listener.security.protocol.map": PROTOCOL_MAP,
                "inter.broker.listener.name": "REPLICATION",
            },
            "inter.broker.listener.name",
        ),
        (  # without inter.broker.listener.name brokers use the PLAINTEXT listener
            {
                "listeners": "INTERNAL://127.0.0.1:9092",
                "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
            },
            "security.inter.broker.protocol",
        ),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:9092",
                "advertised.listeners": "OTHER://127.0.0.1:9092",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            },
            "advertised.listeners",
        ),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map"),
        ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
    ],
)
def test_listener_settings_that_cannot_work_are_refused(props, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        _config(**props)


def test_security_protocols_without_their_settings_refuse_start_up(tmp_path):
    """An SSL:// listener once was served as plaintext; now each protocol must have what
    it needs (a PEM keystore, mechanisms Quill implements) or the broker exits 2 naming
    the key."""
    for listeners, named in [
        ("PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.location"),
        ("PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0", "ssl.keystore.location"),
        ("PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms"),
    ]:
        args = [sys.executable, "-m", "broker", "--override", "broker.id=1"]
        for item in (
            "zookeeper.connect=127.0.0.1:1",
            f"listeners={listeners}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SECURE:SASL_SSL,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT",
        ):
            args += ["--override", item]
        result = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert named in result.stderr
