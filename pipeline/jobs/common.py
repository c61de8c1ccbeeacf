"""What the pipeline jobs share: command-line options, the SparkSession, topics, and
running a streaming query until it is done or stopped."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from cluster_client.client_security import librdkafka_config

DEFAULT_BOOTSTRAP = os.environ.get("QUILL_BOOTSTRAP_SERVERS", "localhost:9092")


def parser(description: str, *, streaming: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        help="the cluster (default: $QUILL_BOOTSTRAP_SERVERS or localhost:9092)",
    )
    p.add_argument(
        "--master",
        default=os.environ.get("SPARK_MASTER", "local[*]"),
        help="Spark master: local[*] (default, or $SPARK_MASTER), spark://host:7077, ...",
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, repeatable (e.g. --conf spark.executor.memory=2g)",
    )
    p.add_argument("--shuffle-partitions", type=int, default=4, help="default 4")
    if streaming:
        p.add_argument(
            "--checkpoint",
            required=True,
            help="the query's checkpoint directory: restart with the same one to resume",
        )
        p.add_argument("--starting-offsets", default="earliest", help="for a new checkpoint")
        p.add_argument("--max-offsets-per-trigger", type=int, default=None)
        when = p.add_mutually_exclusive_group()
        when.add_argument(
            "--trigger-seconds", type=float, default=0, help="micro-batch interval (default: asap)"
        )
        when.add_argument(
            "--available-now",
            action="store_true",
            help="read what is there when the job starts, write it, and stop",
        )
    return p


def session(args, app_name: str):
    from pipeline import spark_session

    conf = {
        "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
    }
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--conf wants KEY=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
    return spark_session(args.master, app_name, conf)


def ensure_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> None:
    """Create `name` unless it exists (with `config`, e.g. cleanup.policy=compact)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **librdkafka_config()})
    md = admin.list_topics(timeout=30)
    if name in md.topics:
        return
    replicas = max(1, min(3, len(md.brokers)))
    future = admin.create_topics([NewTopic(name, partitions, replicas, config=config or {})])[name]
    try:
        future.result(timeout=60)
    except Exception as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(timeout=30).topics.get(name)
        if meta and meta.partitions and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} has no leader after 30 s")


def read_stream(spark, args, **subscription):
    """spark.readStream of the `quill` source with the job's cluster, starting offsets
    and rate limit; `subscription` is subscribe=... or subscribePattern=..."""
    reader = (
        spark.readStream.format("quill")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("startingOffsets", args.starting_offsets)
        .options(**subscription)
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
    return reader


def start_stream(writer, args):
    """Start a DataStreamWriter with the job's checkpoint and trigger options."""
    writer = writer.option("checkpointLocation", args.checkpoint)
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    elif args.trigger_seconds:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    return writer.start()


def await_stream(query) -> int:
    """Run until the query ends (Trigger.AvailableNow) or SIGTERM/Ctrl-C stops it."""

    def stop(signum, frame):
        print(f"stopping the query (signal {signum})", file=sys.stderr)
        query.stop()

    signal.signal(signal.SIGTERM, stop)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    if query.exception() is not None:
        print(f"query failed: {query.exception()}", file=sys.stderr)
        return 1
    return 0
