"""The replicated write path (issue 11): acks=all with small requests, before/after.

    python bench/acks_all.py [--seconds 10] [--rate 10000] [--idle-partitions 300]
                             [--bulk-records 300000] [--idle-first N] [--baseline REF]
                             [--burst 100]

Three brokers on this machine (built as quill-stack builds them), a topic with 6
partitions, RF 3, min.insync.replicas=2, 100-byte records. Rows:

- fixed-rate produce through confluent-kafka (librdkafka) at ``--rate`` records/s for
  ``--seconds``: acks=all linger.ms=0 and 5, acks=1 linger.ms=0; achieved records/s
  and latency p50/p99/p999 from produce() to the delivery report, after one warm-up
  record per partition (the producer connected, as an application's is);
- end to end (rows e2e0, e2e5): the same fixed-rate acks=all producer (linger.ms 0 or
  5) while a consumer process reads the topic from its end; latency is the consumer's
  receive time minus the record's CreateTime (set by librdkafka at produce(), one
  clock, millisecond resolution): produce, replication, the HW move, the consumer's
  fetch;
- requests/s one broker answers: ``--connections`` producer processes, each with one
  connection, send 1-record requests (batch.num.messages=1, linger.ms=0, acks=1) to a
  one-partition RF 1 topic as fast as they can for ``--seconds``;
- idle: the brokers' CPU (utime + stime from /proc) over 10 s with only the idle
  partitions around, nobody producing: what follower fetch rounds cost at rest;
- bulk with idle partitions around: ``--idle-partitions`` more partitions (RF 3, never
  written) are created, then kcat writes ``--bulk-records`` with acks=all and acks=1;
  the ratio is the cost of replication, and the brokers' CPU per record (utime + stime,
  the three together, over each kcat run) is printed beside it;

- floor (rows floor0, floor5): the fixed-rate acks=all producer against librdkafka's
  mock cluster (no broker; the mock answers inside the client): the client's own share
  of the latency at linger.ms 0 and 5, printed before the cluster rows.

``--burst N`` sends the fixed-rate rows' records N at a time (bursts evenly paced: 100
records every 10 ms at 10,000/s) instead of one by one, as bursty arrivals do.

Every row of the table starts with the CPU model (/proc/cpuinfo). Each fixed-rate row
also reports the CPU used meanwhile (bench/machine_cpu.py): the
three brokers', the client's (this process, librdkafka's threads included) and every
other process's on the machine, the busiest named. On two shared cores a row's tail
moves with all of them.

``--idle-first N`` creates N idle partitions (RF 3) before the fixed-rate rows (and
measures the brokers' CPU at rest with them, as the idle row): the acks=all figures
with that many partitions on every broker.

``--baseline REF`` runs every row first on the brokers of git ref REF (exported to a
temp dir; the client side is the same), then on this tree, so before/after share one
machine state. Figures are printed, never asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import machine_cpu  # noqa: E402
from bench.cluster import kcat_produce  # noqa: E402
from bench.localstack import local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402
from broker.cli import producer_perf  # noqa: E402

TOPIC_CONFIG = {"min.insync.replicas": "2"}


WARM_UP = b"warm-up"


#: after the test topic is made, before the first row (> heap.REFREEZE_AFTER_S)
SETTLE_S = 6.0


def warm_up(producer, topic: str) -> None:
    """One record to each partition, flushed: connections, metadata and producer id are
    in place before the clock starts, as in a running application (and as the floor
    rows' mock producer is). Without it the first ~50 ms (connecting to three brokers)
    land in the percentiles: about a third of the slowest 1% of a 10 s linger-0 run."""
    partitions = producer.list_topics(topic, timeout=30).topics[topic].partitions
    for partition in partitions:
        producer.produce(topic, WARM_UP, partition=partition)
    if producer.flush(60):
        raise RuntimeError(f"warm-up records to {topic} were not acknowledged")


def burst_run(producer, topic: str, count: int, payload: bytes, rate: int, burst: int):
    """``count`` records at ``rate`` on average, ``burst`` at a time (100 records every
    10 ms at 10,000/s) instead of evenly paced; every record timed exactly."""
    from functools import partial

    stats = producer_perf.Stats(count, None)
    start = time.perf_counter()
    for first in range(0, count, burst):
        due = start + first / rate
        while (delay := due - time.perf_counter()) > 0.001:
            producer.poll(delay)  # serves delivery reports while it waits
        for _ in range(min(burst, count - first)):
            callback = partial(stats.sampled, time.perf_counter())
            while True:
                try:
                    producer.produce(topic, payload, on_delivery=callback)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError(f"records to {topic} were not acknowledged in 60 s")
    return stats


def _timed_run(
    producer, topic: str, rate: int, seconds: float, brokers: list[int], burst: int = 1
) -> dict:
    """The fixed-rate run itself, with who used the CPU meanwhile (machine_cpu)."""
    payload = producer_perf.random_payload(100, seed=1)
    count = int(rate * seconds)
    before = machine_cpu.snapshot()
    started = time.perf_counter()
    if burst > 1:
        stats = burst_run(producer, topic, count, payload, rate, burst)
    else:
        stats = producer_perf.run(producer, topic, count, [payload], rate, sample_every=1)
    summary = stats.summary(time.perf_counter())
    summary["records_per_sec"] = count / (time.perf_counter() - started)
    summary["cpu"] = machine_cpu.cpu_between(before, machine_cpu.snapshot(), brokers)
    return summary


def fixed_rate(
    bootstrap: str,
    topic: str,
    rate: int,
    seconds: float,
    brokers: tuple[int, ...] = (),
    burst: int = 1,
    **props,
) -> dict:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, **props})
    warm_up(producer, topic)
    return _timed_run(producer, topic, rate, seconds, list(brokers), burst)


def client_floor(rate: int, seconds: float, linger_ms: str) -> dict:
    """The same fixed-rate acks=all producer against librdkafka's mock cluster (three
    mock brokers inside the client process, answering at once): the latency the client
    alone adds at these settings, the floor under any broker's figure."""
    from confluent_kafka import Producer

    producer = Producer({"test.mock.num.brokers": 3, "acks": "all", "linger.ms": linger_ms})
    producer.produce("small", WARM_UP)  # the mock creates the topic on first use
    producer.flush(10)
    warm_up(producer, "small")
    return _timed_run(producer, "small", rate, seconds, [])


