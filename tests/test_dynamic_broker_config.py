"""Dynamic broker configs (KIP-226) on a real 2-broker cluster, with confluent-kafka's
AdminClient and quill-configs: per-broker (/config/brokers/<id>) and cluster-wide
(/config/brokers/<default>) values applied live and after a restart, Kafka's errors
for read-only and per-broker-only keys, and DescribeConfigs' sources and synonyms."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kazoo.exceptions import NoNodeError

from broker.zk.znodes import ConfigEntityChangeNotificationZNode, ConfigEntityZNode
from tests.cli_helpers import tool
from tests.metrics_helpers import samples
from tests.ops_helpers import create_topic, state, unique
from tests.wait_helpers import wait_until
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

SETTINGS = {
    "log.segment.bytes": "1024",  # static: small segments, so retention has some to delete
    "log.retention.check.interval.ms": "300",
    "log.retention.hours": "168",
    "offsets.topic.replication.factor": "1",
    "quill.metrics.port": "free",
    "num.replica.fetchers": "2",  # static; dynamic changes in test_num_replica_fetchers...
}
BROKER = ConfigResource.Type.BROKER


@pytest.fixture(scope="module")
def cluster(cluster_factory):
    return cluster_factory(2, **SETTINGS)


@pytest.fixture(scope="module")
def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def _incremental(admin, name: str, ops: dict, validate_only: bool = False) -> None:
    """{key: (op, value)} on one BROKER resource, IncrementalAlterConfigs."""
    res = ConfigResource(
        BROKER,
        name,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=op) for k, (op, v) in ops.items()
        ],
    )
    admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(30)


def _describe(admin, name: str) -> dict:
    res = ConfigResource(BROKER, name)
    return admin.describe_configs([res])[res].result(30)


def _wire_synonyms(cluster, resource_type: int, name: str, key: str) -> list[tuple]:
    """DescribeConfigs v4 with synonyms, straight off the wire from broker 1 (librdkafka
    keeps one synonym per name, and Kafka lists a name once per level)."""
    w = WireClient.for_bootstrap(cluster.bootstrap)
    try:
        resp = w.request(
            32,
            4,
            {
                "resources": [
                    {
                        "resource_type": resource_type,
                        "resource_name": name,
                        "configuration_keys": [key],
                    }
                ],
                "include_synonyms": True,
                "include_documentation": False,
            },
        )
    finally:
        w.close()
    (config,) = resp.results[0].configs
    return [(s.name, s.value, ConfigSource(int(s.source)).name) for s in config.synonyms]


def _zk_config(cluster, entity: str) -> dict | None:
    try:
        data, _ = cluster.zk_client().get(ConfigEntityZNode.path("brokers", entity))
    except NoNodeError:
        return None
    return json.loads(data)["config"]


def _earliest(cluster, topic: str) -> int:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "dyn-watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[0]
    finally:
        c.close()


def _produce(cluster, topic: str, value: bytes, count: int = 1, timestamp: int = 0) -> list:
    """Errors (None for each success) of ``count`` records to partition 0."""
    outcomes = []
    p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "retries": 0})
    for _ in range(count):
        p.produce(
            topic,
            value=value,
            partition=0,
            timestamp=timestamp,
            on_delivery=lambda err, _msg: outcomes.append(err),
        )
        p.flush(30)
    return [None if e is None else e.code() for e in outcomes]


def test_cluster_default_retention_deletes_old_segments(cluster, admin):
    """log.retention.ms at <default> (quill-configs --entity-default): a topic with no
    override deletes its old segments; its DescribeConfigs names the dynamic default."""
    topic = create_topic(cluster, "dynret", [[1]])
    hour_ago = int(time.time() * 1000) - 3_600_000
    assert _produce(cluster, topic, b"x" * 300, count=12, timestamp=hour_ago) == [None] * 12
    time.sleep(1.0)  # several retention checks at the static 168 h: nothing goes
    assert _earliest(cluster, topic) == 0

    run = tool(
        "configs",
        cluster.bootstrap,
        "--entity-type brokers --entity-default --alter --add-config log.retention.ms=60000",
    )
    assert run.code == 0, run.err
    assert run.out.strip() == "Completed updating default config for brokers in the cluster."
    zk = cluster.zk_client()
    data, _ = zk.get(ConfigEntityZNode.path("brokers", "<default>"))
    assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "60000"}}
    changes = zk.get_children(ConfigEntityChangeNotificationZNode.path)
    entity_paths = [
        json.loads(zk.get(f"{ConfigEntityChangeNotificationZNode.path}/{c}")[0])["entity_path"]
        for c in changes
    ]
    assert "brokers/<default>" in entity_paths

    wait_until(lambda: _earliest(cluster, topic) > 0, timeout=60, what="old segments deleted")
    assert _earliest(cluster, topic) <= 12

    tres = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entry = admin.describe_configs([tres])[tres].result(30)["retention.ms"]
    assert entry.value == "60000"
    assert ConfigSource(entry.source) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert _wire_synonyms(cluster, 2, topic, "retention.ms")[:2] == [
        ("log.retention.ms", "60000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "168", "STATIC_BROKER_CONFIG"),
    ]

    run = tool("configs", cluster.bootstrap, "--entity-type brokers --entity-default --describe")
    assert run.code == 0, run.err
    assert run.lines == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=60000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
        "log.retention.ms=60000, STATIC_BROKER_CONFIG:log.retention.hours=168, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    run = tool(
        "configs",
        cluster.bootstrap,
        "--entity-type brokers --entity-default --alter --delete-config log.retention.ms",
    )
    assert run.code == 0, run.err
    wait_until(
        lambda: _describe(admin, "1")["log.retention.ms"].value is None,
        what="the default removed",
    )


def test_per_broker_message_max_bytes_and_restart(cluster, admin):
    """message.max.bytes on broker 1 only: the next produce there gets MESSAGE_TOO_LARGE,
    broker 2 still takes it; after a restart broker 1 still applies it."""
    on_1, on_2 = unique("dynmax1"), unique("dynmax2")
    new = [  # segments larger than the records (the cluster's static ones are 1 KiB)
        NewTopic(t, num_partitions=1, replica_assignment=[[b]], config={"segment.bytes": "1048576"})
        for t, b in ((on_1, 1), (on_2, 2))
    ]
    for future in admin.create_topics(new).values():
        future.result(30)
    big = b"y" * 3000
    assert _produce(cluster, on_1, big) == [None]

    _incremental(admin, "1", {"message.max.bytes": (AlterConfigOpType.SET, "2000")})
    entry = _describe(admin, "1")["message.max.bytes"]
    assert (entry.value, ConfigSource(entry.source)) == (
        "2000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert _wire_synonyms(cluster, 4, "1", "message.max.bytes") == [
        ("message.max.bytes", "2000", "DYNAMIC_BROKER_CONFIG"),
        ("message.max.bytes", "1048588", "DEFAULT_CONFIG"),
    ]
    assert not entry.is_read_only
    assert _describe(admin, "2")["message.max.bytes"].value == "1048588"
    assert _produce(cluster, on_1, big) == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert _produce(cluster, on_2, big) == [None]
    assert _produce(cluster, on_1, b"z" * 500) == [None]

    cluster.broker(1).restart()
    wait_until(
        lambda: _describe(admin, "1")["message.max.bytes"].value == "2000",
        what="broker 1 back with its dynamic config",
    )
    wait_until(lambda: _produce(cluster, on_1, b"z") == [None], what="broker 1 leading again")
    assert _produce(cluster, on_1, big) == [KafkaError.MSG_SIZE_TOO_LARGE]

    # precedence: broker 1's own value over the cluster default, which broker 2 takes
    default = "--entity-type brokers --entity-default --alter"
    run = tool("configs", cluster.bootstrap, f"{default} --add-config message.max.bytes=2500")
    assert run.code == 0, run.err
    wait_until(
        lambda: _produce(cluster, on_2, big) == [KafkaError.MSG_SIZE_TOO_LARGE],
        what="2500 on broker 2",
    )
    assert _wire_synonyms(cluster, 4, "1", "message.max.bytes") == [
        ("message.max.bytes", "2000", "DYNAMIC_BROKER_CONFIG"),
        ("message.max.bytes", "2500", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("message.max.bytes", "1048588", "DEFAULT_CONFIG"),
    ]
    _incremental(admin, "1", {"message.max.bytes": (AlterConfigOpType.DELETE, None)})
    wait_until(lambda: _produce(cluster, on_1, b"w" * 2200) == [None], what="2500 on broker 1")
    assert _produce(cluster, on_1, big) == [KafkaError.MSG_SIZE_TOO_LARGE]
    run = tool("configs", cluster.bootstrap, f"{default} --delete-config message.max.bytes")
    assert run.code == 0, run.err
    wait_until(lambda: _produce(cluster, on_1, big) == [None], what="the limit lifted")
    wait_until(lambda: _produce(cluster, on_2, big) == [None], what="the limit lifted on 2")


def _alter_error(admin, name: str, configs: dict) -> KafkaError:
    res = ConfigResource(
        BROKER,
        name,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([res])[res].result(30)
    return info.value.args[0]


REFUSED = [  # (key, value, INVALID_CONFIG's message, or its start)
    (
        "log.retention.hours",
        "1",
        "Cannot update these configs dynamically: Set(log.retention.hours)",
    ),
    (
        "ssl.keystore.location",
        "/k.pem",
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: Set(ssl.keystore.location)",
    ),
    (
        "message.max.bytes",
        "lots",
        "Invalid value lots for configuration message.max.bytes: Not a number of type INT",
    ),
    (
        "log.cleaner.io.max.bytes.per.second",
        "0",
        "Invalid value 0 for configuration log.cleaner.io.max.bytes.per.second: "
        "Value must be above 0",
    ),
    ("log.cleaner.threads", "2", "Cannot update log.cleaner.threads dynamically in Quill: "),
    # one event loop per broker: no thread pool for these to size
    ("num.io.threads", "16", "Cannot update num.io.threads dynamically in Quill: requests are"),
    ("background.threads", "4", "Cannot update background.threads dynamically in Quill: "),
    # a listener's keystore password needs the static password.encoder.secret
    ("listener.name.plaintext.ssl.key.password", "pw", "Password encoder secret not configured"),
    ("log.cleanup.policy", "shred", "Invalid value shred for configuration log.cleanup.policy"),
]


def test_read_only_and_invalid_values_refused(cluster, admin):
    for key, value, message in REFUSED:
        err = _alter_error(admin, "1", {key: value})
        assert err.code() == KafkaError.INVALID_CONFIG, key
        assert err.str().startswith(message), err.str()
    assert _describe(admin, "1")["log.retention.hours"].is_read_only
    assert _wire_synonyms(cluster, 4, "1", "log.segment.bytes") == [
        ("log.segment.bytes", "1024", "STATIC_BROKER_CONFIG"),
        ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG"),
    ]

    run = tool(
        "configs",
        cluster.bootstrap,
        "--entity-type brokers --entity-default --alter --add-config listeners=PLAINTEXT://:1",
    )
    assert run.code == 1
    assert (
        "Cannot update these configs at default cluster level, broker id must be "
        "specified: Set(listeners)" in run.err
    )
    assert "log.retention.hours" not in (_zk_config(cluster, "1") or {})
    assert "listeners" not in (_zk_config(cluster, "<default>") or {})


def test_unknown_key_stored_append_and_validate_only(cluster, admin):
    """An unknown key is stored as Kafka stores it; APPEND on a list key starts from
    Kafka's default, and the topics on broker 2 turn compacted (keyless records are
    refused there); validate_only writes nothing."""
    topic = create_topic(cluster, "dyncompact", [[2]])
    assert _produce(cluster, topic, b"keyless") == [None]
    _incremental(admin, "2", {"log.cleanup.policy": (AlterConfigOpType.APPEND, "compact")})
    _incremental(admin, "2", {"cleanup.policy": (AlterConfigOpType.SET, "compact")})
    assert _zk_config(cluster, "2") == {
        "log.cleanup.policy": "delete,compact",
        "cleanup.policy": "compact",
    }
    entry = _describe(admin, "2")["log.cleanup.policy"]
    assert (entry.value, ConfigSource(entry.source).name) == (
        "delete,compact",
        "DYNAMIC_BROKER_CONFIG",
    )
    wait_until(
        lambda: _produce(cluster, topic, b"keyless") == [KafkaError.INVALID_RECORD],
        what="the topic compacted by broker 2's default",
    )
    res = ConfigResource(
        BROKER,
        "2",
        incremental_configs=[
            ConfigEntry("message.max.bytes", "1", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    with pytest.raises(KafkaException) as info:
        admin.incremental_alter_configs([res])[res].result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert info.value.args[0].str() == (
        "Config value append is not allowed for config key: message.max.bytes"
    )
    _incremental(
        admin, "2", {"log.retention.bytes": (AlterConfigOpType.SET, "100")}, validate_only=True
    )
    assert "log.retention.bytes" not in _zk_config(cluster, "2")
    _incremental(admin, "2", {"log.cleanup.policy": (AlterConfigOpType.SUBTRACT, "compact")})
    assert _zk_config(cluster, "2")["log.cleanup.policy"] == "delete"
    wait_until(lambda: _produce(cluster, topic, b"keyless") == [None], what="delete again")


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_replaces_the_level_min_insync_applies(cluster, admin):
    """AlterConfigs (not incremental) replaces broker 2's whole level, as Kafka's does;
    min.insync.replicas=2 there makes acks=all on a 1-replica topic NOT_ENOUGH_REPLICAS."""
    topic = create_topic(cluster, "dynisr", [[2]])
    assert _produce(cluster, topic, b"a") == [None]
    res = ConfigResource(BROKER, "2", set_config={"min.insync.replicas": "2"})
    admin.alter_configs([res])[res].result(30)
    assert _zk_config(cluster, "2") == {"min.insync.replicas": "2"}
    wait_until(
        lambda: _produce(cluster, topic, b"b") == [KafkaError.NOT_ENOUGH_REPLICAS],
        what="min.insync.replicas=2 applied on broker 2",
    )
    res = ConfigResource(BROKER, "2", set_config={})
    admin.alter_configs([res])[res].result(30)
    wait_until(lambda: _produce(cluster, topic, b"c") == [None], what="back to 1")


def _admitted(broker, source_host: str) -> bool:
    """Whether the broker answers ApiVersions on a connection from ``source_host``."""
    host, port = broker.address.rsplit(":", 1)
    w = WireClient(host, int(port), source_host=source_host)
    try:
        return w.request(18, 0, {}).error_code == 0
    except (ConnectionError, OSError):
        return False
    finally:
        w.close()


def test_connection_limit_overrides_apply_to_new_connections(cluster, admin):
    broker = cluster.broker(1)
    assert _admitted(broker, "127.0.0.2")
    _incremental(
        admin, "1", {"max.connections.per.ip.overrides": (AlterConfigOpType.SET, "127.0.0.2:0")}
    )
    wait_until(lambda: not _admitted(broker, "127.0.0.2"), what="127.0.0.2 refused")
    assert _admitted(broker, "127.0.0.1")
    _incremental(admin, "1", {"max.connections.per.ip.overrides": (AlterConfigOpType.DELETE, None)})
    wait_until(lambda: _admitted(broker, "127.0.0.2"), what="127.0.0.2 admitted again")


FETCHER_REQUESTS = "kafka_server_fetcherstats_requests_total"


def _fetchers(broker) -> dict[str, float]:
    """clientId -> Fetch requests sent, of each replica fetcher the broker runs."""
    return {
        dict(labels)["clientId"]: v
        for (name, labels), v in samples(broker.metrics_port).items()
        if name == FETCHER_REQUESTS
    }


def _java_fetcher_id(topic: str, partition: int, fetchers: int) -> int:
    """Kafka's getFetcherId, written out again here to check the broker's."""
    h = 0
    for ch in topic:
        h = (31 * h + ord(ch)) % 2**32
    h = (31 * h + partition) % 2**32
    h = h - 2**32 if h >= 2**31 else h
    return abs(h) % fetchers


def _fetcher_ids(follower) -> set[int]:
    """Fetcher ids of broker 2's fetchers from leader 1."""
    return {int(name.split("-")[1]) for name in _fetchers(follower) if name.endswith("-1")}


