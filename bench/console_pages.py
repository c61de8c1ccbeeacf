"""How long the console's pages take with many partitions (1,000 or 10,000).

    python bench/console_pages.py                              # 1,000 partitions, 3 brokers, RF 3
    python bench/console_pages.py --topics 10 --partitions 1000 --replication-factor 1
    python bench/console_pages.py --profile /tmp/pages.prof    # cProfile of one load each

Starts ZooKeeper and brokers in a temp dir (bench/localstack.py), creates `--topics`
topics of `--partitions` partitions each, waits until every partition has a leader,
then loads each page `--runs` times in-process through Django's test client (login,
middleware, view, template) and prints p50 and max per page. With --profile, one more
load of each page runs under cProfile and the top functions by cumulative time are
printed. Figures are printed, never asserted (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import console_client, local_cluster  # noqa: E402


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return f"{line.split(':', 1)[1].strip()} x {os.cpu_count()}"
    return platform.processor() or "unknown"


def create_topics(bootstrap: str, topics: list[str], partitions: int, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    for t in topics:  # one at a time: the controller writes each partition's state
        started = time.monotonic()
        admin.create_topics([NewTopic(t, partitions, rf)], request_timeout=300)[t].result(310)
        print(f"  {t}: {partitions} partitions in {time.monotonic() - started:.1f} s", flush=True)


def wait_for_leaders(topics: list[str], partitions: int, timeout_s: float = 600) -> None:
    from cluster_client import zk

    deadline = time.monotonic() + timeout_s
    parts = [(t, p) for t in topics for p in range(partitions)]
    while time.monotonic() < deadline:
        states = zk.partition_states(parts)
        missing = sum(1 for part in parts if states.get(part, {}).get("leader", -1) < 0)
        if not missing:
            return
        time.sleep(1)
    raise SystemExit(f"{missing} partitions still have no leader")


def warm_up(timeout_s: float = 600) -> None:
    """The first page that sees QUILL_WATCH_FROM_PARTITIONS partitions starts the
    console's ZooKeeper watches (cluster_client/picture.py); wait until they are
    complete, and say how long that took (the cold start after a console restart)."""
    from cluster_client import picture, state

    started = time.monotonic()
    summary = state.overview()
    if not picture.wanted(summary["partitions"]):
        print("fewer partitions than QUILL_WATCH_FROM_PARTITIONS: pages read afresh")
        return
    while picture.snapshot() is None:
        if time.monotonic() - started > timeout_s:
            print("the watches were not complete in time: pages read afresh")
            return
        time.sleep(0.2)
    print(f"ZooKeeper watches complete {time.monotonic() - started:.1f} s after the first page")


def pages(topics: list[str]) -> list[str]:
    return [
        "/",
        "/topics/",
        f"/topics/{topics[0]}/",
        f"/topics/{topics[0]}/?page=2",
        "/brokers/1/",
        "/brokers/1/configs/",
        "/groups/",
        "/search/?q=bench",
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", type=int, default=1)
    p.add_argument("--partitions", type=int, default=1000, help="per topic")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--replication-factor", type=int, default=3)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--profile", help="write a cProfile of one load of each page here")
    args = p.parse_args(argv)
    rf = min(args.replication_factor, args.brokers)
    total = args.topics * args.partitions
    with local_cluster(args.brokers) as cluster:
        topics = [f"bench-{i}" for i in range(args.topics)]
        print(f"creating {args.topics} x {args.partitions} partitions, RF {rf}", flush=True)
        create_topics(cluster.bootstrap, topics, args.partitions, rf)
        client = console_client(cluster)
        wait_for_leaders(topics, args.partitions)
        warm_up()
        print(
            f"\n{total:,} partitions ({args.topics} x {args.partitions:,}), RF {rf}, "
            f"{args.brokers} brokers; {args.runs} loads a page; CPU {cpu_model()}"
        )
        print(f"{'page':<34} {'KiB':>7} {'p50 ms':>8} {'max ms':>8}")
        profiler = cProfile.Profile() if args.profile else None
        for path in pages(topics):
            first = client.get(path)
            if first.status_code != 200:
                print(f"{path:<34} HTTP {first.status_code}")
                continue
            ms = []
            for _ in range(args.runs):
                started = time.perf_counter()
                client.get(path)
                ms.append((time.perf_counter() - started) * 1000)
            kib = len(first.content) / 1024
            print(f"{path:<34} {kib:7.0f} {statistics.median(ms):8.0f} {max(ms):8.0f}", flush=True)
            if profiler:
                profiler.runcall(client.get, path)
                out = io.StringIO()
                stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
                stats.print_stats(r"console/|kazoo|kio|wire|json", 25)
                print(out.getvalue())
                profiler = cProfile.Profile()
        if args.profile:
            Path(args.profile).write_text("profiles printed above\n")
        from cluster_client import zk

        zk.reset()  # before ZooKeeper stops: the watches' reads would retry forever
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
