"""quill-console-producer: send lines of standard input to a topic (kafka-console-producer.sh).

    printf 'k1:hello\\nk2:world\\n' | quill-console-producer --bootstrap-server b:9092 \\
        --topic t --property parse.key=true --property key.separator=:

Reader properties are Kafka's LineMessageReader ones: parse.key, key.separator,
parse.headers, headers.delimiter, headers.separator, headers.key.separator,
null.marker, ignore.error.
"""

from __future__ import annotations

import argparse
import sys

from .common import (
    CliError,
    ToolParser,
    add_bootstrap,
    client_config,
    error_name,
    parse_properties,
    run_tool,
)

_READER_DEFAULTS = {
    "parse.key": "false",
    "key.separator": "\t",
    "parse.headers": "false",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
    "ignore.error": "false",
}


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        examples=__doc__,
        prog="quill-console-producer",
        description="Read lines from standard input and send each as a record "
        "(like kafka-console-producer.sh).",
    )
    add_bootstrap(p, config_flag="--producer.config")
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="a line reader property, e.g. parse.key=true key.separator=:",
    )
    p.add_argument(
        "--producer-property",
        action="append",
        metavar="KEY=VALUE",
        help="a producer config, e.g. acks=1 linger.ms=5",
    )
    p.add_argument(
        "--request-required-acks",
        default="-1",
        help="acks of the produce requests (default -1: all in-sync replicas)",
    )
    p.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        default=None,
        help="none, gzip, snappy, lz4 or zstd (gzip if given without a value)",
    )
    p.add_argument("--sync", action="store_true", help="wait for each record to be acknowledged")
    p.add_argument("--batch-size", type=int, default=16384, help="batch.size in bytes")
    p.add_argument(
        "--timeout",
        type=int,
        default=1000,
        metavar="MS",
        help="linger: how long a batch may wait to fill (default 1000)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(_run, argv)


def _run(argv) -> int:
    from confluent_kafka import Producer

    args = _parser().parse_args(argv)
    reader = dict(_READER_DEFAULTS)
    reader.update(parse_properties(args.property, what="--property"))
    defaults = {
        "acks": args.request_required_acks,
        "batch.size": str(args.batch_size),
        "linger.ms": str(args.timeout),
        "compression.type": args.compression_codec or "none",
    }
    conf = client_config(
        args.bootstrap_server,
        config_file=args.command_config,
        overrides=parse_properties(args.producer_property, what="--producer-property"),
        defaults=defaults,
    )
    producer = Producer(conf)
    failures = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            failures.append(err)
            key, value = msg.key(), msg.value()
            print(
                f"Error when sending message to topic {msg.topic()} with key: "
                f"{_size(key)}, value: {_size(value)} with error: {error_name(err)}: {err.str()}",
                file=sys.stderr,
            )

    for number, line in enumerate(sys.stdin, start=1):
        key, value, headers = parse_line(line.rstrip("\r\n"), number, reader)
        _produce(producer, args.topic, key, value, headers, on_delivery)
        if args.sync:
            producer.flush()
    remaining = producer.flush(30)
    if remaining:
        raise CliError("REQUEST_TIMED_OUT", f"{remaining} records were not acknowledged in 30 s.")
    return 1 if failures else 0


def _size(data: bytes | None) -> str:
    return "null" if data is None else f"{len(data)} bytes"


def _produce(producer, topic, key, value, headers, on_delivery) -> None:
    while True:
        try:
            producer.produce(
                topic, value=value, key=key, headers=headers or None, on_delivery=on_delivery
            )
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.1)  # the local queue is full: let it drain


def parse_line(line: str, number: int, props: dict[str, str]):
    """Kafka's LineMessageReader: ``[headers<delim>][key<sep>]value`` -> (key, value, headers).

    With ignore.error=true a line without the expected separator becomes a value alone.
    """
    null_marker = props.get("null.marker")
    ignore_error = props.get("ignore.error", "false") == "true"
    headers: list[tuple[str, bytes | None]] = []
    rest = line
    if props.get("parse.headers", "false") == "true":
        delimiter = props["headers.delimiter"]
        head, sep, rest = rest.partition(delimiter)
        if not sep:
            if ignore_error:
                return None, _encode(line, null_marker), []
            raise CliError(
                "INVALID_RECORD", f"No headers delimiter found on line number {number}: '{line}'"
            )
        headers = _parse_headers(head, props, null_marker, number, line)
    key = None
    if props.get("parse.key", "false") == "true":
        key_text, sep, value_text = rest.partition(props["key.separator"])
        if not sep:
            if ignore_error:
                return None, _encode(rest, null_marker), headers
            raise CliError(
                "INVALID_RECORD", f"No key separator found on line number {number}: '{line}'"
            )
        key, rest = _encode(key_text, null_marker), value_text
    return key, _encode(rest, null_marker), headers


def _parse_headers(text: str, props, null_marker, number: int, line: str):
    headers = []
    for item in [h for h in text.split(props["headers.separator"]) if h]:
        name, sep, value = item.partition(props["headers.key.separator"])
        if null_marker is not None and name == null_marker:
            raise CliError(
                "INVALID_RECORD",
                f"Header keys should not be equal to the null "
                f"marker '{null_marker}' as they can't be null; line number {number}: "
                f"'{line}'",
            )
        headers.append((name, _encode(value, null_marker) if sep else None))
    return headers


def _encode(text: str, null_marker: str | None) -> bytes | None:
    if null_marker is not None and text == null_marker:
        return None
    return text.encode("utf-8")


if __name__ == "__main__":
    sys.exit(main())
