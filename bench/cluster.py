"""Cluster benchmark: three brokers on this machine, replication factor 3.

    python bench/cluster.py [--records 1000000] [--json out.json]

- produce records/s through kcat (librdkafka, no Python loop) with acks=1 and acks=all,
  100-byte values, 6 partitions, min.insync.replicas=2;
- failover: kill -9 the leader of a partition while an acks=all producer writes to it,
  and time kill -> first acknowledged write on the successor, split into failure
  detection (the broker's znode disappears: ZooKeeper session timeout), election (the
  state znode names a new leader) and the client's catch-up;
- controlled shutdown: SIGTERM one broker of a 1,000-partition topic and time how long
  moving all its leaderships takes (the broker logs it).

Figures are printed, never asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import emit, local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402
from broker.zk.znodes import BrokerIdZNode, TopicPartitionStateZNode  # noqa: E402

SESSION_MS = 6000


def kcat_produce(bootstrap: str, topic: str, records: int, size: int, acks: str) -> float:
    with tempfile.NamedTemporaryFile("wb", delete=False) as f:
        f.write((b"x" * size + b"\n") * records)
        path = f.name
    try:
        start = time.perf_counter()
        subprocess.run(
            [
                "kcat",
                "-P",
                "-b",
                bootstrap,
                "-t",
                topic,
                "-l",
                path,
                "-X",
                f"acks={acks}",
                "-X",
                "linger.ms=10",
                "-X",
                "batch.size=1000000",
                "-X",
                "queue.buffering.max.messages=1000000",
            ],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        return records / (time.perf_counter() - start)
    finally:
        os.unlink(path)


def _state(zk, topic: str, partition: int) -> dict:
    return json.loads(zk.get(TopicPartitionStateZNode.path(topic, partition))[0])


def failover(cluster, zk) -> dict:
    from confluent_kafka import Producer

    topic = "bench-failover"
    create_topic(cluster.bootstrap, topic, 1, rf=3, config={"min.insync.replicas": "2"})
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 20,
        }
    )
    for _ in range(100):
        producer.produce(topic, b"warm", partition=0)
    producer.flush(30)
    leader = _state(zk, topic, 0)["leader"]
    killed = time.perf_counter()
    cluster.brokers[leader].kill()
    detected = elected = None
    acked_at: list[float] = []
    producer.produce(
        topic,
        b"after",
        partition=0,
        on_delivery=lambda e, m: e is None and acked_at.append(time.perf_counter()),
    )
    while not acked_at and time.perf_counter() - killed < 60:
        now = time.perf_counter()
        if detected is None and zk.exists(BrokerIdZNode.path(leader)) is None:
            detected = now
        if (
            detected is not None
            and elected is None
            and _state(zk, topic, 0)["leader"] not in (-1, leader)
        ):
            elected = now
        producer.poll(0.005)
    first = acked_at[0] if acked_at else float("nan")
    cluster.brokers[leader].start()
    cluster.brokers[leader].wait_healthy()
    detected = detected or first
    elected = elected or first
    return {
        "kill_to_first_ack_s": first - killed,
        "detection_s": detected - killed,
        "election_s": elected - detected,
        "client_s": first - elected,
        "session_timeout_s": SESSION_MS / 1000,
    }


def controlled_shutdown(cluster, partitions: int) -> dict:
    topic = "bench-shutdown"
    create_topic(cluster.bootstrap, topic, partitions, rf=3)
    time.sleep(3)  # let every follower join its ISR
    victim = 2
    proc = cluster.brokers[victim]
    start = time.perf_counter()
    proc.stop(timeout=60)
    total = time.perf_counter() - start
    text = Path(proc.spec.log_path).read_text()
    found = re.findall(r"controlled shutdown done in ([0-9.]+)s", text)
    return {
        "partitions": partitions,
        "moved_in_s": float(found[-1]) if found else None,
        "sigterm_to_exit_s": total,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--shutdown-partitions", type=int, default=1000)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    from kazoo.client import KazooClient

    results: dict = {}
    overrides = {
        "zookeeper.session.timeout.ms": str(SESSION_MS),
        "auto.leader.rebalance.enable": "false",
    }
    with local_cluster(3, overrides) as cluster:
        zk = KazooClient(hosts=cluster.zk_connect, timeout=10)
        zk.start(timeout=10)
        for acks in ("1", "all"):
            topic = f"bench-rf3-acks-{acks}"
            create_topic(cluster.bootstrap, topic, 6, rf=3, config={"min.insync.replicas": "2"})
            rps = kcat_produce(cluster.bootstrap, topic, args.records, args.record_size, acks)
            results[f"produce_acks_{acks}_records_per_s"] = rps
            print(f"RF=3 acks={acks}: {rps:,.0f} records/s", file=sys.stderr)
        results["failover"] = failover(cluster, zk)
        print(f"failover: {results['failover']}", file=sys.stderr)
        results["controlled_shutdown"] = controlled_shutdown(cluster, args.shutdown_partitions)
        print(f"controlled shutdown: {results['controlled_shutdown']}", file=sys.stderr)
        zk.stop()
    return emit(results, args.json)


if __name__ == "__main__":
    sys.exit(main())
