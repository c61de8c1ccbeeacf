"""Pipeline throughput: the `quill` Spark source and sink next to raw librdkafka on the
same records and the same machine.

    python bench/pipeline_throughput.py                   # starts ZooKeeper + 1 broker
    python bench/pipeline_throughput.py --records 1000000 --json bench/pipeline.json
    python bench/pipeline_throughput.py --bootstrap-server host:9092 --master local[4]

Rows (100-byte values, all alike, no keys, a 6-partition topic; alike values are the
exactly-once sink's worst case for its record ids: every row but a task's first needs
an occurrence number):

- raw producer: one confluent-kafka Producer with the sink's settings (idempotent,
  acks=all, linger.ms 5), producing the records from a Python loop;
- sink, batch: df.write.format("quill") of a cached DataFrame with the same values;
- streaming, source -> sink: readStream.format("quill") of the raw producer's topic into
  writeStream.format("quill") with Trigger.AvailableNow, exactly-once (each record
  written once, from the tasks, tagged with its id) and at-least-once (the same without
  ids and markers: what the pipeline costs without the guarantee);
- streaming, parquet -> sink: the same values from Parquet files (Spark's own reader)
  into the exactly-once sink: the sink alone, as the batch row measures the batch sink;
- the streaming rows count the micro-batches' time (Spark's triggerExecution); the wall
  time with the query's start is shown too;
- raw consumer: one Consumer assigned every partition, reading key, value, offset and
  timestamp of every record;
- source -> noop: spark.read.format("quill") of the same topic into Spark's noop sink.

Spark runs with --master (local[2] by default: this machine's cores, shared with the
broker). Every row is the best of --repeat runs after one warm-up (Python worker
start-up is paid once per process, not per query). The raw producer pays its
idempotent-producer start (up to 0.5 s) inside its time; the Spark rows pay it once per
Python worker, whose tasks share one producer. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import local_cluster  # noqa: E402
from pipeline.jobs.common import ensure_topic  # noqa: E402
from pipeline.producer import producer_config  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--bootstrap-server", help="an existing cluster (default: start one)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--repeat", type=int, default=2, help="timed runs per Spark row (best kept)")
    p.add_argument("--json", help="also write the figures to this file")
    return p


def raw_produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer

    producer = Producer(producer_config(bootstrap, {}))
    value = b"x" * size
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return time.perf_counter() - start


def raw_consume(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-pipeline", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count = 0
    start = time.perf_counter()
    while count < n:
        for m in consumer.consume(10_000, timeout=1):
            if m.error() is None:
                m.key(), m.value(), m.offset(), m.timestamp()  # what the source reads
                count += 1
    seconds = time.perf_counter() - start
    consumer.close()
    return seconds


def best_of(repeat: int, run) -> float:
    run()  # warm-up
    return min(run() for _ in range(repeat))


def spark_rows(spark, bootstrap: str, args, source_topic: str, results: list) -> None:
    n = args.records

    def read_noop():
        start = time.perf_counter()
        (
            spark.read.format("quill")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source_topic)
            .load()
            .write.format("noop")
            .mode("overwrite")
            .save()
        )
        return time.perf_counter() - start

    row(results, "quill source -> noop (batch)", n, best_of(args.repeat, read_noop))

    values = spark.range(n).selectExpr(f"repeat('x', {args.record_size}) as value").cache()
    values.count()

    def write_batch():
        topic = f"bench-sink-{time.time_ns()}"
        ensure_topic(bootstrap, topic, args.partitions)
        start = time.perf_counter()
        values.write.format("quill").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", topic
        ).mode("append").save()
        return time.perf_counter() - start

    row(results, "quill sink (batch)", n, best_of(args.repeat, write_batch))
    files = Path(tempfile.mkdtemp(prefix="quill-bench-values-"))
    values.repartition(args.partitions).write.mode("overwrite").parquet(str(files / "values"))
    values.unpersist()

    def from_topic():
        return (
            spark.readStream.format("quill")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source_topic)
            .option("startingOffsets", "earliest")
            .load()
            .select("value")
        )

    def from_files():
        return spark.readStream.schema("value string").parquet(str(files / "values"))

    try:
        for test, source, delivery in [
            ("source -> quill sink (streaming, exactly-once)", from_topic, "exactly-once"),
            ("source -> quill sink (streaming, at-least-once)", from_topic, "at-least-once"),
            ("parquet -> quill sink (streaming, exactly-once)", from_files, "exactly-once"),
        ]:
            walls: list[float] = []
            seconds = best_of(
                args.repeat,
                lambda s=source, d=delivery, w=walls: write_stream(spark, bootstrap, args, s, d, w),
            )
            row(results, test, n, seconds)
            results[-1]["wall_seconds_with_query_start"] = min(walls[1:] or walls)
    finally:
        shutil.rmtree(files, ignore_errors=True)


def write_stream(spark, bootstrap: str, args, source, delivery: str, walls: list) -> float:
    """One streaming query (Trigger.AvailableNow) of `source()` into a new topic; the
    micro-batches' time (triggerExecution), its wall time with the query's start to
    `walls`."""
    topic = f"bench-stream-{time.time_ns()}"
    ensure_topic(bootstrap, topic, args.partitions)
    checkpoint = tempfile.mkdtemp(prefix="quill-bench-ck-")
    try:
        start = time.perf_counter()
        query = (
            source()
            .writeStream.format("quill")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("deliveryGuarantee", delivery)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        walls.append(time.perf_counter() - start)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    return sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress) / 1000


def row(results: list, test: str, n: int, seconds: float) -> None:
    results.append({"test": test, "records": n, "seconds": seconds, "records_per_sec": n / seconds})
    print(f"  {test}: {n / seconds:,.0f} records/s", file=sys.stderr)


def run(bootstrap: str, args) -> list[dict]:
    from pipeline import spark_session

    results: list[dict] = []
    topic = f"bench-pipeline-{time.time_ns()}"
    ensure_topic(bootstrap, topic, args.partitions)
    first = raw_produce(bootstrap, topic, args.records, args.record_size)  # the source data

    def produce_again():
        extra = f"bench-raw-{time.time_ns()}"
        ensure_topic(bootstrap, extra, args.partitions)
        return raw_produce(bootstrap, extra, args.records, args.record_size)

    seconds = min([first] + [produce_again() for _ in range(args.repeat)])
    row(results, "raw producer (librdkafka)", args.records, seconds)
    seconds = best_of(
        args.repeat, lambda: raw_consume(bootstrap, topic, args.partitions, args.records)
    )
    row(results, "raw consumer (librdkafka)", args.records, seconds)
    spark = spark_session(
        args.master,
        "quill-bench",
        {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
    )
    try:
        spark_rows(spark, bootstrap, args, topic, results)
    finally:
        spark.stop()
    return results


def report(results: list[dict], args) -> dict:
    rate = {r["test"]: r["records_per_sec"] for r in results}
    ratios = {
        "source / raw consumer": rate["quill source -> noop (batch)"]
        / rate["raw consumer (librdkafka)"],
        "batch sink / raw producer": rate["quill sink (batch)"] / rate["raw producer (librdkafka)"],
        "exactly-once stream / raw producer": rate["source -> quill sink (streaming, exactly-once)"]
        / rate["raw producer (librdkafka)"],
        "at-least-once stream / raw producer": rate[
            "source -> quill sink (streaming, at-least-once)"
        ]
        / rate["raw producer (librdkafka)"],
        "exactly-once sink alone / raw producer": rate[
            "parquet -> quill sink (streaming, exactly-once)"
        ]
        / rate["raw producer (librdkafka)"],
    }
    print(
        f"\n{args.records:,} records x {args.record_size} B, {args.partitions} partitions, "
        f"Spark {args.master}, {os.cpu_count()} CPUs shared with the broker"
    )
    print(f"{'test':<50}{'records/s':>12}{'seconds':>10}")
    for r in results:
        print(f"{r['test']:<50}{r['records_per_sec']:>12,.0f}{r['seconds']:>10.2f}")
        if "wall_seconds_with_query_start" in r:
            print(
                f"{'  (wall time with the query start)':<50}{'':>12}"
                f"{r['wall_seconds_with_query_start']:>10.2f}"
            )
    for name, value in ratios.items():
        print(f"{name:<50}{value:>12.2f}x")
    return ratios


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.bootstrap_server:
        results = run(args.bootstrap_server, args)
    else:
        with local_cluster(1) as cluster:
            results = run(cluster.bootstrap, args)
    ratios = report(results, args)
    if args.json:
        import pyspark

        env = {
            "python": platform.python_version(),
            "pyspark": pyspark.__version__,
            "cpus": os.cpu_count(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        payload = {"environment": env, "args": vars(args), "results": results, "ratios": ratios}
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
