"""Throughput benchmark: Quill through librdkafka, next to Redis Streams on the same box.

    python bench/throughput.py                      # starts ZooKeeper + 1 broker + Redis
    python bench/throughput.py --bootstrap-server host:9092 --records 2000000 --json out.json

Measures, with 100-byte values into a 6-partition topic (acks=1, batch.size 1 MB,
linger.ms 10, as Kafka's own perf runs are tuned):

- produce records/s uncompressed and with lz4,
- consume records/s (the uncompressed topic, from the beginning),
- the same produce and consume through kcat (librdkafka with no Python client loop),
- p50/p99 produce latency at a fixed 10,000 records/s,
- the same client against librdkafka's in-process mock cluster: the ceiling of this
  Python client loop, so the broker's share of the cost can be read off,
- Redis Streams: ``redis-benchmark -P 64 XADD`` (C client) and redis-py pipelined XADD
  (a Python client, like ours) with the same record count.

Figures are printed, never asserted. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import local_cluster  # noqa: E402
from broker.cli import consumer_perf, producer_perf  # noqa: E402

MB = 1024 * 1024
THROUGHPUT_PROPS = {
    "acks": "1",
    "linger.ms": "10",
    "batch.size": str(MB),
    "queue.buffering.max.messages": "1000000",
    "queue.buffering.max.kbytes": str(512 * 1024),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-server", help="use this cluster instead of starting one")
    p.add_argument("--records", type=int, default=1_000_000, help="records per run")
    p.add_argument("--record-size", type=int, default=100, help="value bytes per record")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--latency-rate", type=int, default=10_000, help="records/s of the latency run")
    p.add_argument("--latency-seconds", type=float, default=10.0, help="length of the latency run")
    p.add_argument(
        "--latency-linger-ms",
        default="0",
        help="linger.ms of the latency run (default 0: send at once)",
    )
    p.add_argument(
        "--event-loop",
        choices=["asyncio", "uvloop"],
        default=None,
        help="QUILL_EVENT_LOOP for the broker this script starts",
    )
    p.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["mock", "redis", "lz4", "consume", "latency", "kcat"],
        help="leave a run out",
    )
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    return p


# --------------------------------------------------------------------------- services


@contextlib.contextmanager
def local_redis():
    from quill_stack import ports, services
    from quill_stack.process import ManagedProcess
    from quill_stack.state import owner_env

    state = Path(tempfile.mkdtemp(prefix="quill-bench-redis-"))
    port = ports.free_port()
    proc = ManagedProcess(services.redis_spec(state, port), owner_env(state))
    try:
        proc.start()
        proc.wait_healthy()
        yield port
    finally:
        proc.stop()
        shutil.rmtree(state, ignore_errors=True)


# --------------------------------------------------------------------------- Kafka runs


def create_topic(bootstrap: str, name: str, partitions: int, rf: int = 1, config=None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])[name].result(
        timeout=60
    )
    deadline = time.time() + 30  # wait until every partition has a leader
    while time.time() < deadline:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            meta
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {name} has no leaders after 30 s")


def produce(bootstrap: str, topic: str, args, *, throughput: float = -1, **props) -> dict:
    from confluent_kafka import Producer

    conf = {**THROUGHPUT_PROPS, **props}
    if bootstrap:
        conf["bootstrap.servers"] = bootstrap
    producer = Producer(conf)
    payload = producer_perf.random_payload(args.record_size, seed=1)
    count = args.records if throughput <= 0 else int(throughput * args.latency_seconds)
    stats = producer_perf.run(
        producer,
        topic,
        count,
        [payload],
        throughput,
        report=lambda line: print(f"    {line}", file=sys.stderr),
    )
    summary = stats.summary(time.perf_counter())
    if stats.errors:
        summary["first_error"] = f"{stats.errors[0].name()}: {stats.errors[0].str()}"
    return summary


def consume(bootstrap: str, topic: str, args) -> dict:
    consumer = consumer_perf.make_consumer(bootstrap, group=None, fetch_size=MB, from_latest=False)
    try:
        consumer_perf.attach(consumer, topic, group=None, from_latest=False)
        r = consumer_perf.consume(consumer, args.records, timeout_s=30)
    finally:
        consumer.close()
    seconds = max(r["end"] - r["start"], 1e-9)
    summary = {
        "records": r["count"],
        "seconds": seconds,
        "records_per_sec": r["count"] / seconds,
        "mb_per_sec": r["bytes"] / seconds / MB,
    }
    if r["count"] < args.records:
        summary["errors"] = args.records - r["count"]
        summary["first_error"] = f"only {r['count']} of {args.records} records came back in time"
    return summary


def kafka_runs(bootstrap: str, args, label: str, results: list) -> None:
    def record(test: str, summary: dict) -> None:
        row = {"system": label, "test": test, **summary}
        results.append(row)
        print(f"  {test}: {summary['records_per_sec']:,.0f} records/s", file=sys.stderr)

    stamp = int(time.time())
    plain = f"bench-none-{stamp}"
    create_topic(bootstrap, plain, args.partitions)
    record("produce, uncompressed", produce(bootstrap, plain, args, **{"compression.type": "none"}))
    if "lz4" not in args.skip:
        lz4 = f"bench-lz4-{stamp}"
        create_topic(bootstrap, lz4, args.partitions)
        record("produce, lz4", produce(bootstrap, lz4, args, **{"compression.type": "lz4"}))
    if "consume" not in args.skip:
        record("consume", consume(bootstrap, plain, args))
    if "kcat" not in args.skip:
        kcat_runs(bootstrap, args, label, results)
    if "latency" not in args.skip:
        latency = f"bench-latency-{stamp}"
        create_topic(bootstrap, latency, args.partitions)
        record(
            f"produce @{args.latency_rate}/s (latency)",
            produce(
                bootstrap,
                latency,
                args,
                throughput=args.latency_rate,
                **{"linger.ms": args.latency_linger_ms},
            ),
        )


def kcat_runs(bootstrap: str, args, label: str, results: list) -> None:
    """The same produce and consume through kcat: librdkafka with no Python in the loop,
    the peer of redis-benchmark's C client."""
    if shutil.which("kcat") is None:
        print("  kcat not installed; skipping its runs", file=sys.stderr)
        return
    topic = f"bench-kcat-{int(time.time())}"
    create_topic(bootstrap, topic, args.partitions)
    with tempfile.NamedTemporaryFile("wb", suffix=".lines", delete=False) as f:
        f.write((b"x" * args.record_size + b"\n") * args.records)
        lines = f.name
    props = [x for k, v in THROUGHPUT_PROPS.items() for x in ("-X", f"{k}={v}")]
    try:
        start = time.perf_counter()
        subprocess.run(
            ["kcat", "-P", "-b", bootstrap, "-t", topic, "-l", lines, *props],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - start
    finally:
        os.unlink(lines)
    results.append(_rate_row(label, "produce, kcat (C client)", args, args.records, seconds))
    start = time.perf_counter()
    out = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o\n",
            "-X",
            f"fetch.max.bytes={50 * MB}",
        ],
        check=True,
        capture_output=True,
    ).stdout
    seconds = time.perf_counter() - start
    results.append(_rate_row(label, "consume, kcat (C client)", args, out.count(b"\n"), seconds))


