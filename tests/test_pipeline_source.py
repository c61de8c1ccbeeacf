"""The `quill` source against a real broker: batch reads byte for byte, offsets and
timestamps, splitting, data loss, and streaming reads across triggers and restarts."""

from __future__ import annotations

import json
import os
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

pytest.register_assert_rewrite("tests.pipeline_helpers")

from tests.pipeline_helpers import (  # noqa: E402
    consume_all,
    create_topic,
    produce,
    rows_as_recs,
    topic_name,
)

pytestmark = pytest.mark.spark
pytest_plugins = ["tests.pipeline_helpers"]  # the shared `spark` fixture


@pytest.fixture(scope="module")
def bootstrap(cluster_factory):
    return cluster_factory(1).bootstrap


def read(spark, bootstrap, **options):
    reader = spark.read.format("quill").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def sample(n: int, partitions: int = 3) -> list[dict]:
    """Keys, null keys, empty and null values, binary bytes, headers with null values."""
    out = []
    for i in range(n):
        out.append(
            {
                "key": None if i % 5 == 0 else f"k{i % 7}".encode(),
                "value": None
                if i % 11 == 0
                else (b"" if i % 13 == 0 else os.urandom(8) + b"%d" % i),
                "partition": i % partitions,
                "headers": [("h", b"\x00\xff"), ("nil", None)] if i % 2 else None,
                "timestamp": 1_700_000_000_000 + i * 10,
            }
        )
    return out


def test_batch_read_is_byte_exact(spark, bootstrap):
    topic = create_topic(bootstrap, topic_name("exact"))
    stored = produce(bootstrap, topic, sample(600))
    df = read(spark, bootstrap, subscribe=topic, includeHeaders="true")
    got = rows_as_recs(df.orderBy("partition", "offset").collect())
    assert got == sorted(stored, key=lambda r: (r.partition, r.offset))
    assert {r.topic for r in df.select("topic").distinct().collect()} == {topic}
    # one Spark partition per topic-partition
    assert df.rdd.getNumPartitions() == 3


def test_batch_read_log_append_time(spark, bootstrap):
    topic = create_topic(
        bootstrap, topic_name("lat"), 1, {"message.timestamp.type": "LogAppendTime"}
    )
    stored = produce(bootstrap, topic, [{"value": b"a", "timestamp": 1000}, {"value": b"b"}])
    got = rows_as_recs(read(spark, bootstrap, subscribe=topic).orderBy("offset").collect())
    assert [r.timestamp_type for r in got] == [1, 1]
    assert [r.timestamp for r in got] == [r.timestamp for r in stored]
    assert got[0].timestamp != 1000


def test_offsets_and_timestamps_select_ranges(spark, bootstrap):
    topic = create_topic(bootstrap, topic_name("range"), 2)
    produce(bootstrap, topic, sample(200, partitions=2))  # 100 per partition
    start = json.dumps({topic: {"0": 10, "1": -2}})
    end = json.dumps({topic: {"0": 20, "1": -1}})
    rows = read(spark, bootstrap, subscribe=topic, startingOffsets=start, endingOffsets=end)
    offsets = sorted((r.partition, r.offset) for r in rows.collect())
    assert offsets == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(100)]

    # i-th record of each partition has timestamp 1.7e12 + 10 * (2 * i + p)
    by_time = read(spark, bootstrap, subscribe=topic, startingTimestamp="1700000001000")
    assert by_time.count() == 2 * 50
    per_partition = json.dumps({topic: {"0": 1_700_000_001_000, "1": 1_700_000_001_990}})
    rows = read(spark, bootstrap, subscribe=topic, startingOffsetsByTimestamp=per_partition)
    assert sorted((r.partition, r.offset) for r in rows.select("partition", "offset").collect())[
        :1
    ] == [(0, 50)]
    assert rows.filter("partition = 1").count() == 1  # only offset 99 is that late
    end_time = read(spark, bootstrap, subscribe=topic, endingTimestamp="1700000000100")
    assert end_time.count() == 10  # offsets 0..4 of each partition


def test_assign_pattern_and_min_partitions(spark, bootstrap):
    a = create_topic(bootstrap, topic_name("pat-a"), 2)
    b = create_topic(bootstrap, f"{a}-b", 1)
    produce(bootstrap, a, [{"value": b"%d" % i, "partition": i % 2} for i in range(1000)])
    produce(bootstrap, b, [{"value": b"x"}] * 10)
    assigned = read(spark, bootstrap, assign=json.dumps({a: [1]}))
    assert {r.partition for r in assigned.select("partition").collect()} == {1}
    assert assigned.count() == 500
    pattern = read(spark, bootstrap, subscribePattern=f"{a}.*")
    assert pattern.count() == 1010
    split = read(spark, bootstrap, subscribe=a, minPartitions="10")
    assert split.rdd.getNumPartitions() == 10
    assert sorted(r.value for r in split.collect()) == sorted(b"%d" % i for i in range(1000))
    capped = read(spark, bootstrap, subscribe=a, maxRecordsPerPartition="100")
    assert capped.rdd.getNumPartitions() == 10 and capped.count() == 1000


