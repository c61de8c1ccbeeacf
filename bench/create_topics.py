"""CreateTopics at scale: how long one broker takes to create a topic of many partitions.

```sh
.venv/bin/python bench/create_topics.py                            # 10,000 partitions
.venv/bin/python bench/create_topics.py --partitions 2000 --before 9e96330
```

One broker (RF 1) per round, a fresh cluster each time; one CreateTopics of
``--partitions`` partitions through confluent-kafka's AdminClient: the time until the
broker answers (it answers once every partition has a leader, or after the request's
timeout) and until Metadata shows a leader for every partition. ``--before <commit>``
also runs that commit's broker (exported with ``git archive``) in alternating rounds,
so before and after share the machine's load. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.acks_all import export_tree  # noqa: E402
from bench.localstack import local_cluster  # noqa: E402


def create(bootstrap: str, partitions: int, timeout_s: float) -> tuple[float, float]:
    """(seconds until CreateTopics answered, seconds until every partition is led)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    started = time.monotonic()
    future = admin.create_topics(
        [NewTopic("wide", partitions, 1)],
        request_timeout=timeout_s,
        operation_timeout=timeout_s,
    )["wide"]
    future.result(timeout=timeout_s + 30)
    answered = time.monotonic() - started
    while time.monotonic() - started < timeout_s:
        meta = admin.list_topics("wide", timeout=30).topics.get("wide")
        if meta and sum(1 for p in meta.partitions.values() if p.leader >= 0) == partitions:
            return answered, time.monotonic() - started
        time.sleep(0.2)
    raise RuntimeError(f"not every partition had a leader after {timeout_s:.0f} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0, help="CreateTopics timeout, s")
    p.add_argument("--before", help="a commit to compare with, run in alternating rounds")
    args = p.parse_args(argv)
    print(f"(a shared machine: {os.cpu_count()} CPUs; figures are noisy)")
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.before:
        trees.insert(0, (args.before, export_tree(args.before)))
    for r in range(args.rounds):
        for label, src in trees if r % 2 == 0 else list(reversed(trees)):
            with local_cluster(1, {"num.partitions": 1}, src=src) as cluster:
                answered, led = create(cluster.bootstrap, args.partitions, args.timeout)
            print(
                f"round {r + 1}, {label}: {args.partitions:,} partitions, CreateTopics "
                f"answered in {answered:.1f} s, all led in {led:.1f} s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
