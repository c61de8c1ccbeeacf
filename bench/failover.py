"""Failover under a running acks=all producer (issue 11): what the application sees.

    python bench/failover.py [--rate 2000] [--session-ms 6000] [--baseline REF]
                             [--json out.json]

Three brokers on this machine (bench/localstack.py), a topic with 6 partitions, RF 3,
min.insync.replicas=2. A confluent-kafka producer (acks=all, idempotent, linger.ms=0,
message.timeout.ms 60 s, as an application would run it) writes 100-byte records
round-robin over the partitions at ``--rate`` records/s from its own thread for the
whole run, and every delivery report is kept (partition, produce and ack time, error).

- kill -9 of the broker leading partition 0: per partition it led, the time from the
  kill to the first acknowledgement of a record produced after the kill (writes
  accepted again); the largest of these, against zookeeper.session.timeout.ms + 1 s
  (the issue's target); the worst produce-to-ack latency of the records caught in it;
- controlled shutdown (SIGTERM) of a broker once the killed one is back and in every
  ISR: the same figures (the issue's target: < 1 s, no error reaching the application).

Delivery errors reaching the application are counted for each phase. ``--baseline
REF`` runs it all first on the brokers of git ref REF (as bench/acks_all.py does), so
before and after share one machine state. Figures are printed, never asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.acks_all import export_tree  # noqa: E402
from bench.localstack import emit, local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402
from broker.zk.znodes import TopicPartitionStateZNode  # noqa: E402

TOPIC = "failover"
PARTITIONS = 6


class Load:
    """A producer thread at a fixed rate; keeps (partition, sent, acked, error) per record."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 60000,
                "retry.backoff.ms": 20,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.rate = rate
        self.reports: list[tuple[int, float, float, str | None]] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        payload = b"x" * 100
        interval = 1.0 / self.rate
        n = 0
        start = time.perf_counter()
        while not self.stopped.is_set():
            due = start + n * interval
            now = time.perf_counter()
            if now < due:
                self.producer.poll(min(due - now, 0.01))
                continue
            sent = now

            def report(err, msg, sent=sent) -> None:
                self.reports.append(
                    (msg.partition(), sent, time.perf_counter(), None if err is None else str(err))
                )

            try:
                self.producer.produce(TOPIC, payload, partition=n % PARTITIONS, on_delivery=report)
            except BufferError:
                self.producer.poll(0.01)
                continue
            n += 1
            self.producer.poll(0)
        self.producer.flush(90)


def _leaders(zk) -> dict[int, int]:
    out = {}
    for p in range(PARTITIONS):
        state = json.loads(zk.get(TopicPartitionStateZNode.path(TOPIC, p))[0])
        out[p] = state["leader"]
    return out


def _full_isr(zk) -> bool:
    for p in range(PARTITIONS):
        state = json.loads(zk.get(TopicPartitionStateZNode.path(TOPIC, p))[0])
        if len(state["isr"]) < 3:
            return False
    return True


def _phase(load: Load, at: float, until: float, partitions: list[int]) -> dict:
    """Writes accepted again after ``at`` on ``partitions``, from the delivery reports."""
    reports = [r for r in load.reports if at - 1.0 <= r[2] <= until]
    back = {}
    for p in partitions:
        acked = [r[2] for r in reports if r[0] == p and r[1] >= at and r[3] is None]
        back[p] = (min(acked) - at) if acked else None
    caught = [r[2] - r[1] for r in reports if r[0] in partitions and r[1] < at <= r[2]]
    errors = [r[3] for r in reports if r[3] is not None]
    known = [v for v in back.values() if v is not None]
    return {
        "partitions": partitions,
        "writes_accepted_again_s": max(known) if len(known) == len(back) else None,
        "per_partition_s": back,
        "worst_latency_caught_s": max(caught) if caught else 0.0,
        "errors_to_application": len(errors),
        "error_samples": sorted(set(errors))[:3],
    }


def _wait(condition, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def run(args, src: Path | None = None) -> dict:
    from kazoo.client import KazooClient

    overrides = {
        "zookeeper.session.timeout.ms": str(args.session_ms),
        "auto.leader.rebalance.enable": "false",
    }
    results: dict = {"rate": args.rate, "session_timeout_ms": args.session_ms}
    with local_cluster(3, overrides, src=src) as cluster:
        zk = KazooClient(hosts=cluster.zk_connect, timeout=10)
        zk.start(timeout=10)
        create_topic(
            cluster.bootstrap, TOPIC, PARTITIONS, rf=3, config={"min.insync.replicas": "2"}
        )
        _wait(lambda: _full_isr(zk), 60)
        load = Load(cluster.bootstrap, args.rate)
        load.thread.start()
        time.sleep(args.settle_s)

        victim = _leaders(zk)[0]
        led = [p for p, b in _leaders(zk).items() if b == victim]
        killed = time.perf_counter()
        cluster.brokers[victim].kill()
        _wait(lambda: len({r[0] for r in load.reports if r[1] >= killed}) == PARTITIONS, 90)
        time.sleep(2)
        results["kill_9"] = {"broker": victim, **_phase(load, killed, time.perf_counter(), led)}
        print(f"kill -9: {results['kill_9']}", file=sys.stderr)

        cluster.brokers[victim].start()
        cluster.brokers[victim].wait_healthy()
        _wait(lambda: _full_isr(zk), 120)
        time.sleep(args.settle_s)
        leaders = _leaders(zk)
        victim = max(set(leaders.values()), key=lambda b: list(leaders.values()).count(b))
        led = [p for p, b in leaders.items() if b == victim]
        stopping = time.perf_counter()
        cluster.brokers[victim].stop(timeout=60)
        stopped = time.perf_counter()
        time.sleep(3)
        results["controlled_shutdown"] = {
            "broker": victim,
            "sigterm_to_exit_s": stopped - stopping,
            **_phase(load, stopping, time.perf_counter(), led),
        }
        print(f"controlled shutdown: {results['controlled_shutdown']}", file=sys.stderr)
        load.stopped.set()
        load.thread.join(120)
        results["records_acked"] = sum(1 for r in load.reports if r[3] is None)
        results["records_failed"] = sum(1 for r in load.reports if r[3] is not None)
        cluster.brokers[victim].start()
        cluster.brokers[victim].wait_healthy()
        zk.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=2000)
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--settle-s", type=float, default=3.0)
    p.add_argument("--baseline", help="git ref whose brokers run first, for before/after")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    if not args.baseline:
        return emit(run(args), args.json)
    src = export_tree(args.baseline)
    try:
        before = run(args, src)
    finally:
        shutil.rmtree(src, ignore_errors=True)
    return emit({f"before ({args.baseline})": before, "after": run(args)}, args.json)


if __name__ == "__main__":
    sys.exit(main())
