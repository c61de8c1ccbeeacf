"""Admin APIs through librdkafka's AdminClient and the raw wire: topics, partitions,
configs, cluster, log dirs; and the errors Kafka gives for bad requests."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError as CKError
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from confluent_kafka.admin import (
    ConfigSource as CKConfigSource,
)
from kio.schema.errors import ErrorCode

from tests.wire import WireClient


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1)


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _error_of(fut) -> int:
    with pytest.raises(Exception) as info:
        fut.result(timeout=30)
    return info.value.args[0].code()


def test_create_describe_alter_delete(admin, broker):
    name = _name("adm")
    admin.create_topics([NewTopic(name, 2, 1, config={"retention.ms": "12345"})])[name].result(30)
    md = admin.list_topics(topic=name, timeout=10)
    assert sorted(md.topics[name].partitions) == [0, 1]
    assert md.topics[name].partitions[0].leader == broker.brokers[0].id

    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "12345"
    assert not configs["retention.ms"].is_default
    assert configs["segment.bytes"].value == "1073741824"

    alter = ConfigResource(
        ConfigResource.Type.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([alter])[alter].result(30)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "12345"

    admin.create_partitions([NewPartitions(name, 5)])[name].result(30)
    assert len(admin.list_topics(topic=name, timeout=10).topics[name].partitions) == 5

    admin.delete_topics([name])[name].result(30)
    assert name not in admin.list_topics(timeout=10).topics


def _synonyms(admin, name: str) -> dict[str, list[tuple[str, str, int]]]:
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([res])[res].result(30)  # librdkafka asks for synonyms
    return {
        key: [(s.name, s.value, s.source) for s in entry.synonyms.values()]
        for key, entry in configs.items()
    }


def test_describe_configs_synonyms_are_kafkas(admin, cluster_factory):
    """Kafka's synonyms for a topic without overrides: none for retention.ms and
    segment.ms when the broker sets neither log.retention.ms nor log.roll.ms, the
    default for compression.type; a broker key set in server.properties comes first."""
    default = CKConfigSource.DEFAULT_CONFIG.value
    static = CKConfigSource.STATIC_BROKER_CONFIG.value
    name = _name("syn")
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    got = _synonyms(admin, name)
    assert got["retention.ms"] == [] and got["segment.ms"] == []
    assert got["compression.type"] == [("compression.type", "producer", default)]
    assert got["cleanup.policy"] == [("log.cleanup.policy", "delete", default)]

    other = cluster_factory(1, **{"log.retention.ms": "90000000", "log.roll.hours": "5"})
    other_admin = AdminClient({"bootstrap.servers": other.bootstrap})
    other_admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    got = _synonyms(other_admin, name)
    assert got["retention.ms"] == [
        ("log.retention.ms", "90000000", static),
        ("log.retention.hours", "168", default),
    ]
    assert got["segment.ms"] == []  # log.roll.hours alone: dropped, as Kafka


def test_bad_requests_get_kafka_errors(admin):
    name = _name("bad")
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(30)
    assert (
        _error_of(admin.create_topics([NewTopic(name, 1, 1)])[name]) == CKError.TOPIC_ALREADY_EXISTS
    )
    assert (
        _error_of(admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"])
        == CKError.TOPIC_EXCEPTION
    )
    bad_cfg = _name("cfg")
    fut = admin.create_topics([NewTopic(bad_cfg, 1, 1, config={"retention.ms": "soon"})])[bad_cfg]
    assert _error_of(fut) == CKError.INVALID_CONFIG
    assert bad_cfg not in admin.list_topics(timeout=10).topics
    rf = _name("rf")
    assert (
        _error_of(admin.create_topics([NewTopic(rf, 1, 3)])[rf])
        == CKError.INVALID_REPLICATION_FACTOR
    )
    assert (
        _error_of(admin.create_partitions([NewPartitions(name, 2)])[name])
        == CKError.INVALID_PARTITIONS
    )
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "-7x", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert _error_of(admin.incremental_alter_configs([res])[res]) == CKError.INVALID_CONFIG
    ghost = _name("ghost")
    assert _error_of(admin.delete_topics([ghost])[ghost]) == CKError.UNKNOWN_TOPIC_OR_PART


def test_validate_only_creates_nothing(admin):
    name = _name("dry")
    admin.create_topics([NewTopic(name, 4, 1)], validate_only=True)[name].result(30)
    assert name not in admin.list_topics(timeout=10).topics


def test_describe_cluster_and_log_dirs_on_the_wire(broker):
    w = WireClient.for_bootstrap(broker.bootstrap)
    try:
        cluster = w.request(60, 0, {"include_cluster_authorized_operations": False})
        assert cluster.error_code == ErrorCode.none
        assert [b.broker_id for b in cluster.brokers] == [broker.brokers[0].id]
        assert cluster.controller_id == broker.brokers[0].id
        name = _name("dirs")
        assert w.create_topic(name, 2).error_code == ErrorCode.none
        dirs = w.request(35, 4, {"topics": None})
        assert dirs.error_code == ErrorCode.none
        names = {t.name: len(t.partitions) for d in dirs.results for t in d.topics}
        assert names[name] == 2
        pid1 = w.request(
            22,
            4,
            {
                "transactional_id": None,
                "transaction_timeout": 1000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        pid2 = w.request(
            22,
            4,
            {
                "transactional_id": None,
                "transaction_timeout": 1000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        assert pid1.error_code == ErrorCode.none and pid2.producer_id == pid1.producer_id + 1
    finally:
        w.close()


def test_auto_create_and_its_switch(cluster_factory):
    on = cluster_factory(1, **{"num.partitions": "3"})
    w = WireClient.for_bootstrap(on.bootstrap)
    md = w.request(3, 12, {"topics": [{"name": "auto-made"}], "allow_auto_topic_creation": True})
    assert md.topics[0].error_code == ErrorCode.none and len(md.topics[0].partitions) == 3
    md = w.request(3, 12, {"topics": [{"name": "not-made"}], "allow_auto_topic_creation": False})
    assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    w.close()
    off = cluster_factory(1, **{"auto.create.topics.enable": "false"})
    w = WireClient.for_bootstrap(off.bootstrap)
    md = w.request(3, 12, {"topics": [{"name": "auto-made"}], "allow_auto_topic_creation": True})
    assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    w.close()


@pytest.mark.slow
def test_two_thousand_partitions_on_one_broker(cluster_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = cluster_factory(1)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    name = _name("wide")
    admin.create_topics([NewTopic(name, 2000, 1)], request_timeout=120)[name].result(120)
    md = admin.list_topics(topic=name, timeout=30)
    assert len(md.topics[name].partitions) == 2000
    assert all(p.leader == c.brokers[0].id for p in md.topics[name].partitions.values())
    producer = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 20})
    for p in range(2000):
        producer.produce(name, value=b"p%d" % p, partition=p)
    assert producer.flush(120) == 0
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "w"})
    for p in (0, 999, 1999):
        assert consumer.get_watermark_offsets(TopicPartition(name, p), timeout=30) == (0, 1)
    consumer.close()
