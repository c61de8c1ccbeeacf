"""How long the console takes to render a topic page with 1,000 partitions.

    python bench/console_topic_page.py                     # 3 brokers, 1,000 partitions, RF 3
    python bench/console_topic_page.py --partitions 2000 --runs 20

Starts ZooKeeper and brokers in a temp dir (bench/localstack.py), creates the topic,
writes a record to every partition, then renders /topics/<name>/ in-process through
Django's test client (login, middleware, view, template) and prints the time per render
and its parts: ZooKeeper reads, the broker samples (ListOffsets x3 and DescribeLogDirs
per broker), the configs, the template. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import console_client, local_cluster  # noqa: E402


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def row(label: str, ms: list[float]) -> str:
    return (
        f"{label:<34} median {statistics.median(ms):8.1f} ms   min {min(ms):8.1f}   "
        f"max {max(ms):8.1f}"
    )


def prepare(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(120)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    deadline = time.monotonic() + 120
    while True:  # leaders are elected partition by partition
        try:
            for p in range(partitions):
                producer.produce(topic, value=b"x" * 100, partition=p)
            if producer.flush(60) == 0:
                return
        except BufferError:
            producer.flush(10)
        if time.monotonic() > deadline:
            raise SystemExit("could not write to every partition within 2 minutes")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--runs", type=int, default=10)
    args = p.parse_args(argv)
    rf = min(3, args.brokers)
    with local_cluster(args.brokers) as cluster:
        topic = "bench-topic-page"
        print(f"creating {topic}: {args.partitions} partitions, RF {rf}, {args.brokers} brokers")
        prepare(cluster.bootstrap, topic, args.partitions, rf)
        client = console_client(cluster)
        from django.http import QueryDict
        from django.template.loader import render_to_string

        from cluster_client import admin, state, zk
        from console.views.partitions import partition_page

        path = f"/topics/{topic}/"
        first = client.get(path)
        assert first.status_code == 200, first.status_code
        size_kib = len(first.content) / 1024
        pages = timed(lambda: client.get(path), args.runs)
        parts = [(topic, i) for i in range(args.partitions)]
        zk_ms = timed(
            lambda: (zk.assignment(topic), zk.partition_states(parts), zk.brokers()), args.runs
        )
        detail = state.topic_detail(topic)
        sample_ms = timed(lambda: state.topic_detail(topic), args.runs)
        config_ms = timed(lambda: admin.topic_configs(topic), args.runs)
        context = {
            "topic": detail,
            "page_of": partition_page(detail["partitions"], QueryDict(), 1),
            "configs": admin.topic_configs(topic),
            "errors": {},
            "history": [],
            "config_keys": [],
            "overrides": "",
        }
        template_ms = timed(lambda: render_to_string("console/topic.html", context), args.runs)
        print(
            f"\n/topics/{topic}/ with {args.partitions} partitions x RF {rf}: "
            f"{size_kib:.0f} KiB of HTML, {args.runs} renders"
        )
        print(row("whole page (test client)", pages))
        print(row("  ZooKeeper reads (get_async)", zk_ms))
        print(row("  ZooKeeper + broker samples", sample_ms))
        print(row("  DescribeConfigs", config_ms))
        print(row("  template", template_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