def test_deleted_records_follow_fail_on_data_loss(spark, bootstrap):
    topic = create_topic(bootstrap, topic_name("loss"), 1)
    produce(bootstrap, topic, [{"value": b"%d" % i} for i in range(100)])
    start = json.dumps({topic: {"0": 0}})
    df = read(spark, bootstrap, subscribe=topic, startingOffsets=start)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, 40)])
    for f in futures.values():
        f.result(30)
    with pytest.raises(Exception, match="no longer in the log"):
        df.collect()  # planned from offset 0; 0..39 are gone
    lenient = read(spark, bootstrap, subscribe=topic, startingOffsets=start, failOnDataLoss="false")
    assert sorted(int(r.value) for r in lenient.collect()) == list(range(40, 100))


# --------------------------------------------------------------------------- streaming


class Collector:
    """foreachBatch target: every micro-batch's (partition, offset, value)."""

    def __init__(self):
        self.batches: list[tuple[int, list]] = []

    def __call__(self, df, batch_id):
        rows = [(r.partition, r.offset, bytes(r.value)) for r in df.collect()]
        self.batches.append((batch_id, rows))

    @property
    def rows(self):
        return [row for _, rows in self.batches for row in rows]


def stream(spark, bootstrap, checkpoint, sink, available_now=False, **options):
    """A streaming read into foreachBatch(sink)."""
    reader = spark.readStream.format("quill").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    writer = reader.load().writeStream.foreachBatch(sink)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.option("checkpointLocation", str(checkpoint)).start()


def values(n0: int, n1: int, partitions: int = 3) -> list[dict]:
    return [{"value": b"v%06d" % i, "partition": i % partitions} for i in range(n0, n1)]


def test_stream_follows_a_growing_topic(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, topic_name("grow"))
    produce(bootstrap, topic, values(0, 300))
    sink = Collector()
    q = stream(spark, bootstrap, tmp_path / "ck", sink, subscribe=topic, startingOffsets="earliest")
    try:
        q.processAllAvailable()
        assert len(sink.rows) == 300
        produce(bootstrap, topic, values(300, 450))
        q.processAllAvailable()
        produce(bootstrap, topic, values(450, 460))
        q.processAllAvailable()
    finally:
        q.stop()
    got = sorted(v for _, _, v in sink.rows)
    assert got == [b"v%06d" % i for i in range(460)]
    assert len(sink.batches) >= 3


def test_stream_starts_at_latest_by_default(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, topic_name("latest"))
    produce(bootstrap, topic, values(0, 50))
    sink = Collector()
    q = stream(spark, bootstrap, tmp_path / "ck", sink, subscribe=topic)
    try:
        q.processAllAvailable()
        produce(bootstrap, topic, values(50, 80))
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted(v for _, _, v in sink.rows) == [b"v%06d" % i for i in range(50, 80)]


def test_restart_from_checkpoint_reads_each_record_once(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, topic_name("restart"))
    checkpoint = tmp_path / "ck"
    sink = Collector()
    options = {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "70"}
    produce(bootstrap, topic, values(0, 200))
    q = stream(spark, bootstrap, checkpoint, sink, **options)
    q.processAllAvailable()
    q.stop()
    first = len(sink.rows)
    assert first == 200
    assert all(len(rows) <= 70 for _, rows in sink.batches)  # maxOffsetsPerTrigger
    produce(bootstrap, topic, values(200, 350))
    # startingOffsets no longer matters: the checkpoint says where to go on
    options["startingOffsets"] = "latest"
    q = stream(spark, bootstrap, checkpoint, sink, **options)
    q.processAllAvailable()
    q.stop()
    offsets = [(p, o) for p, o, _ in sink.rows]
    assert len(offsets) == len(set(offsets)) == 350
    assert sorted(v for _, _, v in sink.rows) == [b"v%06d" % i for i in range(350)]
    ids = [b for b, _ in sink.batches]
    assert ids == sorted(set(ids))  # no batch id was run twice


def test_stream_picks_up_new_partitions_from_earliest(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, topic_name("newpart"), 1)
    produce(bootstrap, topic, values(0, 20, partitions=1))
    sink = Collector()
    q = stream(spark, bootstrap, tmp_path / "ck", sink, subscribe=topic, startingOffsets="earliest")
    try:
        q.processAllAvailable()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
        deadline = time.time() + 30
        while len(admin.list_topics(timeout=10).topics[topic].partitions) < 2:
            assert time.time() < deadline
            time.sleep(0.1)
        produce(bootstrap, topic, [{"value": b"new-%d" % i, "partition": 1} for i in range(5)])
        deadline = time.time() + 60
        while len(sink.rows) < 25 and time.time() < deadline:
            q.processAllAvailable()
            time.sleep(0.2)
    finally:
        q.stop()
    assert sorted(r for r in sink.rows if r[0] == 1) == [(1, i, b"new-%d" % i) for i in range(5)]
    assert len(sink.rows) == 25


def test_trigger_available_now_stops_at_the_end(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, topic_name("now"))
    produce(bootstrap, topic, values(0, 90))
    sink = Collector()
    options = {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "40"}
    q = stream(spark, bootstrap, tmp_path / "ck", sink, available_now=True, **options)
    assert q.awaitTermination(120)
    assert len(sink.rows) == 90
    assert len(sink.batches) == 3  # 40 + 40 + 10


def test_stream_read_matches_what_was_stored(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, topic_name("streamexact"))
    produce(bootstrap, topic, sample(120))
    stored = consume_all(bootstrap, topic)
    got = []
    options = {"subscribe": topic, "startingOffsets": "earliest", "includeHeaders": "true"}
    q = stream(spark, bootstrap, tmp_path / "ck", lambda df, _: got.extend(df.collect()), **options)
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted(rows_as_recs(got), key=lambda r: (r.partition, r.offset)) == stored
