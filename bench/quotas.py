"""Client quota benchmark: achieved vs configured byte rate, produce and consume.

    python bench/quotas.py [--quotas 50000,200000,1000000] [--seconds 25] [--json out.json]

One broker (started here, as quill-stack builds it). For each quota Q it writes
``producer_byte_rate=Q`` and ``consumer_byte_rate=Q`` for the client-id ``bench-Q``
into ZooKeeper as kafka-configs does (znode + /config/changes), then:

- produces Q x seconds bytes (1,000-byte records, one partition, LogAppendTime) as that
  client-id with confluent-kafka, as fast as the client goes;
- consumes them back as that client-id (fetch.max.bytes 64 KB).

Kafka's rate lets a fresh client through quota x (quota.window.num - 1) bytes at once
(its rate counts at least 10 one-second windows), so two rates are printed: overall
(all bytes / first-to-last time) and sustained (bytes past that burst / the time they
took). Produce times are the broker's LogAppendTime; consume times the client's
receipt. Figures are printed, never asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402

RECORD = 1000
WINDOWS = 10  # quota.window.num - 1 with Kafka's default of 11


def _rates(times_ms: list[float], quota: int) -> tuple[float, float]:
    span_s = max(times_ms[-1] - times_ms[0], 1) / 1000.0
    overall = len(times_ms) * RECORD / span_s
    skip = min(quota * WINDOWS // RECORD, len(times_ms) - 2)
    tail_s = max(times_ms[-1] - times_ms[skip], 1) / 1000.0
    return overall, (len(times_ms) - 1 - skip) * RECORD / tail_s


def _throttle_stats():
    seen = {"max": 0, "count": 0}

    def on_stats(raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            t = b.get("throttle", {})
            seen["max"] = max(seen["max"], t.get("max", 0))
            seen["count"] += t.get("cnt", 0) if t.get("max", 0) else 0

    return seen, on_stats


def produce(bootstrap: str, topic: str, client_id: str, total: int) -> dict:
    from confluent_kafka import Producer

    seen, on_stats = _throttle_stats()
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 65536,
            "statistics.interval.ms": 500,
            "stats_cb": on_stats,
        }
    )
    value = os.urandom(RECORD)
    for _ in range(total // RECORD):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    p.flush(600)
    p.poll(0.6)
    return seen


def consume(bootstrap: str, topic: str, client_id: str, count: int, log_append: bool):
    from confluent_kafka import Consumer, TopicPartition

    seen, on_stats = _throttle_stats()
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-quotas",
            "client.id": client_id,
            "enable.auto.commit": False,
            "fetch.max.bytes": 65536,
            "message.max.bytes": 65536,
            "max.partition.fetch.bytes": 65536,
            "statistics.interval.ms": 500,
            "stats_cb": on_stats,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    times: list[float] = []
    deadline = time.monotonic() + 600
    while len(times) < count and time.monotonic() < deadline:
        for msg in c.consume(500, timeout=0.5):
            if msg.error() is None:
                times.append(msg.timestamp()[1] if log_append else time.monotonic() * 1000.0)
    c.close()
    return times, seen


def run(quotas: list[int], seconds: int) -> list[dict]:
    from broker.zk.client import KafkaZkClient
    from broker.zk.znodes import ConfigType

    rows = []
    with local_cluster(1) as cluster:
        zk = KafkaZkClient(cluster.zk_connect)
        zk.start()
        try:
            for quota in quotas:
                client_id = f"bench-{quota}"
                total = quota * seconds
                zk.set_entity_config(
                    ConfigType.CLIENT,
                    client_id,
                    {"producer_byte_rate": str(quota), "consumer_byte_rate": str(quota)},
                )
                time.sleep(1.0)  # the broker's watch on /config/changes fires
                topic = f"quota-{quota}"
                create_topic(
                    cluster.bootstrap, topic, 1, config={"message.timestamp.type": "LogAppendTime"}
                )
                p_seen = produce(cluster.bootstrap, topic, client_id, total)
                times, _ = consume(cluster.bootstrap, topic, "reader", total // RECORD, True)
                p_overall, p_sustained = _rates(times, quota)
                c_times, c_seen = consume(
                    cluster.bootstrap, topic, client_id, total // RECORD, False
                )
                c_overall, c_sustained = _rates(c_times, quota)
                row = {
                    "quota": quota,
                    "bytes": total,
                    "produce_overall": p_overall,
                    "produce_sustained": p_sustained,
                    "produce_max_throttle_ms": p_seen["max"],
                    "consume_overall": c_overall,
                    "consume_sustained": c_sustained,
                    "consume_max_throttle_ms": c_seen["max"],
                }
                rows.append(row)
                print(
                    f"quota {quota:>9,} B/s | produce {p_overall:>11,.0f} overall "
                    f"{p_sustained:>11,.0f} sustained ({p_sustained / quota:.2f}x, max throttle "
                    f"{p_seen['max']} ms) | consume {c_overall:>11,.0f} overall "
                    f"{c_sustained:>11,.0f} sustained ({c_sustained / quota:.2f}x, max throttle "
                    f"{c_seen['max']} ms)",
                    flush=True,
                )
        finally:
            zk.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quotas", default="50000,200000,1000000")
    parser.add_argument("--seconds", type=int, default=25, help="bytes = quota x seconds")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = run([int(q) for q in args.quotas.split(",")], args.seconds)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