def _fetching(follower, topic: str, n: int) -> bool:
    """Broker 2 runs the fetchers Kafka's hash puts the topic's partitions on, and
    none of an id the pool of ``n`` does not have."""
    wanted = {_java_fetcher_id(topic, p, n) for p in range(8)}
    ids = _fetcher_ids(follower)
    return bool(ids) and wanted <= ids and max(ids) < n


def _produce_acks_all(cluster, topic: str, value: bytes) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
    errors = []
    for partition in range(8):
        p.produce(topic, value, partition=partition, on_delivery=lambda e, _m: errors.append(e))
    assert p.flush(30) == 0 and errors == [None] * 8


def test_num_replica_fetchers_resized_live(cluster, admin):
    """Broker 2 (static num.replica.fetchers=2) follows 8 partitions led by broker 1:
    two fetchers, then three (dynamic), then two again (the dynamic value deleted), the
    partitions hashed across them as Kafka does; acks=all produces (broker 2 in the
    ISR) succeed throughout."""
    topic = create_topic(cluster, "dynfetch", [[1, 2]] * 8)
    follower = cluster.broker(2)
    wait_until(lambda: _fetching(follower, topic, 2), what="two fetchers (static)")
    _produce_acks_all(cluster, topic, b"v")

    _incremental(admin, "2", {"num.replica.fetchers": (AlterConfigOpType.SET, "3")})
    wait_until(lambda: _fetching(follower, topic, 3), what="three fetchers")
    wait_until(lambda: min(_fetchers(follower).values()) > 0, what="every fetcher fetching")
    _produce_acks_all(cluster, topic, b"w")
    wait_until(
        lambda: all(state(cluster, topic, i)["isr"] == [1, 2] for i in range(8)),
        what="the ISR intact",
    )
    assert _describe(admin, "2")["num.replica.fetchers"].value == "3"

    _incremental(admin, "2", {"num.replica.fetchers": (AlterConfigOpType.DELETE, None)})
    wait_until(lambda: _fetching(follower, topic, 2), what="two fetchers again")
    _produce_acks_all(cluster, topic, b"x")
    assert _describe(admin, "2")["num.replica.fetchers"].value == "2"