def _e2e_consumer(bootstrap: str, topic: str, partitions: int, seconds: float, ready, out):
    """Read ``topic`` from its end for ``seconds``; put the receive - CreateTime latencies
    (ms) on ``out``."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "e2e", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    consumer.consume(num_messages=1, timeout=2.0)  # joined and positioned
    ready.set()
    latencies: list[int] = []
    end = time.time() + seconds
    while time.time() < end:
        msg = consumer.poll(0.1)  # at once when a record is there (consume() waits for a batch)
        if msg is not None and msg.error() is None and msg.value() != WARM_UP:
            latencies.append(int(time.time() * 1000) - msg.timestamp()[1])
    consumer.close()
    out.put(latencies)


def end_to_end(bootstrap: str, topic: str, rate: int, seconds: float, **props) -> dict:
    """Produce at ``rate`` (fixed_rate) while a consumer process measures receive - CreateTime."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_e2e_consumer, args=(bootstrap, topic, 6, seconds + 8, ready, out))
    proc.start()
    ready.wait(60)
    produced = fixed_rate(bootstrap, topic, rate, seconds, **props)
    latencies = sorted(out.get(timeout=seconds + 120))
    proc.join()

    def pct(q: float) -> float:
        return (
            float(latencies[min(len(latencies) - 1, int(q * len(latencies)))]) if latencies else -1
        )

    return {
        "records_per_sec": produced["records_per_sec"],
        "received": len(latencies),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "p999_ms": pct(0.999),
    }


def _request_loop(bootstrap: str, topic: str, seconds: float, out) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": "0",
            "batch.num.messages": "1",  # one record per request
            "queue.buffering.max.messages": "20000",
        }
    )
    acked = [0]

    def delivered(err, _msg) -> None:
        if err is None:
            acked[0] += 1

    payload = b"x" * 100
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        try:
            producer.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.001)
        producer.poll(0)
    producer.flush(30)
    out.put(acked[0])


