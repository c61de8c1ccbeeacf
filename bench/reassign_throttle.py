"""Reassignment under a replication throttle: does the new replica copy at the throttle?

    python bench/reassign_throttle.py [--mb 1024] [--rate 10000000] [--json out.json]

Two brokers (started here, as quill-stack builds them). A one-partition topic on broker 1
gets ``--mb`` MB (10,000-byte records, no compression, acks=all); then, as an operator
would, ``quill-reassign-partitions --execute --throttle RATE`` moves it to [1, 2]
(leader and follower rates on both brokers, ``0:1`` leader and ``0:2`` follower
throttled replicas), and the copy on broker 2 is watched on disk every 0.2 s until it
holds every byte and the controller has completed the move; ``--verify`` then removes
the throttles. Printed: bytes, seconds, the copy rate overall (first to last byte) and
sustained (from 10 % to 90 % of the bytes, leaving out the start-up and the tail), and
their ratio to the throttle. Figures are printed, never asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import local_cluster  # noqa: E402
from broker.zk.znodes import TopicZNode  # noqa: E402

RECORD = 10_000


def _produce(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "none",
            "batch.size": 1_000_000,
        }  # fmt: skip
    )
    value = bytes(range(256)) * (RECORD // 256) + bytes(RECORD % 256)
    for _ in range(total // RECORD):
        while True:
            try:
                producer.produce(topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.log")) if path.exists() else 0


def _tool(bootstrap: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "broker.cli.reassign_partitions", "--bootstrap-server",
         bootstrap, *args], capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return out.stdout


def run(mb: int, rate: int) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kazoo.client import KazooClient

    with local_cluster(2) as cluster:
        topic = "throttled"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1]])])[
            topic
        ].result(60)
        time.sleep(1.0)
        _produce(cluster.bootstrap, topic, mb * 1_000_000)
        source = Path(cluster.brokers[1].spec.dirs[0]) / f"{topic}-0"
        target = Path(cluster.brokers[2].spec.dirs[0]) / f"{topic}-0"
        total = _size(source)
        plan = Path(tempfile.mkdtemp(prefix="quill-bench-plan-")) / "plan.json"
        plan.write_text(
            json.dumps(
                {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2]}]}
            )  # fmt: skip
        )
        zk = KazooClient(hosts=cluster.zk_connect)
        zk.start(timeout=10)
        started = time.monotonic()
        _tool(cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan),
              "--throttle", str(rate))  # fmt: skip
        samples = []  # (seconds since --execute, bytes on broker 2)
        while True:
            copied = _size(target)
            samples.append((time.monotonic() - started, copied))
            body = json.loads(zk.get(TopicZNode.path(topic))[0])
            if (
                copied >= total
                and body["partitions"]["0"] == [1, 2]
                and not body.get("adding_replicas")
            ):
                break
            if time.monotonic() - started > 3 * total / rate + 120:
                raise RuntimeError(f"the copy stalled at {copied:,} of {total:,} bytes")
            time.sleep(0.2)
        zk.stop()
        verify = _tool(cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan))

    def at(fraction: float) -> float:
        return next(t for t, b in samples if b >= fraction * total)

    first = next(t for t, b in samples if b > 0)
    overall = total / max(samples[-1][0] - first, 1e-3)
    sustained = 0.8 * total / max(at(0.9) - at(0.1), 1e-3)
    return {
        "bytes": total,
        "throttle_bytes_per_s": rate,
        "seconds": round(samples[-1][0], 1),
        "overall_bytes_per_s": round(overall),
        "sustained_bytes_per_s": round(sustained),
        "overall_ratio": round(overall / rate, 3),
        "sustained_ratio": round(sustained / rate, 3),
        "throttles_cleared": "Clearing broker-level throttles" in verify,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=1024, help="MB to move (default 1024)")
    p.add_argument("--rate", type=int, default=10_000_000, help="throttle, B/s (default 10 MB/s)")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    figures = run(args.mb, args.rate)
    for key, value in figures.items():
        shown = f"{value:,}" if type(value) is int else str(value)
        print(f"{key:>24}: {shown}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
