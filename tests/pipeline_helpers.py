"""Shared by the pipeline tests (tests/test_pipeline_*.py): one SparkSession for the
whole test session, plain librdkafka clients to put records in and read them out, and
a job with a shuffle before the sink for the kill tests.

`spark` is a session-scoped fixture; test modules load this file as a plugin
(`pytest_plugins = ["tests.pipeline_helpers"]`), so the fixture is defined once and
every module shares one SparkSession (one JVM), stopped when the test session ends.

`python -m tests.pipeline_helpers <the mirror job's options>` runs the mirror job with
the rows repartitioned by key before the sink: the writing tasks get their rows in an
order that can change from one attempt to the next.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# Modest: a 2-core machine, and Spark shares it with brokers and ZooKeeper.
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.stopTimeout": "30s",
}


# Its sitecustomize moves Spark's pyspark.zip behind the installed pyspark (the same
# release, bytecode cached) in every Python process Spark starts: the data source
# planning workers compiled pyspark from the zip each time (0.8 s of CPU a process,
# several per query start). Spark gives its Python processes the PYTHONPATH the JVM
# was started with, after its zips.
SPARK_SITE = Path(__file__).parent / "spark_site"


def spark_site_env() -> dict:
    """This process's environment with tests/spark_site first on PYTHONPATH: for a
    Spark driver (a job's process, or the JVM of the in-process session)."""
    path = [str(SPARK_SITE), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def get_spark():
    from pipeline import spark_session

    # the JVM is launched with spark_site_env (its Python workers get that path); the
    # tests' own subprocesses keep this process's PYTHONPATH
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = spark_site_env()["PYTHONPATH"]
    try:
        # local[2,2]: a failed task is tried once more, as on a cluster (local[2] never retries)
        return spark_session("local[2,2]", "quill-tests", SPARK_CONF)  # getOrCreate
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="session")
def spark():
    session = get_spark()
    yield session
    session.stop()
    logging.getLogger("py4j").setLevel(logging.WARNING)  # quiet at interpreter exit


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 3, config: dict | None = None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    deadline = time.time() + 30
    while time.time() < deadline:
        meta = admin.list_topics(timeout=10).topics.get(name)
        if meta and len(meta.partitions) == partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return name
        time.sleep(0.1)
    raise AssertionError(f"topic {name} has no leaders")


@dataclass(frozen=True)
class Rec:
    """A record as the cluster stores it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int  # ms
    timestamp_type: int  # Kafka's id: 0 CreateTime, 1 LogAppendTime
    headers: tuple = ()


def produce(bootstrap: str, topic: str, records: list[dict], **conf) -> list[Rec]:
    """Each record a dict of value, key, partition, headers, timestamp (ms); returns
    them as stored (with partition, offset, timestamp), in delivery order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    stored: list[Rec] = []
    errors: list = []

    def delivered(err, msg, headers):
        if err is not None:
            errors.append(err)
            return
        kind, ts = msg.timestamp()
        stored.append(
            Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), ts, kind - 1, headers)
        )

    for r in records:
        kwargs = {k: r[k] for k in ("key", "headers", "timestamp") if r.get(k) is not None}
        if r.get("partition") is not None:
            kwargs["partition"] = r["partition"]
        headers = tuple(r.get("headers") or ())  # delivery reports do not carry them
        producer.produce(
            topic,
            r.get("value"),
            on_delivery=lambda err, msg, h=headers: delivered(err, msg, h),
            **kwargs,
        )
        if len(stored) % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors
    return stored


def consume_all(bootstrap: str, topic: str) -> list[Rec]:
    """Every committed record of every partition, read by a plain consumer, in
    (partition, offset) order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pipeline-tests",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        meta = consumer.list_topics(timeout=10).topics[topic]
        # watermarks first: once fetching, requests queue behind its long polls
        ranges = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            for p in sorted(meta.partitions)
        }
        ranges = {p: (low, high) for p, (low, high) in ranges.items() if high > low}
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ranges.items()])
        out: list[Rec] = []
        pending = set(ranges)  # partitions not yet read up to their high watermark
        deadline = time.time() + 60
        while pending:
            assert time.time() < deadline, f"{topic}: partitions {pending} not read in 60 s"
            for m in consumer.consume(10_000, timeout=0.2):
                if m.error() is not None:  # PARTITION_EOF: offset is the end
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    if m.offset() >= ranges[m.partition()][1]:
                        pending.discard(m.partition())
                    continue
                kind, ts = m.timestamp()
                out.append(
                    Rec(
                        m.partition(),
                        m.offset(),
                        m.key(),
                        m.value(),
                        ts,
                        kind - 1,
                        tuple(m.headers() or ()),
                    )
                )
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def latest_offsets(bootstrap: str, topic: str, isolation: str = "read_committed") -> dict[int, int]:
    """Each partition's last stable offset, or with read_uncommitted its high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "pipeline-tests", "isolation.level": isolation}
    )
    try:
        parts = consumer.list_topics(timeout=10).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in parts
        }
    finally:
        consumer.close()


def start_copy(spark, bootstrap, src, dst, checkpoint, columns=("key", "value"), **options):
    """A streaming query from topic `src` (from earliest, `options` for the source)
    into topic `dst` through the quill sink, exactly-once; `columns` are select()ed."""
    return (
        spark.readStream.format("quill")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
        .select(*columns)
        .writeStream.format("quill")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", dst)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )


def rows_as_recs(rows) -> list[Rec]:
    """Spark rows of the source schema -> Rec, for comparing with what was stored."""
    out = []
    for r in rows:
        headers = getattr(r, "headers", None) or ()
        out.append(
            Rec(
                r.partition,
                r.offset,
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                int(r.timestamp.timestamp() * 1000 + 0.5) if r.timestamp else -1,
                r.timestampType,
                tuple((h.key, None if h.value is None else bytes(h.value)) for h in headers),
            )
        )
    return out


def shuffled_mirror(argv=None) -> int:
    """pipeline.jobs.mirror with repartition(--shuffle-partitions, "key") before the sink."""
    from pipeline.jobs import common, mirror

    args = mirror.parse_args(argv)
    spark = common.session(args, "quill-shuffled-mirror")
    source = common.read_stream(spark, args, subscribe=args.from_topics)
    shuffled = source.load().repartition(args.shuffle_partitions, "key").select("key", "value")
    writer = (
        shuffled.writeStream.format("quill")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("topic", args.to_topic)
        # a short producer queue: the tasks cannot hand a whole batch to librdkafka at
        # once, so the kill tests' SIGKILL lands while records are still to be sent
        .option("kafka.queue.buffering.max.messages", "1000")
    )
    return common.await_stream(common.start_stream(writer, args))


if __name__ == "__main__":
    sys.exit(shuffled_mirror())