def requests_per_second(bootstrap: str, topic: str, connections: int, seconds: float) -> dict:
    """Acknowledged 1-record requests per second, ``connections`` producers at once."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_request_loop, args=(bootstrap, topic, seconds, out))
        for _ in range(connections)
    ]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    total = sum(out.get(timeout=seconds + 120) for _ in procs)
    elapsed = time.perf_counter() - started
    for proc in procs:
        proc.join()
    return {"requests_per_sec": total / elapsed, "connections": connections}


def idle_cpu(cluster, seconds: float) -> dict:
    """CPU the brokers burn while no client writes or reads: replication's idle cost."""
    pids = [proc.pid for proc in cluster.brokers.values()]
    before = machine_cpu.snapshot()
    time.sleep(seconds)
    after = machine_cpu.snapshot()
    used = sum(machine_cpu.used_seconds(before, after, pid) for pid in pids)
    return {"cpu_share_per_broker": used / len(pids) / seconds}


def export_tree(ref: str) -> Path:
    """``git archive`` of ``ref`` into a temp dir: the brokers of the 'before' column."""
    dest = Path(tempfile.mkdtemp(prefix="quill-baseline-"))
    try:
        archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    except BaseException:  # a bad ref: no half-made tree left in /tmp
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def run_rows(label: str, src: Path | None, args) -> list[dict]:
    rows: list[dict] = []

    def add(test: str, summary: dict) -> None:
        row = {"label": label, "test": test, **summary}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)

    with local_cluster(3, src=src) as cluster:
        bs = cluster.bootstrap
        if args.idle_first:
            for i, start in enumerate(range(0, args.idle_first, 1000)):  # CreateTopics of 1,000
                create_topic(bs, f"idle-first-{i}", min(1000, args.idle_first - start), 3)
            time.sleep(5)  # let every follower settle into its fetch rounds
            add(f"idle, {args.idle_first} idle partitions", idle_cpu(cluster, 10.0))
        create_topic(bs, "small", 6, 3, TOPIC_CONFIG)
        # steady state: the rows start after the brokers' one-off work for a new topic
        # (leader epochs, the first fetch rounds, the heap frozen again 5 s later:
        # broker/server/heap.py), which the fifth session measured apart
        time.sleep(SETTLE_S)
        around = f", {args.idle_first} idle partitions" if args.idle_first else ""
        bursts = f" in bursts of {args.burst}" if args.burst > 1 else ""
        for row, name, props in (
            ("all0", "acks=all linger.ms=0", {"acks": "all", "linger.ms": "0"}),
            ("all5", "acks=all linger.ms=5", {"acks": "all", "linger.ms": "5"}),
            ("one0", "acks=1 linger.ms=0", {"acks": "1", "linger.ms": "0"}),
        ):
            if row in args.rows:
                pids = tuple(proc.pid for proc in cluster.brokers.values())
                rate = fixed_rate(bs, "small", args.rate, args.seconds, pids, args.burst, **props)
                add(f"{name} @{args.rate}/s{bursts}{around}", rate)
        for row, linger in (("e2e0", "0"), ("e2e5", "5")):
            if row in args.rows:
                props = {"acks": "all", "linger.ms": linger}
                e2e = end_to_end(bs, "small", args.rate, args.seconds, **props)
                add(f"end to end, acks=all linger.ms={linger} @{args.rate}/s{around}", e2e)
        if "requests" in args.rows:
            first = bs.split(",")[0]
            create_topic(first, "one", 1, 1)
            add(
                f"acks=1 1-record requests, {args.connections} connections",
                requests_per_second(first, "one", args.connections, args.seconds),
            )
        if "bulk" not in args.rows:
            return rows
        if args.idle_partitions:
            create_topic(bs, "idle", args.idle_partitions, 3, TOPIC_CONFIG)
            time.sleep(5)  # let every follower settle into its fetch rounds
            add(f"idle, {args.idle_partitions} idle partitions", idle_cpu(cluster, 10.0))
        bulk, cpu_us = {}, {}
        pids = [proc.pid for proc in cluster.brokers.values()]
        for acks in ("all", "1"):
            create_topic(bs, f"bulk-{acks}", 6, 3, TOPIC_CONFIG)
            before = machine_cpu.snapshot()
            bulk[acks] = kcat_produce(bs, f"bulk-{acks}", args.bulk_records, 100, acks)
            after = machine_cpu.snapshot()
            used = sum(machine_cpu.used_seconds(before, after, pid) for pid in pids)
            cpu_us[acks] = used / args.bulk_records * 1e6
        add(
            f"bulk kcat, {args.idle_partitions} idle partitions",
            {
                "acks_all_per_sec": bulk["all"],
                "acks_1_per_sec": bulk["1"],
                "ratio": bulk["all"] / bulk["1"],
                "brokers_us_per_record_acks_all": cpu_us["all"],
                "brokers_us_per_record_acks_1": cpu_us["1"],
            },
        )
    return rows