def test_cli_alter_and_describe_one_broker(cluster):
    """quill-configs --entity-name 2: Kafka's lines, every synonym of each level."""
    base = "--entity-type brokers --entity-name 2"
    run = tool(
        "configs", cluster.bootstrap, f"{base} --alter --add-config log.retention.bytes=5000"
    )
    assert run.code == 0, run.err
    assert run.out.strip() == "Completed updating config for broker 2."
    run = tool("configs", cluster.bootstrap, f"{base} --describe")
    assert run.code == 0, run.err
    assert run.lines[0] == "Dynamic configs for broker 2 are:"
    assert (
        "  log.retention.bytes=5000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.bytes=5000, DEFAULT_CONFIG:log.retention.bytes=-1}" in run.lines
    )
    run = tool("configs", cluster.bootstrap, f"{base} --describe --all")
    assert (
        "  log.segment.bytes=1024 sensitive=false synonyms={STATIC_BROKER_CONFIG:"
        "log.segment.bytes=1024, DEFAULT_CONFIG:log.segment.bytes=1073741824}" in run.lines
    )
    run = tool("configs", cluster.bootstrap, f"{base} --alter --delete-config log.retention.bytes")
    assert run.code == 0, run.err
    assert "log.retention.bytes" not in _zk_config(cluster, "2")


