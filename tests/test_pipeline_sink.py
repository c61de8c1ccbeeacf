"""The `quill` sink against a real broker: batch and streaming round trips, read back
by a plain librdkafka consumer."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

pytest.register_assert_rewrite("tests.pipeline_helpers")

from pipeline.exactly_once import EOS_HEADER  # noqa: E402
from tests.pipeline_helpers import (  # noqa: E402
    consume_all,
    create_topic,
    produce,
    start_copy,
    topic_name,
)

pytestmark = pytest.mark.spark
pytest_plugins = ["tests.pipeline_helpers"]  # the shared `spark` fixture

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
SINK_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("headers", HEADERS),
    ]
)


@pytest.fixture(scope="module")
def bootstrap(cluster_factory):
    return cluster_factory(1).bootstrap


def test_batch_write_round_trip(spark, bootstrap):
    a = create_topic(bootstrap, topic_name("sink-a"), 2)
    b = create_topic(bootstrap, topic_name("sink-b"), 1)
    rows = [
        Row(
            key=None if i % 4 == 0 else f"k{i}",
            value=None if i % 9 == 0 else bytes([i % 256]) * (i % 5),
            topic=a if i % 3 else b,
            partition=(i % 2) if i % 3 else 0,
            headers=[Row(key="n", value=b"%d" % i), Row(key="nil", value=None)] if i % 2 else None,
        )
        for i in range(300)
    ]
    spark.createDataFrame(rows, SINK_SCHEMA).write.format("quill").option(
        "kafka.bootstrap.servers", bootstrap
    ).mode("append").save()

    def expected(topic):
        wanted = [
            (
                r.partition,
                None if r.key is None else r.key.encode(),
                r.value,
                tuple((h.key, h.value) for h in r.headers or ()),
            )
            for r in rows
            if r.topic == topic
        ]
        return sorted(wanted, key=repr)

    for topic in (a, b):
        got = sorted(
            ((r.partition, r.key, r.value, r.headers) for r in consume_all(bootstrap, topic)),
            key=repr,
        )
        assert got == expected(topic)


def test_topic_option_wins_and_strings_are_utf8(spark, bootstrap):
    topic = create_topic(bootstrap, topic_name("sink-opt"), 1)
    df = spark.createDataFrame(
        [("ключ", "значение", "not-this-topic")], "key string, value string, topic string"
    )
    df.write.format("quill").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).mode("append").save()
    (rec,) = consume_all(bootstrap, topic)
    assert (rec.key, rec.value) == ("ключ".encode(), "значение".encode())


def test_keyed_records_go_where_kafka_puts_them(spark, bootstrap):
    """murmur2(key) % partitions, as Kafka's Java client (and Spark's Kafka sink)."""
    from confluent_kafka import Producer

    via_spark = create_topic(bootstrap, topic_name("murmur-s"), 5)
    direct = create_topic(bootstrap, topic_name("murmur-d"), 5)
    keys = [f"user-{i}" for i in range(50)]
    spark.createDataFrame([(k, "v") for k in keys], "key string, value string").write.format(
        "quill"
    ).option("kafka.bootstrap.servers", bootstrap).option("topic", via_spark).mode("append").save()
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for k in keys:
        p.produce(direct, b"v", k.encode())
    p.flush(30)

    def placement(topic):
        return sorted((r.key, r.partition) for r in consume_all(bootstrap, topic))

    assert placement(via_spark) == placement(direct)
    assert len({p for _, p in placement(direct)}) > 1


def test_stream_sink_round_trip_is_exactly_once(spark, bootstrap, tmp_path):
    src = create_topic(bootstrap, topic_name("es-src"), 3)
    dst = create_topic(bootstrap, topic_name("es-dst"), 2)
    produce(bootstrap, src, [{"key": b"k%d" % (i % 7), "value": b"v%05d" % i} for i in range(500)])
    q = start_copy(spark, bootstrap, src, dst, tmp_path / "ck", maxOffsetsPerTrigger="200")
    try:
        q.processAllAvailable()
        produce(bootstrap, src, [{"key": b"late", "value": b"v%05d" % i} for i in range(500, 560)])
        q.processAllAvailable()
        query_id = q.id
    finally:
        q.stop()
    out = consume_all(bootstrap, dst)
    assert sorted(r.value for r in out) == [b"v%05d" % i for i in range(560)]
    tags = [dict(r.headers)[EOS_HEADER].decode() for r in out]
    assert all(t.startswith(f"{query_id}/") for t in tags)
    assert len(set(tags)) == 560
    # per key, the order of the source is kept
    for key in {r.key for r in out}:
        vals = [r.value for r in sorted(out, key=lambda r: (r.partition, r.offset)) if r.key == key]
        assert vals == sorted(vals)