def print_table(rows: list[dict]) -> None:
    model = machine_cpu.cpu_model()
    print(
        "| CPU | brokers | test | records/s | p50 ms | p99 ms | p99.9 ms | CPU meanwhile, cores |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {model} ", end="")
        if "cpu_share_per_broker" in r:
            share = r["cpu_share_per_broker"]
            print(f"| {r['label']} | {r['test']} | broker CPU {share:.0%} of a core | | | | |")
        elif "requests_per_sec" in r:
            print(
                f"| {r['label']} | {r['test']} | {r['requests_per_sec']:,.0f} requests/s | | | | |"
            )
        elif "ratio" in r:
            print(
                f"| {r['label']} | {r['test']} | acks=all {r['acks_all_per_sec']:,.0f}, "
                f"acks=1 {r['acks_1_per_sec']:,.0f} ({r['ratio']:.2f}x) | | | | brokers' CPU "
                f"per record: acks=all {r['brokers_us_per_record_acks_all']:.2f} µs, acks=1 "
                f"{r['brokers_us_per_record_acks_1']:.2f} µs |"
            )
        else:
            cpu = machine_cpu.describe(r["cpu"]) if "cpu" in r else ""
            print(
                f"| {r['label']} | {r['test']} | {r['records_per_sec']:,.0f} | "
                f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['p999_ms']:.1f} | {cpu} |"
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rate", type=int, default=10_000)
    p.add_argument("--idle-partitions", type=int, default=300)
    p.add_argument("--bulk-records", type=int, default=300_000)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument(
        "--rows",
        type=lambda v: set(v.split(",")),
        default={"all0", "all5", "one0", "requests", "bulk"},
        help="which rows: all0,all5,one0,e2e0,e2e5,requests,bulk,floor0,floor5 "
        "(default: all but e2e and floor)",
    )
    p.add_argument("--idle-first", type=int, default=0, help="idle partitions made first")
    p.add_argument(
        "--burst",
        type=int,
        default=1,
        help="fixed-rate rows all0/all5/one0 send this many records at once, bursts "
        "evenly paced (100: 100 records every 10 ms at 10,000/s)",
    )
    p.add_argument("--baseline", help="git ref whose brokers make the 'before' column")
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args(argv)
    # SIGTERM (timeout, kill) unwinds like Ctrl-C: the finally blocks stop the brokers and
    # remove the exported tree and the clusters' temp dirs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows: list[dict] = []
    for row, linger in (("floor0", "0"), ("floor5", "5")):
        if row in args.rows:
            floor = client_floor(args.rate, args.seconds, linger)
            test = f"client alone (librdkafka mock cluster), acks=all linger.ms={linger} @{args.rate}/s"
            rows.append({"label": "no broker", "test": test, **floor})
            print(json.dumps(rows[-1]), file=sys.stderr)
    if args.baseline and args.rows - {"floor0", "floor5"}:
        src = export_tree(args.baseline)
        try:
            rows += run_rows(f"before ({args.baseline})", src, args)
        finally:
            shutil.rmtree(src, ignore_errors=True)
    if args.rows - {"floor0", "floor5"}:
        rows += run_rows("after (this tree)" if args.baseline else "this tree", None, args)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
