"""Copy topics into another topic, exactly once (a streaming MirrorMaker).

    python -m pipeline.jobs.mirror --from orders --to orders-copy --checkpoint DIR \\
        [--from-pattern 'orders-.*'] [--keep-partition] [--available-now]

Keys, values and headers are copied as they are; the sink adds one header,
`quill.eos`, that names the query, micro-batch and task each record was written by, and
writes in transactions (read the copy with isolation.level=read_committed). Records go to
murmur2(key) % partitions of the destination (so per key, order is kept), or with
--keep-partition to the partition number they came from. Stop it any way you like
(even kill -9) and start it again with the same --checkpoint: nothing is copied twice
or skipped.
"""

from __future__ import annotations

import sys

from pipeline.jobs import common


def start(spark, args):
    if args.from_pattern:
        source = common.read_stream(spark, args, subscribePattern=args.from_pattern)
    else:
        source = common.read_stream(spark, args, subscribe=args.from_topics)
    source = source.option("includeHeaders", "true")
    columns = ["key", "value", "headers"] + (["partition"] if args.keep_partition else [])
    writer = (
        source.load()
        .select(*columns)
        .writeStream.format("quill")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("topic", args.to_topic)
        .option("deliveryGuarantee", args.delivery)
    )
    return common.start_stream(writer, args)


def parse_args(argv=None):
    p = common.parser(__doc__.splitlines()[0], streaming=True)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--from", dest="from_topics", help="topics, comma-separated")
    which.add_argument("--from-pattern", help="a regular expression for the topics")
    p.add_argument("--to", dest="to_topic", required=True)
    p.add_argument("--keep-partition", action="store_true")
    p.add_argument("--delivery", choices=("exactly-once", "at-least-once"), default="exactly-once")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    spark = common.session(args, "quill-mirror")
    return common.await_stream(start(spark, args))


if __name__ == "__main__":
    sys.exit(main())
