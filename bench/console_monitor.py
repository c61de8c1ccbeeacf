"""Whether the console's monitor keeps up with 10,000 partitions and 100 groups at 1 s.

    python bench/console_monitor.py                       # 10 topics x 1,000, 100 groups, 60 s
    python bench/console_monitor.py --topics 2 --partitions 500 --seconds 20
    python bench/console_monitor.py --brokers 3 --replication-factor 3

Starts ZooKeeper, --brokers brokers (1) and Redis in a temp dir (bench/localstack.py),
creates the topics (--replication-factor, 1), writes one record to every partition, commits offsets for the groups
(AdminClient.alter_consumer_group_offsets; group i covers `--group-partitions`
partitions of topic i mod topics, half of them one record behind), then runs the monitor
(`console.monitor.run.Monitor`, interval 1 s) in a child process for `--seconds` and
prints: the time one sampling round takes (p50/p99/max against the 1 s target), the
achieved interval between rounds, the monitor process's CPU share (utime+stime from
/proc/<pid>/stat over the run) and Redis memory. Figures are printed, never asserted. With QUILL_BENCH_PYSPY=<file>
the monitor is profiled with py-spy (wall time, idle included) into <file>, collapsed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import local_cluster  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | str = "self") -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ------------------------------------------------------------ the child: the monitor
def child(seconds: float, out: str) -> None:
    import asyncio
    import logging

    import django

    django.setup()
    logging.basicConfig(level=logging.WARNING)
    from console.monitor.run import Monitor

    async def run() -> dict:
        monitor = Monitor(interval=1.0)
        task = asyncio.create_task(monitor.run())
        while getattr(monitor, "watcher", None) is None or monitor.samples < 1:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        rounds, starts = [], []
        if os.environ.get("QUILL_BENCH_PYSPY"):  # where the monitor's wall time goes
            subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--pid",
                    str(os.getpid()),
                    "--duration",
                    str(int(seconds)),
                    "--idle",
                    "--nonblocking",
                    "--format",
                    "raw",
                    "-o",
                    os.environ["QUILL_BENCH_PYSPY"],
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        cpu0, wall0, seen = cpu_seconds(), time.monotonic(), monitor.samples
        while time.monotonic() - wall0 < seconds:
            await asyncio.sleep(0.005)
            if monitor.samples != seen:
                seen = monitor.samples
                rounds.append(monitor.last_sample_s)
                starts.append(time.monotonic() - monitor.last_sample_s)
        cpu1, wall1 = cpu_seconds(), time.monotonic()
        task.cancel()
        snap = monitor.watcher.snapshot()
        return {
            "rounds_s": rounds,
            "intervals_s": [b - a for a, b in zip(starts, starts[1:], strict=False)],
            "cpu_s": cpu1 - cpu0,
            "wall_s": wall1 - wall0,
            "partitions": len(snap["states"]),
        }

    Path(out).write_text(json.dumps(asyncio.run(run())))
    os._exit(0)  # the cancelled monitor's executor threads need not be joined


# ------------------------------------------------------------ the parent: the cluster
def prepare(
    bootstrap: str, topics: list[str], partitions: int, rf: int, groups: int, width: int
) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    for t in topics:  # one at a time: a single broker creates 1,000 partitions in seconds
        started = time.monotonic()
        admin.create_topics([NewTopic(t, partitions, rf)], request_timeout=300)[t].result(310)
        print(f"  {t}: {partitions} partitions in {time.monotonic() - started:.1f} s", flush=True)
    # acks=1: the records only give the partitions offsets; what is measured is the monitor
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1})
    deadline = time.monotonic() + 300
    pending = [(t, p) for t in topics for p in range(partitions)]
    while pending:  # leaders are elected partition by partition
        failed = []

        def done(err, msg, failed=failed):
            if err is not None:
                failed.append((msg.topic(), msg.partition()))

        for t, p in pending:
            while True:
                try:
                    producer.produce(t, value=b"x" * 100, partition=p, on_delivery=done)
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.flush(120)
        pending = failed
        if pending and time.monotonic() > deadline:
            raise SystemExit(f"{len(pending)} partitions not writable after 5 minutes")
    for g in range(groups):
        topic = topics[g % len(topics)]
        tps = [TopicPartition(topic, p, 1 - (p % 2)) for p in range(min(width, partitions))]
        req = ConsumerGroupTopicPartitions(f"bench-group-{g:03d}", tps)
        for _ in range(20):
            try:
                admin.alter_consumer_group_offsets([req])[req.group_id].result(60)
                break
            except Exception as exc:  # noqa: BLE001 - the coordinator may still be loading
                last = exc
                time.sleep(0.5)
        else:
            raise SystemExit(f"could not commit offsets for {req.group_id}: {last}")


def redis_memory(url: str) -> str:
    import redis

    info = redis.Redis.from_url(url).info("memory")
    return f"{info['used_memory_human']} used, {info['used_memory_peak_human']} peak"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=10)
    p.add_argument("--partitions", type=int, default=1000, help="per topic")
    p.add_argument("--brokers", type=int, default=1)
    p.add_argument("--replication-factor", type=int, default=1)
    p.add_argument("--groups", type=int, default=100)
    p.add_argument("--group-partitions", type=int, default=100, help="committed per group")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.seconds, args.child)
        return 0

    from quill_stack import ports, services
    from quill_stack.process import ManagedProcess
    from quill_stack.state import owner_env

    state = Path(tempfile.mkdtemp(prefix="quill-bench-redis-"))
    redis_port = ports.free_port()
    redis_proc = ManagedProcess(services.redis_spec(state, redis_port), owner_env(state))
    redis_proc.start()
    redis_proc.wait_healthy()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    try:
        with local_cluster(args.brokers) as cluster:
            topics = [f"bench-mon-{i:02d}" for i in range(args.topics)]
            total = args.topics * args.partitions
            print(
                f"creating {args.topics} topics x {args.partitions} partitions = {total:,}, "
                f"RF {args.replication_factor} on {args.brokers} broker(s)"
            )
            started = time.monotonic()
            prepare(
                cluster.bootstrap,
                topics,
                args.partitions,
                args.replication_factor,
                args.groups,
                args.group_partitions,
            )
            print(
                f"prepared in {time.monotonic() - started:.0f} s: {args.groups} groups x "
                f"{args.group_partitions} committed partitions"
            )
            out = Path(tempfile.mkdtemp(prefix="quill-bench-mon-")) / "result.json"
            env = dict(
                os.environ,
                QUILL_BOOTSTRAP_SERVERS=cluster.bootstrap,
                QUILL_ZOOKEEPER_CONNECT=cluster.zk_connect,
                QUILL_REDIS_URL=redis_url,
                QUILL_STATE_DIR=str(out.parent),
                DJANGO_SETTINGS_MODULE="console.settings",
            )
            cmd = [sys.executable, __file__, "--child", str(out), "--seconds", str(args.seconds)]
            started = time.monotonic()
            proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
            if proc.wait(timeout=args.seconds + 600) != 0:
                raise SystemExit(f"monitor child exited {proc.returncode}")
            r = json.loads(out.read_text())
            rounds = [x * 1000 for x in r["rounds_s"]]
            gaps = [x * 1000 for x in r["intervals_s"]] or [0.0]
            print(
                f"\nmonitor over {r['wall_s']:.0f} s: {r['partitions']:,} partitions watched, "
                f"{args.groups} groups, {len(rounds)} sampling rounds (target 1 per s)"
            )
            print(
                f"round time     p50 {statistics.median(rounds):7.0f} ms   "
                f"p99 {pct(rounds, 0.99):7.0f} ms   max {max(rounds):7.0f} ms"
            )
            print(
                f"interval       p50 {statistics.median(gaps):7.0f} ms   "
                f"p99 {pct(gaps, 0.99):7.0f} ms   (1,000 ms when it keeps up)"
            )
            share = r["cpu_s"] / r["wall_s"]
            print(
                f"monitor CPU    {r['cpu_s']:.1f} s over {r['wall_s']:.0f} s = {share:.0%} "
                f"of one core ({share / os.cpu_count():.0%} of {os.cpu_count()} cores)"
            )
            print(f"redis memory   {redis_memory(redis_url)}")
    finally:
        redis_proc.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
