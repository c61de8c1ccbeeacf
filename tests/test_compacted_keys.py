"""A compacted topic takes no record without a key, as Kafka's LogValidator: the batch
is refused with INVALID_RECORD and record_errors naming each keyless record, so the
cleaner never meets one (a keyless record would be acknowledged, then dropped)."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from kio.schema.errors import ErrorCode

from broker.log.cleaner import CLEANER_CHECKPOINT
from broker.protocol.records import build_batch, decode_records
from pipeline.producer import DeliveryError, RecordProducer
from tests.group_helpers import read_partition, unique
from tests.metrics_helpers import value
from tests.ops_helpers import alter_configs
from tests.wait_helpers import wait_until
from tests.wire import WireClient

MESSAGE = "Compacted topic cannot accept message without key in topic partition"


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1, **{"log.cleaner.backoff.ms": "100", "quill.metrics.port": "free"})


@pytest.fixture()
def wire(broker):
    w = WireClient.for_bootstrap(broker.bootstrap)
    yield w
    w.close()


def _compacted(wire: WireClient, policy: str = "compact", **configs) -> str:
    topic = unique("compacted")
    created = wire.create_topic(topic, configs={"cleanup.policy": policy, **configs})
    assert created.error_code == ErrorCode.none
    wait_until(lambda: wire.list_offset(topic, 0, -1).error_code == ErrorCode.none)
    return topic


def _batch(keys) -> bytes:
    return build_batch([(k, b"v%d" % i, [], 1000) for i, k in enumerate(keys)])


@pytest.mark.parametrize("policy", ["compact", "delete,compact"])
def test_produce_v9_names_every_keyless_record_and_writes_nothing(wire, policy):
    topic = _compacted(wire, policy)
    part = wire.produce(topic, 0, _batch([b"a", None, b"b", None]))
    assert part.error_code == ErrorCode.invalid_record
    assert part.base_offset == -1
    assert [e.batch_index for e in part.record_errors] == [1, 3]
    for e in part.record_errors:
        assert e.batch_index_error_message == f"{MESSAGE} {topic}-0."
    assert part.error_message.startswith(
        "One or more records have been rejected due to 2 record errors in total"
    )
    assert wire.list_offset(topic, 0, -1).offset == 0  # nothing appended
    ok = wire.produce(topic, 0, _batch([b"a", b"b"]))
    assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 0)


def test_refused_keyless_records_are_counted(broker, wire):
    port = broker.brokers[0].metrics_port
    name = "kafka_server_brokertopicmetrics_nokeycompactedtopicrecords_total"
    before = value(port, name)
    topic = _compacted(wire)
    assert wire.produce(topic, 0, _batch([None, b"k", None])).error_code == 87
    assert value(port, name) == before + 2


def test_produce_v7_has_the_error_code_alone(wire):
    topic = _compacted(wire)
    part = wire.produce(topic, 0, _batch([None]), version=7)
    assert part.error_code == ErrorCode.invalid_record
    assert wire.list_offset(topic, 0, -1).offset == 0


def test_kcat_keyless_value_fails_with_invalid_record(broker, wire):
    topic = _compacted(wire)
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0"],
        input=b"no key here\n",
        capture_output=True,
        timeout=60,
    )
    # librdkafka's text for INVALID_RECORD (87)
    assert b"Broker: Broker failed to validate record" in result.stderr, result.stderr
    assert result.returncode != 0
    assert wire.list_offset(topic, 0, -1).offset == 0


def _deliveries(bootstrap: str, topic: str, keys, **conf) -> list:
    """Each record's delivery error (None when acknowledged), in order."""
    out = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    for i, key in enumerate(keys):
        producer.produce(
            topic, value=b"v%d" % i, key=key, partition=0, on_delivery=lambda e, m: out.append(e)
        )
        producer.flush(30)
    return out


@pytest.mark.parametrize("conf", [{}, {"enable.idempotence": True}])
def test_confluent_producer_gets_invalid_record(broker, wire, conf):
    topic = _compacted(wire)
    errors = _deliveries(broker.bootstrap, topic, [b"a", None, b"b"], **conf)
    assert errors[0] is None and errors[2] is None
    assert errors[1] is not None and errors[1].code() == KafkaError.INVALID_RECORD
    assert wire.list_offset(topic, 0, -1).offset == 2  # the two keyed ones


def test_transactional_producer_cannot_commit_a_keyless_record(broker, wire):
    topic = _compacted(wire)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("txn")})
    p.init_transactions(30)
    p.begin_transaction()
    failed = []
    p.produce(topic, value=b"keyed", key=b"k", partition=0)
    p.produce(topic, value=b"keyless", partition=0, on_delivery=lambda e, m: failed.append(e))
    p.flush(30)
    assert failed and failed[0].code() == KafkaError.INVALID_RECORD
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction(30)
    assert raised.value.args[0].txn_requires_abort()
    p.abort_transaction(30)
    assert read_partition(broker.bootstrap, topic, 0, "read_committed") == []


def test_pipeline_producer_raises_instead_of_losing(broker, wire):
    topic = _compacted(wire)
    producer = RecordProducer(broker.bootstrap, {})
    producer.send(topic, b"keyless")
    with pytest.raises(DeliveryError, match="Broker failed to validate record"):
        producer.flush()
    producer.close()


def test_a_topic_altered_to_compact_checks_from_then_on(broker, wire):
    topic = _compacted(wire, "delete")
    assert wire.produce(topic, 0, _batch([None])).error_code == ErrorCode.none
    alter_configs(broker.bootstrap, "topic", topic, {"cleanup.policy": "compact"})
    wait_until(
        lambda: wire.produce(topic, 0, _batch([None])).error_code == ErrorCode.invalid_record,
        what="the new cleanup.policy to reach the log",
    )


def test_the_cleaner_keeps_every_acknowledged_latest_value(broker, wire):
    """Keyed and keyless records mixed, one per request: the keyless ones are refused,
    and after the cleaner has run every key still reads its last acknowledged value."""
    topic = _compacted(wire, **{"segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"})
    keys = [None if i % 4 == 3 else b"k%d" % (i % 5) for i in range(200)]
    errors = _deliveries(broker.bootstrap, topic, keys)
    acked = [
        (k, b"v%d" % i) for i, (k, e) in enumerate(zip(keys, errors, strict=True)) if e is None
    ]
    assert all(k is not None for k, _ in acked)
    assert len(acked) == 150
    assert all(e.code() == KafkaError.INVALID_RECORD for e in errors if e is not None)
    checkpoint = broker.brokers[0].log_dir / CLEANER_CHECKPOINT

    def cleaned() -> bool:
        return checkpoint.exists() and f"{topic} 0 " in checkpoint.read_text()

    wait_until(cleaned, timeout=90, interval=0.5, what="the cleaner to clean the topic")
    got = read_partition(broker.bootstrap, topic, 0)
    assert len(got) < len(acked)  # cleaned
    assert all(k is not None for _, k, _ in got)
    assert {k: v for _, k, v in got} == dict(acked)  # the last acknowledged value per key


def test_records_decode_keyless_as_none():
    """The check rests on a null key decoding as None, not as b''."""
    (rec,) = decode_records(_batch([None]))
    assert rec.key is None
    (rec,) = decode_records(_batch([b""]))
    assert rec.key == b""
