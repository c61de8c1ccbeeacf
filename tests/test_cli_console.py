"""Console producer and consumer, perf tests, and dump-log on a real broker's segment."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from broker.cli import producer_perf
from broker.cli.common import CliError
from broker.cli.console_consumer import MessageFormatter
from broker.cli.console_producer import _READER_DEFAULTS, parse_line
from broker.cli.producer_perf import Stats

from .cli_helpers import cli, tool, topic_name


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1)


def _topic(broker, prefix: str, partitions: int) -> str:
    name = topic_name(prefix)
    run = tool("topics", broker.bootstrap, f"--create --topic {name} --partitions {partitions}")
    assert run.code == 0, run.err
    return name


def test_keyed_round_trip_and_dump_log(broker):
    name = _topic(broker, "console", 3)
    lines = [f"key-{i % 10}:value-{i}" for i in range(100)]
    sent = tool(
        "console_producer",
        broker.bootstrap,
        f"--topic {name} --property parse.key=true --property key.separator=:",
        stdin="\n".join(lines) + "\n",
    )
    assert sent.code == 0, sent.err

    got = tool(
        "console_consumer",
        broker.bootstrap,
        f"--topic {name} --from-beginning --max-messages 100 --timeout-ms 20000 "
        "--property print.key=true --property key.separator=: --property print.partition=true",
    )
    assert got.code == 0, got.err
    assert "Processed a total of 100 messages" in got.err
    by_partition: dict[str, list[str]] = {}
    for line in got.lines:  # Partition:<p>:<key>:<value>
        _, partition, key, value = line.split(":", 3)
        by_partition.setdefault(partition, []).append(f"{key}:{value}")
    assert sorted(sum(by_partition.values(), [])) == sorted(lines)
    for values in by_partition.values():  # per key, order is kept within a partition
        for key in {v.split(":")[0] for v in values}:
            mine = [v for v in values if v.startswith(key + ":")]
            assert mine == [v for v in lines if v.startswith(key + ":")]

    partition = next(iter(by_partition))
    segment = broker.brokers[0].log_dir / f"{name}-{partition}" / f"{0:020d}.log"
    dumped = cli("dump_log", "--files", str(segment), "--print-data-log")
    assert dumped.code == 0, dumped.err
    records = [line for line in dumped.lines if line.startswith("| offset:")]
    assert len(records) == len(by_partition[partition])
    batches = [line for line in dumped.lines if line.startswith("baseOffset:")]
    assert batches and all(line.endswith("isvalid: true") for line in batches)
    assert records[0].startswith("| offset: 0 CreateTime: ")
    key, value = by_partition[partition][0].split(":")
    assert records[0].endswith(f"key: {key} payload: {value}")


def test_partition_offset_headers_and_timeout(broker):
    name = _topic(broker, "console-headers", 1)
    sent = tool(
        "console_producer",
        broker.bootstrap,
        f"--topic {name} --property parse.headers=true --property parse.key=true "
        "--producer-property acks=1",
        stdin="h1:a,h2:b\tk0\tv0\nh1:c\tk1\tv1\n\tk2\tv2\n",
    )
    assert sent.code == 0, sent.err
    got = tool(
        "console_consumer",
        broker.bootstrap,
        f"--topic {name} --partition 0 --offset 1 --timeout-ms 3000 --property print.offset=true "
        "--property print.headers=true --property print.key=true --property print.timestamp=true",
    )
    assert got.code == 0, got.err
    assert len(got.lines) == 2
    assert re.fullmatch(r"CreateTime:\d+\tOffset:1\th1:c\tk1\tv1", got.lines[0]), got.lines
    assert re.fullmatch(r"CreateTime:\d+\tOffset:2\tNO_HEADERS\tk2\tv2", got.lines[1])
    assert "Processed a total of 2 messages" in got.err


def test_group_resumes_from_committed_offsets(broker):
    name = _topic(broker, "console-group", 2)
    group = topic_name("group")
    produce = f"--topic {name}"
    consume = f"--topic {name} --group {group} --from-beginning --timeout-ms 8000"
    assert tool("console_producer", broker.bootstrap, produce, stdin="1\n2\n3\n").code == 0
    first = tool("console_consumer", broker.bootstrap, f"{consume} --max-messages 3")
    assert first.code == 0, first.err
    assert sorted(first.lines) == ["1", "2", "3"]
    assert tool("console_producer", broker.bootstrap, produce, stdin="4\n5\n").code == 0
    second = tool("console_consumer", broker.bootstrap, consume)
    assert second.code == 0, second.err
    assert sorted(second.lines) == ["4", "5"]  # committed offsets, not --from-beginning
    assert "Processed a total of 2 messages" in second.err


def test_consumer_errors(broker):
    missing = tool(
        "console_consumer", broker.bootstrap, f"--topic {topic_name('no')} --timeout-ms 1000"
    )
    assert missing.code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.err
    bad = tool("console_consumer", broker.bootstrap, "--topic t --offset 5")
    assert bad.code == 1
    assert "The partition is required when offset is specified." in bad.err


def test_producer_refuses_line_without_separator(broker):
    name = _topic(broker, "console-bad", 1)
    run = tool(
        "console_producer",
        broker.bootstrap,
        f"--topic {name} --property parse.key=true",
        stdin="no separator here\n",
    )
    assert run.code == 1
    assert "No key separator found on line number 1: 'no separator here'" in run.err


def test_perf_tests(broker):
    name = _topic(broker, "perf", 3)
    run = cli(
        "producer_perf",
        *f"--topic {name} --num-records 3000 --record-size 100 --throughput -1 --producer-props "
        f"bootstrap.servers={broker.bootstrap} acks=1 compression.type=lz4 linger.ms=5".split(),
    )
    assert run.code == 0, run.err
    assert re.fullmatch(
        r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.",
        run.lines[-1],
    ), run.out

    run = tool("consumer_perf", broker.bootstrap, f"--topic {name} --messages 3000 --timeout 20000")
    assert run.code == 0, run.err
    assert run.lines[0].startswith("start.time, end.time, data.consumed.in.MB, MB.sec, ")
    fields = [f.strip() for f in run.lines[1].split(",")]
    assert len(fields) == 10
    assert fields[2] == f"{3000 * 100 / 1024 / 1024:.4f}"
    assert fields[4] == "3000"


class _EventLog:
    """A real producer whose produce() calls and delivery reports are logged in order."""

    def __init__(self, producer) -> None:
        self.producer, self.events = producer, []

    def produce(self, topic, value, on_delivery):
        def delivered(err, msg):
            self.events.append("delivered" if err is None else f"error {err}")
            on_delivery(err, msg)

        self.producer.produce(topic, value, on_delivery=delivered)
        self.events.append("produce")

    def poll(self, timeout=0):
        return self.producer.poll(timeout)

    def flush(self, timeout):
        return self.producer.flush(timeout)


def test_perf_pacing_serves_delivery_reports_while_it_waits(broker):
    """At a low --throughput the wait between records serves delivery reports as they
    come: each record's report arrives before the next record is sent (a sleep instead
    held it to the end of the interval, adding up to one interval to its latency)."""
    from confluent_kafka import Producer

    name = _topic(broker, "pacing", 1)
    log = _EventLog(Producer({"bootstrap.servers": broker.bootstrap, "acks": "1"}))
    log.producer.produce(name, b"warm-up")  # connected and metadata known before the clock
    assert log.producer.flush(30) == 0
    stats = producer_perf.run(log, name, 5, [b"x" * 100], throughput=2, sample_every=1)
    assert stats.count == 5 and not stats.errors
    assert log.events.count("produce") == 5 and log.events.count("delivered") == 5
    # record k (from 1) is sent after the reports of all k records before it; a busy
    # machine may let one acknowledgement miss its 500 ms interval, not more
    delivered_before = []
    for i, event in enumerate(log.events):
        if event == "produce":
            delivered_before.append(log.events[:i].count("delivered"))
    in_time = sum(1 for k, n in enumerate(delivered_before) if k > 0 and n == k)
    assert in_time >= 3, log.events


# --------------------------------------------------------------------------- no broker


def test_parse_line():
    props = {**_READER_DEFAULTS, "parse.key": "true", "key.separator": ":", "null.marker": "~"}
    assert parse_line("k:v:w", 1, props) == (b"k", b"v:w", [])
    assert parse_line("~:v", 1, props) == (None, b"v", [])
    with pytest.raises(CliError, match="No key separator found on line number 3"):
        parse_line("kv", 3, props)
    assert parse_line("kv", 3, {**props, "ignore.error": "true"}) == (None, b"kv", [])
    headers = {**_READER_DEFAULTS, "parse.headers": "true"}
    assert parse_line("a:1,b\tv", 1, headers) == (None, b"v", [("a", b"1"), ("b", None)])


def test_formatter():
    msg = SimpleNamespace(
        timestamp=lambda: (1, 42),
        partition=lambda: 2,
        offset=lambda: 7,
        headers=lambda: [("h", b"x"), ("n", None)],
        key=lambda: None,
        value=lambda: b"v",
    )
    flags = ("timestamp", "partition", "offset", "headers", "key")
    out = MessageFormatter({f"print.{k}": "true" for k in flags}).format(msg)
    assert out == b"CreateTime:42\tPartition:2\tOffset:7\th:x,n:null\tnull\tv\n"
    assert MessageFormatter({}).format(msg) == b"v\n"


def test_stats_lines():
    stats = Stats(4)
    for latency_ms in [1.0, 2.0, 3.0, 10.0]:
        stats.sampled(stats.start, None, b"x" * 100)
        stats.latencies[-1] = latency_ms
    assert stats.count == 4 and stats.bytes == 400
    assert stats.percentiles(0.5, 0.99) == [3.0, 10.0]
    assert re.fullmatch(
        r"4 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), .* 99\.9th\.", stats.total_line()
    )