def test_unclean_election_default_turned_on_elects_the_offline_partition(cluster_factory):
    """unclean.leader.election.enable=true at <default>: the controller elects an
    out-of-sync replica for a partition left without a leader, as Kafka's
    enableDefaultUncleanLeaderElection does."""
    c = cluster_factory(3, **{"replica.lag.time.max.ms": "2000"}, **SETTINGS)
    topic = create_topic(c, "dynunclean", [[1, 2]])
    c.broker(2).stop()
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": 1})
    p.produce(topic, value=b"only-on-1", partition=0)
    assert p.flush(30) == 0
    wait_until(lambda: state(c, topic, 0)["isr"] == [1], what="broker 2 out of the ISR")
    c.broker(1).stop()
    wait_until(lambda: state(c, topic, 0)["leader"] == -1, what="the partition offline")
    c.broker(2).start()
    wait_until(lambda: "2" in c.zk_client().get_children("/brokers/ids"), what="2 back")
    time.sleep(2.0)  # the controller has seen broker 2 come back: no clean leader for it
    assert state(c, topic, 0)["leader"] == -1
    default = "--entity-type brokers --entity-default --alter"
    run = tool(
        "configs", c.bootstrap, f"{default} --add-config unclean.leader.election.enable=true"
    )
    assert run.code == 0, run.err
    wait_until(lambda: state(c, topic, 0)["leader"] == 2, what="broker 2 elected uncleanly")
    assert state(c, topic, 0)["isr"] == [2]
