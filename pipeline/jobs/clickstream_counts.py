"""Derived feed: one-minute counts per key of a clickstream topic, into a compacted
summary topic.

    python -m pipeline.jobs.clickstream_counts --checkpoint /var/lib/quill/clicks-ck \\
        [--bootstrap-server host:9092] [--input-topic clickstream] [--input-partitions 3] \\
        [--output-topic clickstream-counts] [--window "1 minute"] [--watermark "1 minute"] \\
        [--master spark://spark-master:7077] [--available-now]

Each input record is a click: its key is what is counted (a page, a user), its
timestamp the event time. Counts are per (window, key). The watermark is the latest
event time seen minus --watermark: a window's count is written once the watermark passes
the window's end (append mode, the one Spark's Python data sources write in), and a
click older than the watermark is dropped as too late, its window's state already
freed. The summary topic is compacted and keyed "<window start>|<key>"; the value is
JSON {"window_start", "window_end", "key", "count"}. Writes are exactly-once, so a
restart from the checkpoint neither loses nor repeats a count.
"""

from __future__ import annotations

import sys

from pipeline.jobs import common

ISO = "yyyy-MM-dd'T'HH:mm:ss'Z'"


def build_counts(spark, args):
    """The query's DataFrame: (key, value) rows for the summary topic."""
    from pyspark.sql import functions as F

    clicks = common.read_stream(spark, args, subscribe=args.input_topic)
    counts = (
        clicks.load()
        .withWatermark("timestamp", args.watermark)
        .groupBy(F.window("timestamp", args.window).alias("window"), F.col("key"))
        .count()
    )
    key = F.coalesce(F.col("key").cast("string"), F.lit(""))
    start = F.date_format("window.start", ISO)
    return counts.select(
        F.concat_ws("|", start, key).alias("key"),
        F.to_json(
            F.struct(
                start.alias("window_start"),
                F.date_format("window.end", ISO).alias("window_end"),
                key.alias("key"),
                F.col("count"),
            )
        ).alias("value"),
    )


def start(spark, args):
    if args.input_partitions:  # a service that starts before anyone clicks
        common.ensure_topic(args.bootstrap_server, args.input_topic, args.input_partitions)
    common.ensure_topic(
        args.bootstrap_server,
        args.output_topic,
        args.output_partitions,
        {"cleanup.policy": "compact"},
    )
    writer = (
        build_counts(spark, args)
        .writeStream.format("quill")
        .outputMode("append")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("topic", args.output_topic)
        .queryName(f"clickstream_counts:{args.input_topic}")
    )
    return common.start_stream(writer, args)


def parse_args(argv=None):
    p = common.parser(__doc__.splitlines()[0], streaming=True)
    p.add_argument("--input-topic", default="clickstream")
    p.add_argument(
        "--input-partitions",
        type=int,
        default=None,
        help="create the input topic with this many partitions if it is missing "
        "(without it, a missing input topic is an error)",
    )
    p.add_argument("--output-topic", default="clickstream-counts")
    p.add_argument("--output-partitions", type=int, default=3, help="if it must be created")
    p.add_argument("--window", default="1 minute", help="window length (Spark interval)")
    p.add_argument("--watermark", default="1 minute", help="how late a click may be")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    spark = common.session(args, "quill-clickstream-counts")
    return common.await_stream(start(spark, args))


if __name__ == "__main__":
    sys.exit(main())