def _rate_row(label: str, test: str, args, count: int, seconds: float) -> dict:
    rps = count / seconds
    print(f"  {test}: {rps:,.0f} records/s", file=sys.stderr)
    row = {
        "system": label,
        "test": test,
        "records": count,
        "seconds": seconds,
        "records_per_sec": rps,
        "mb_per_sec": rps * args.record_size / MB,
    }
    if count < args.records:
        row["errors"] = args.records - count
        row["first_error"] = f"only {count} of {args.records} records"
    return row


def mock_runs(args, results: list) -> None:
    """The same produce loop against librdkafka's in-process mock cluster."""
    props = {"test.mock.num.brokers": "1", "compression.type": "none"}
    summary = produce("", "bench-mock", args, **props)
    results.append(
        {"system": "librdkafka mock cluster", "test": "produce, uncompressed", **summary}
    )
    print(f"  mock produce: {summary['records_per_sec']:,.0f} records/s", file=sys.stderr)


# --------------------------------------------------------------------------- Redis runs


def redis_runs(args, results: list) -> None:
    value = "x" * args.record_size
    with local_redis() as port:
        out = subprocess.run(
            [
                "redis-benchmark",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-P",
                "64",
                "-n",
                str(args.records),
                "--csv",
                "XADD",
                "bench-stream",
                "*",
                "f",
                value,
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        ).stdout
        row = next(csv.DictReader(io.StringIO(out)))
        rps = float(row["rps"])
        results.append(
            {
                "system": "redis-benchmark (C)",
                "test": "XADD -P 64",
                "records": args.records,
                "records_per_sec": rps,
                "mb_per_sec": rps * args.record_size / MB,
                "p50_ms": float(row["p50_latency_ms"]),
                "p99_ms": float(row["p99_latency_ms"]),
            }
        )
        print(f"  redis-benchmark XADD: {rps:,.0f} records/s", file=sys.stderr)
        results.append(_redis_py(port, args))


def _redis_py(port: int, args) -> dict:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    value = b"x" * args.record_size
    start = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for i in range(args.records):
        pipe.xadd("bench-py", {"f": value})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    seconds = time.perf_counter() - start
    assert client.xlen("bench-py") == args.records
    rps = args.records / seconds
    print(f"  redis-py XADD: {rps:,.0f} records/s", file=sys.stderr)
    return {
        "system": "redis-py (Python)",
        "test": "XADD pipeline of 1000",
        "records": args.records,
        "seconds": seconds,
        "records_per_sec": rps,
        "mb_per_sec": rps * args.record_size / MB,
    }


# --------------------------------------------------------------------------- report


def print_table(results: list, args) -> None:
    print(
        f"\n{args.records:,} records x {args.record_size} B, {args.partitions} partitions, "
        "acks=1, batch.size=1MB, linger.ms=10; latency run "
        f"{args.latency_rate}/s for {args.latency_seconds:g} s, linger.ms={args.latency_linger_ms}"
    )
    print(f"{'system':<26}{'test':<30}{'records/s':>12}{'MB/s':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for r in results:
        p50 = f"{r['p50_ms']:.2f}" if "p50_ms" in r else "-"
        p99 = f"{r['p99_ms']:.2f}" if "p99_ms" in r else "-"
        print(
            f"{r['system']:<26}{r['test']:<30}{r['records_per_sec']:>12,.0f}"
            f"{r['mb_per_sec']:>9.2f}{p50:>9}{p99:>9}"
        )
        if r.get("errors"):
            print(f"{'':<26}  ! {r['errors']} failed records: {r.get('first_error')}")


def environment() -> dict:
    import confluent_kafka

    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "git": rev,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "librdkafka": confluent_kafka.libversion()[0],
        "confluent_kafka": confluent_kafka.__version__,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    results: list[dict] = []
    if "mock" not in args.skip:
        print("librdkafka mock cluster:", file=sys.stderr)
        mock_runs(args, results)
    print("Quill:", file=sys.stderr)
    if args.bootstrap_server:
        kafka_runs(args.bootstrap_server, args, "quill", results)
    else:
        with local_cluster(1, event_loop=args.event_loop) as cluster:
            bootstrap = cluster.bootstrap
            loop = args.event_loop or os.environ.get("QUILL_EVENT_LOOP", "asyncio")
            kafka_runs(bootstrap, args, f"quill ({loop})", results)
    if "redis" not in args.skip:
        print("Redis Streams:", file=sys.stderr)
        redis_runs(args, results)
    print_table(results, args)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"environment": environment(), "args": vars(args), "results": results}, indent=2
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
