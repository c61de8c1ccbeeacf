"""quill-consumer-perf-test: consumer throughput (Kafka's ConsumerPerformance).

    quill-consumer-perf-test --bootstrap-server b:9092 --topic t --messages 1000000

prints Kafka's header and one line::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    2024-01-01 10:00:00:000, 2024-01-01 10:00:02:500, 95.3674, 38.1470, 1000000, 400000.0000, 0, 2500, 38.1470, 400000.0000

Without --group every partition is assigned to the consumer from the earliest offset
(--from-latest: the latest) and no group coordinator is involved, so
rebalance.time.ms is 0; with --group it subscribes and the time to the first
assignment is the rebalance time, as in Kafka.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime

from .common import CliError, ToolParser, add_bootstrap, client_config, error_name, run_tool

MB = 1024 * 1024
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
    "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        examples=__doc__,
        prog="quill-consumer-perf-test",
        description="Measure consumer throughput (like kafka-consumer-perf-test.sh).",
    )
    add_bootstrap(p, config_flag="--consumer.config")
    p.add_argument("--topic", required=True, help="the topic to consume from")
    p.add_argument("--messages", type=int, required=True, help="how many records to consume")
    p.add_argument("--group", help="consumer group id (default: none, partitions are assigned)")
    p.add_argument(
        "--fetch-size",
        type=int,
        default=MB,
        help="bytes to fetch per partition per request (default 1048576)",
    )
    p.add_argument(
        "--from-latest",
        action="store_true",
        help="start from the latest offset rather than the earliest",
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=10_000,
        metavar="MS",
        help="give up when no record arrives for this long (default 10000)",
    )
    p.add_argument("--hide-header", action="store_true", help="print only the stats line")
    p.add_argument(
        "--show-detailed-stats",
        action="store_true",
        help="print a stats line every --reporting-interval",
    )
    p.add_argument(
        "--reporting-interval",
        type=int,
        default=5000,
        metavar="MS",
        help="interval of the detailed stats (default 5000)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(_run, argv)


def _stamp(epoch_s: float) -> str:
    """Kafka's default --date-format yyyy-MM-dd HH:mm:ss:SSS."""
    dt = datetime.fromtimestamp(epoch_s)
    return dt.strftime("%Y-%m-%d %H:%M:%S:") + f"{dt.microsecond // 1000:03d}"


def make_consumer(
    bootstrap: str,
    *,
    group: str | None,
    fetch_size: int,
    from_latest: bool,
    config_file: str | None = None,
    overrides: dict | None = None,
):
    from confluent_kafka import Consumer

    defaults = {
        "group.id": group or f"perf-consumer-{int(time.time() * 1000) % 100000}",
        "enable.auto.commit": "true" if group else "false",
        "auto.offset.reset": "latest" if from_latest else "earliest",
        "max.partition.fetch.bytes": str(fetch_size),
        "enable.partition.eof": "false",
        # librdkafka stops fetching a partition whose local queue is full (100k records or
        # 64 MB) for fetch.queue.backoff.ms, 1 s by default: a perf run drains the queue in
        # milliseconds and would mostly measure that pause. Kafka's Java consumer has none.
        "fetch.queue.backoff.ms": "10",
    }
    conf = client_config(bootstrap, config_file=config_file, overrides=overrides, defaults=defaults)
    return Consumer(conf)


def attach(consumer, topic: str, *, group: str | None, from_latest: bool) -> None:
    """Assign every partition (no group) or subscribe (group)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    if group:
        consumer.subscribe([topic])
        return
    meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise CliError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{topic}' does not exist.")
    start = OFFSET_END if from_latest else OFFSET_BEGINNING
    consumer.assign([TopicPartition(topic, p, start) for p in sorted(meta.partitions)])


def consume(consumer, messages: int, timeout_s: float, detailed=None) -> dict:
    """Consume up to ``messages`` records; stop early after ``timeout_s`` without one."""
    count = size = 0
    first_at = None
    start = last = time.time()
    window = (start, 0, 0)
    while count < messages:
        batch = consumer.consume(num_messages=min(10_000, messages - count), timeout=0.5)
        now = time.time()
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.fatal() or err.name() in ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"):
                    raise CliError(error_name(err), err.str())
                continue
            count += 1
            size += len(msg.value() or b"") + len(msg.key() or b"")
        if batch:
            last = now
            first_at = first_at or now
        elif now - last > timeout_s:
            print(
                f"WARNING: Exiting before consuming the expected number of messages: timeout "
                f"({int(timeout_s * 1000)} ms) exceeded. You can use the --timeout option to "
                "increase the timeout.",
                file=sys.stderr,
            )
            break
        if detailed is not None and now - window[0] >= detailed[0]:
            detailed[1](window, (now, count, size))
            window = (now, count, size)
    return {"start": start, "end": last, "first": first_at or last, "count": count, "bytes": size}


def stats_line(r: dict, rebalance_ms: int) -> str:
    elapsed = max(r["end"] - r["start"], 1e-9)
    fetch_elapsed = max(elapsed - rebalance_ms / 1000, 1e-9)
    mb = r["bytes"] / MB
    return (
        f"{_stamp(r['start'])}, {_stamp(r['end'])}, {mb:.4f}, {mb / elapsed:.4f}, "
        f"{r['count']}, {r['count'] / elapsed:.4f}, {rebalance_ms}, "
        f"{int(fetch_elapsed * 1000)}, {mb / fetch_elapsed:.4f}, "
        f"{r['count'] / fetch_elapsed:.4f}"
    )


def _run(argv) -> int:
    args = _parser().parse_args(argv)
    consumer = make_consumer(
        args.bootstrap_server,
        group=args.group,
        fetch_size=args.fetch_size,
        from_latest=args.from_latest,
        config_file=args.command_config,
    )
    detailed = None
    if args.show_detailed_stats:
        print("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec")

        def window(prev, cur) -> None:
            dt = max(cur[0] - prev[0], 1e-9)
            mb = cur[2] / MB
            print(
                f"{_stamp(cur[0])}, 0, {mb:.4f}, {(cur[2] - prev[2]) / MB / dt:.4f}, "
                f"{cur[1]}, {(cur[1] - prev[1]) / dt:.4f}",
                flush=True,
            )

        detailed = (args.reporting_interval / 1000, window)
    try:
        attach(consumer, args.topic, group=args.group, from_latest=args.from_latest)
        r = consume(consumer, args.messages, args.timeout / 1000, detailed)
    finally:
        consumer.close()
    # With a group, the time to the first record includes joining it (the "rebalance").
    rebalance_ms = int((r["first"] - r["start"]) * 1000) if args.group else 0
    if not args.hide_header and not args.show_detailed_stats:
        print(HEADER)
    if not args.show_detailed_stats:
        print(stats_line(r, rebalance_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
