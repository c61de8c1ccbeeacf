"""quill-producer-perf-test: producer throughput and latency (Kafka's ProducerPerformance).

    quill-producer-perf-test --topic t --num-records 1000000 --record-size 100 \\
        --throughput -1 --producer-props bootstrap.servers=b:9092 acks=1 compression.type=lz4

Every 5 s a window line goes to stderr; the final line goes to stdout, in Kafka's words:
``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency,
P ms 50th, P ms 95th, P ms 99th, P ms 99.9th.`` Latency is measured from ``produce()``
to the delivery report, as Kafka measures it from ``send()`` to the callback.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from functools import partial
from pathlib import Path

from .common import (
    CliError,
    ToolParser,
    client_config,
    error_name,
    parse_properties,
    read_properties_file,
    run_tool,
)

MB = 1024 * 1024
MAX_SAMPLES = 500_000  # Kafka keeps at most this many latency samples
REPORT_INTERVAL_S = 5.0


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        examples=__doc__,
        prog="quill-producer-perf-test",
        description="Measure producer throughput and latency (like kafka-producer-perf-test.sh).",
    )
    p.add_argument("--topic", required=True, help="the topic to produce to")
    p.add_argument("--num-records", type=int, required=True, help="how many records to send")
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int, help="bytes per record (random A-Z payload)")
    size.add_argument("--payload-file", help="send records taken at random from this file")
    p.add_argument(
        "--payload-delimiter",
        default="\\n",
        help="separates the records of --payload-file (default \\n)",
    )
    p.add_argument(
        "--throughput",
        type=float,
        required=True,
        help="records/sec to aim for; -1 for no throttling",
    )
    p.add_argument(
        "--producer-props",
        nargs="+",
        metavar="PROP=VALUE",
        help="producer configs, e.g. bootstrap.servers=b:9092 acks=1 linger.ms=10",
    )
    p.add_argument(
        "--producer.config",
        dest="producer_config",
        metavar="FILE",
        help="a properties file of producer configs",
    )
    p.add_argument("--bootstrap-server", help="the brokers (instead of bootstrap.servers)")
    p.add_argument(
        "--print-metrics",
        action="store_true",
        help="print the producer's librdkafka statistics at the end",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(_run, argv)


class Stats:
    """Kafka's ProducerPerformance.Stats: windows, totals, sampled latencies (ms)."""

    def __init__(self, num_records: int, report=None, interval_s: float = REPORT_INTERVAL_S):
        self.start = time.perf_counter()
        self.sampling = max(1, num_records // min(max(num_records, 1), MAX_SAMPLES))
        self.latencies: list[float] = []
        self.count = self.bytes = 0
        self.total_latency = self.max_latency = 0.0
        self.errors: list = []
        self.report = report
        self.interval_s = interval_s
        self._new_window(self.start)

    def _new_window(self, now: float) -> None:
        self.window_start = now
        self.window_count = self.window_bytes = 0
        self.window_total_latency = self.window_max_latency = 0.0

    def delivered(self, err, msg) -> None:
        """Delivery report of an unsampled record: latency from its CreateTime (ms)."""
        if err is not None:
            self.errors.append(err)
            return
        ts_type, ts = msg.timestamp()
        latency = max(time.time() * 1000.0 - ts, 0.0) if ts_type == 1 else 0.0
        self._record(latency, len(msg), time.perf_counter())

    def sampled(self, sent_at: float, err, msg) -> None:
        """Delivery report of a sampled record (bound with functools.partial): exact latency."""
        if err is not None:
            self.errors.append(err)
            return
        now = time.perf_counter()
        latency = (now - sent_at) * 1000.0
        self.latencies.append(latency)
        self._record(latency, len(msg), now)

    def _record(self, latency: float, size: int, now: float) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        self.max_latency = max(self.max_latency, latency)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency
        self.window_max_latency = max(self.window_max_latency, latency)
        if now - self.window_start >= self.interval_s:
            if self.report is not None:
                self.report(self.window_line(now))
            self._new_window(now)

    def window_line(self, now: float) -> str:
        elapsed = max(now - self.window_start, 1e-9)
        avg = self.window_total_latency / max(self.window_count, 1)
        return (
            f"{self.window_count} records sent, {self.window_count / elapsed:.1f} records/sec "
            f"({self.window_bytes / elapsed / MB:.2f} MB/sec), {avg:.1f} ms avg latency, "
            f"{self.window_max_latency:.1f} ms max latency."
        )

    def percentiles(self, *ps: float) -> list[float]:
        ordered = sorted(self.latencies)
        if not ordered:
            return [0.0 for _ in ps]
        return [ordered[min(int(len(ordered) * p), len(ordered) - 1)] for p in ps]

    def summary(self, end: float | None = None) -> dict:
        elapsed = max((end or time.perf_counter()) - self.start, 1e-9)
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        return {
            "records": self.count,
            "seconds": elapsed,
            "records_per_sec": self.count / elapsed,
            "mb_per_sec": self.bytes / elapsed / MB,
            "avg_latency_ms": self.total_latency / max(self.count, 1),
            "max_latency_ms": self.max_latency,
            "p50_ms": p50,
            "p95_ms": p95,
            "p99_ms": p99,
            "p999_ms": p999,
            "errors": len(self.errors),
        }

    def total_line(self, end: float | None = None) -> str:
        s = self.summary(end)
        return (
            f"{s['records']} records sent, {s['records_per_sec']:f} records/sec "
            f"({s['mb_per_sec']:.2f} MB/sec), {s['avg_latency_ms']:.2f} ms avg latency, "
            f"{s['max_latency_ms']:.2f} ms max latency, {int(s['p50_ms'])} ms 50th, "
            f"{int(s['p95_ms'])} ms 95th, {int(s['p99_ms'])} ms 99th, "
            f"{int(s['p999_ms'])} ms 99.9th."
        )


def random_payload(size: int, seed: int | None = None) -> bytes:
    """Kafka's payload: random uppercase letters, generated once and reused."""
    rng = random.Random(seed)
    return bytes(rng.randrange(65, 91) for _ in range(size))


def run(
    producer,
    topic: str,
    num_records: int,
    payloads: list[bytes],
    throughput: float,
    report=None,
    sample_every: int | None = None,
) -> Stats:
    """Send ``num_records`` records (cycling through ``payloads``) at ``throughput`` rec/s.

    Every ``sample_every``-th record's latency is timed exactly (perf_counter, bound
    per record); the others are timed from their CreateTime, to the millisecond, which
    keeps the loop fast. Percentiles come from the exact samples.
    """
    stats = Stats(num_records, report)
    if sample_every is None:
        sample_every = stats.sampling if throughput > 0 else max(stats.sampling, 16)
    produce, poll, perf_counter = producer.produce, producer.poll, time.perf_counter
    delivered, sampled = stats.delivered, stats.sampled
    one = payloads[0] if len(payloads) == 1 else None
    pick = random.Random(0).choice
    start = perf_counter()
    for i in range(num_records):
        if throughput > 0:
            due = start + i / throughput
            while (delay := due - perf_counter()) > 0.001:
                # waits as a sleep would, but serves each delivery report as it comes:
                # a report held until the wait ends would add up to one interval to its
                # latency (10 ms at 100 records/s), which is the tool's, not the broker's
                poll(delay)
        value = one if one is not None else pick(payloads)
        callback = partial(sampled, perf_counter()) if i % sample_every == 0 else delivered
        while True:
            try:
                produce(topic, value, on_delivery=callback)
                break
            except BufferError:
                poll(0.01)  # local queue full: serve delivery reports, then retry
        if i & 31 == 0:
            poll(0)
    remaining = producer.flush(60)
    if remaining:
        raise CliError("REQUEST_TIMED_OUT", f"{remaining} records were not acknowledged in 60 s.")
    return stats


def _payloads(args) -> list[bytes]:
    if args.record_size is not None:
        if args.record_size < 0:
            raise CliError("INVALID_REQUEST", "--record-size must not be negative.")
        return [random_payload(args.record_size)]
    delimiter = args.payload_delimiter.replace("\\n", "\n").replace("\\t", "\t").encode()
    items = [p for p in Path(args.payload_file).read_bytes().split(delimiter) if p]
    if not items:
        raise CliError("INVALID_REQUEST", f"File {args.payload_file} contains no payloads.")
    print(f"Reading payloads from: {Path(args.payload_file).resolve()}", file=sys.stderr)
    print(f"Number of messages read: {len(items)}", file=sys.stderr)
    return items


def _run(argv) -> int:
    from confluent_kafka import Producer

    args = _parser().parse_args(argv)
    if not args.producer_props and not args.producer_config and not args.bootstrap_server:
        raise CliError(
            "INVALID_REQUEST", "Either --producer-props or --producer.config must be specified."
        )
    props = read_properties_file(args.producer_config)
    props.update(parse_properties(args.producer_props, what="--producer-props entry"))
    bootstrap = args.bootstrap_server or props.pop("bootstrap.servers", None)
    if not bootstrap:
        raise CliError(
            "INVALID_REQUEST",
            "bootstrap.servers is missing: give --bootstrap-server "
            "or --producer-props bootstrap.servers=HOST:PORT.",
        )
    last_stats: list[str] = []
    if args.print_metrics:
        props.setdefault("statistics.interval.ms", "1000")
        props["stats_cb"] = last_stats.append
    producer = Producer(client_config(bootstrap, overrides=props))
    stats = run(
        producer,
        args.topic,
        args.num_records,
        _payloads(args),
        args.throughput,
        report=lambda line: print(line, file=sys.stderr, flush=True),
    )
    print(stats.total_line(), flush=True)
    if args.print_metrics and last_stats:
        _print_metrics(last_stats[-1])
    if stats.errors:
        first = stats.errors[0]
        raise CliError(
            error_name(first), f"{len(stats.errors)} records failed; the first with: {first.str()}"
        )
    return 0


def _print_metrics(stats_json: str) -> None:
    import json

    stats = json.loads(stats_json)
    print("Metric Name                                   Value")
    for key in sorted(k for k, v in stats.items() if isinstance(v, int | float)):
        print(f"producer-metrics:{key:<38} : {stats[key]}")


if __name__ == "__main__":
    sys.exit(main())
