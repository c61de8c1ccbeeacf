"""quill-console-consumer: print records of a topic (Kafka's kafka-console-consumer.sh).

    quill-console-consumer --bootstrap-server b:9092 --topic t --from-beginning \\
        --property print.key=true --property key.separator=: --max-messages 10

Without --group the consumer assigns itself every partition of the topic (or the one
given with --partition) and commits nothing, so no group coordinator is involved
(Kafka's tool would join a random group instead; the output is the same). With
--group it subscribes as a member of that group and commits its offsets.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

from .common import (
    CliError,
    ToolParser,
    add_bootstrap,
    client_config,
    error_name,
    parse_properties,
    run_tool,
)

GROUP_WARN_S = 10.0
# librdkafka error codes that mean the consumer cannot go on.
_FATAL = {
    "UNKNOWN_TOPIC_OR_PART",
    "_UNKNOWN_TOPIC",
    "_UNKNOWN_PARTITION",
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "_FATAL",
}


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        examples=__doc__,
        prog="quill-console-consumer",
        description="Consume records and print them to standard output "
        "(like kafka-console-consumer.sh).",
    )
    add_bootstrap(p, config_flag="--consumer.config")
    p.add_argument("--topic", required=True, help="the topic to consume from")
    p.add_argument("--partition", type=int, help="consume only this partition")
    p.add_argument(
        "--offset",
        default=None,
        help="with --partition: a non-negative offset, 'earliest' or 'latest' (default latest)",
    )
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start with the earliest record rather than the latest",
    )
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--timeout-ms", type=int, help="exit if no record arrives for this long")
    p.add_argument("--group", help="consumer group id (subscribe and commit offsets)")
    p.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="formatter property: print.key, print.value, print.offset, "
        "print.partition, print.timestamp, print.headers (true/false), "
        "key.separator, line.separator, headers.separator, null.literal",
    )
    p.add_argument(
        "--consumer-property",
        action="append",
        metavar="KEY=VALUE",
        help="a consumer config, e.g. fetch.max.bytes=1048576",
    )
    p.add_argument(
        "--isolation-level",
        default="read_uncommitted",
        choices=["read_uncommitted", "read_committed"],
    )
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(_run, argv)


def _start_offset(args) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if args.offset is not None and args.partition is None:
        raise CliError("INVALID_REQUEST", "The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise CliError(
            "INVALID_REQUEST", "Options --from-beginning and --offset cannot be specified together."
        )
    if args.from_beginning or args.offset == "earliest":
        return OFFSET_BEGINNING
    if args.offset in (None, "latest"):
        return OFFSET_END
    if args.offset.isdigit():
        return int(args.offset)
    raise CliError(
        "INVALID_REQUEST",
        f"The provided offset value '{args.offset}' is incorrect. "
        "Valid values are 'earliest', 'latest', or a non-negative long.",
    )


def _consumer(args):
    from confluent_kafka import Consumer

    defaults = {
        "group.id": args.group or f"quill-console-consumer-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": "true" if args.group else "false",
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        "isolation.level": args.isolation_level,
        "enable.partition.eof": "false",
    }
    conf = client_config(
        args.bootstrap_server,
        config_file=args.command_config,
        overrides=parse_properties(args.consumer_property, what="--consumer-property"),
        defaults=defaults,
    )
    return Consumer(conf)


def _partitions(consumer, topic: str) -> list[int]:
    meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
    if meta is None or meta.error is not None:
        error = meta.error if meta is not None else None
        name = error_name(error) if error is not None else "UNKNOWN_TOPIC_OR_PARTITION"
        raise CliError(name, f"Topic '{topic}' does not exist or has no partitions.")
    return sorted(meta.partitions)


def _run(argv) -> int:
    from confluent_kafka import TopicPartition

    args = _parser().parse_args(argv)
    start = _start_offset(args)
    formatter = MessageFormatter(parse_properties(args.property, what="--property"))
    consumer = _consumer(args)
    try:
        if args.partition is not None or not args.group:
            partitions = _partitions(consumer, args.topic)
            if args.partition is not None:
                if args.partition not in partitions:
                    raise CliError(
                        "UNKNOWN_TOPIC_OR_PARTITION",
                        f"Partition {args.partition} of topic '{args.topic}' does not exist.",
                    )
                partitions = [args.partition]
            consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
        else:
            consumer.subscribe([args.topic])
        count = _consume_loop(consumer, formatter, args)
    finally:
        consumer.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _consume_loop(consumer, formatter, args) -> int:
    out = sys.stdout.buffer
    count = 0
    limit = args.max_messages
    timeout_s = None if args.timeout_ms is None else args.timeout_ms / 1000
    last = started = time.monotonic()
    warned = not args.group or args.partition is not None
    try:
        while limit is None or count < limit:
            batch = consumer.consume(
                num_messages=min(500, limit - count) if limit else 500, timeout=0.2
            )
            now = time.monotonic()
            for msg in batch:
                if msg.error() is not None:
                    _handle_error(msg.error())
                    continue
                out.write(formatter.format(msg))
                count += 1
                last = now
            out.flush()
            if not warned and now - started > GROUP_WARN_S and not consumer.assignment():
                warned = True
                print(
                    f"WARN no partition of {args.topic} assigned to this member of group "
                    f"{args.group} after {GROUP_WARN_S:.0f} s: is the group coordinator "
                    "reachable (FindCoordinator, JoinGroup)?",
                    file=sys.stderr,
                )
            if timeout_s is not None and now - last >= timeout_s:
                print(
                    "ERROR Error processing message, terminating consumer process: "
                    f"REQUEST_TIMED_OUT: no record arrived within {args.timeout_ms} ms "
                    "(--timeout-ms)",
                    file=sys.stderr,
                )
                break
    except (KeyboardInterrupt, BrokenPipeError):  # Ctrl-C, or `| head` has seen enough
        pass
    return count


def _handle_error(err) -> None:
    if err.fatal() or err.name() in _FATAL:
        raise CliError(error_name(err), err.str())
    print(f"WARN {error_name(err)}: {err.str()}", file=sys.stderr)


class MessageFormatter:
    """Kafka's DefaultMessageFormatter: [timestamp][partition][offset][headers][key]value."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, "true" if default else "false").lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_headers = flag("print.headers")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t")).encode()
        self.line_separator = _unescape(props.get("line.separator", "\n")).encode()
        self.headers_separator = _unescape(props.get("headers.separator", ",")).encode()
        self.headers_key_separator = _unescape(props.get("headers.key.separator", ":")).encode()
        self.null_literal = props.get("null.literal", "null").encode()

    def format(self, msg) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            ts_type, ts = msg.timestamp()
            names = {1: b"CreateTime:", 2: b"LogAppendTime:"}
            fields.append(
                names[ts_type] + str(ts).encode() if ts_type in names else b"NO_TIMESTAMP"
            )
        if self.print_partition:
            fields.append(b"Partition:%d" % msg.partition())
        if self.print_offset:
            fields.append(b"Offset:%d" % msg.offset())
        if self.print_headers:
            headers = msg.headers() or []
            fields.append(
                self.headers_separator.join(
                    k.encode() + self.headers_key_separator + self._bytes(v) for k, v in headers
                )
                if headers
                else b"NO_HEADERS"
            )
        if self.print_key:
            fields.append(self._bytes(msg.key()))
        if self.print_value:
            fields.append(self._bytes(msg.value()))
        return self.key_separator.join(fields) + self.line_separator

    def _bytes(self, data: bytes | str | None) -> bytes:
        if data is None:
            return self.null_literal
        return data.encode() if isinstance(data, str) else data


def _unescape(text: str) -> str:
    """Kafka accepts escaped separators on the command line: \\t, \\n, \\r."""
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


if __name__ == "__main__":
    sys.exit(main())
