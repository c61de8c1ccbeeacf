"""Authorizer benchmark: produce throughput with the AclAuthorizer off, on with a few
ACLs, and on with many ACLs, in one run.

    python bench/acls.py [--records 500000] [--acls 5000] [--json out.json]

Three one-broker clusters up at once (started here, as quill-stack builds them), taking
turns for ``--rounds`` rounds after a warm-up one (medians printed), a 6-partition topic,
100-byte records produced by kcat (librdkafka, no Python loop) as User:ANONYMOUS, in
two shapes: large requests (linger.ms 10, batch.size 1 MB) and small ones (linger.ms 0,
batch.num.messages 50: many requests, so the per-request authorization shows).

- off: no ``authorizer.class.name``;
- few: ``authorizer.class.name=acl``, allow.everyone.if.no.acl.found=true, and on the
  topic an ALLOW Write for ANONYMOUS beside ALLOWs for 4 other users;
- many: the same plus ``--acls`` more ACLs: literal ACLs on other topics, prefixed ones
  (some of whose prefixes start the benchmark topic's name) and 50 more users on the
  topic itself.

Figures are printed, never asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402

TOPIC = "bench-acl-topic"
SHAPES = {
    "large requests": ["linger.ms=10", "batch.size=1000000"],
    "small requests": ["linger.ms=0", "batch.num.messages=50"],
}


def kcat_produce(bootstrap: str, path: str, extra: list[str]) -> float:
    args = ["kcat", "-P", "-b", bootstrap, "-t", TOPIC, "-l", path, "-X", "acks=1"]
    for x in extra:
        args += ["-X", x]
    start = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - start


def add_acls(bootstrap: str, many: int) -> int:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    def binding(name, principal, op=AclOperation.WRITE, pattern=ResourcePatternType.LITERAL):
        return AclBinding(ResourceType.TOPIC, name, pattern, principal, "*", op,
                          AclPermissionType.ALLOW)  # fmt: skip

    wanted = [binding(TOPIC, "User:ANONYMOUS")]
    wanted += [binding(TOPIC, f"User:few-{i}") for i in range(4)]
    if many:
        wanted += [binding(TOPIC, f"User:many-{i}") for i in range(50)]
        for i in range(many - 50):
            if i % 5 == 0:  # prefixed: a tenth of them start the benchmark topic's name
                prefix = TOPIC[: 1 + i % len(TOPIC)] if i % 10 == 0 else f"other-{i}-"
                wanted.append(binding(prefix, f"User:p-{i}", pattern=ResourcePatternType.PREFIXED))
            else:
                wanted.append(binding(f"topic-{i}", f"User:u-{i % 97}", AclOperation.READ))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, len(wanted), 500):
        for future in admin.create_acls(wanted[start : start + 500]).values():
            future.result(timeout=120)
    return len(wanted)


def decision_costs(name: str, zk_connect: str, n: int = 100_000) -> None:
    """In-process cost of one decision by an AclAuthorizer that loaded this cluster's
    ACLs from ZooKeeper: a memoized one (the same principal, host and topic again) and
    a fresh one (a new topic name each time: the ACLs are matched)."""
    from kazoo.client import KazooClient

    from broker.security.acl import AclOperation, ResourceType
    from broker.security.authorizer import AclAuthorizer

    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=10)
    authorizer = AclAuthorizer(allow_if_no_acl=True)
    authorizer.start(zk)
    write, topic = AclOperation.WRITE, ResourceType.TOPIC
    start = time.perf_counter()
    for _ in range(n):
        authorizer.authorize("User:ANONYMOUS", "127.0.0.1", write, topic, TOPIC)
    memo = (time.perf_counter() - start) / n
    names = [f"{TOPIC}-{i}" for i in range(n)]
    start = time.perf_counter()
    for t in names:
        authorizer.authorize("User:ANONYMOUS", "127.0.0.1", write, topic, t)
    fresh = (time.perf_counter() - start) / n
    zk.stop()
    zk.close()
    print(f"{name:5} one decision: memoized {memo * 1e6:.2f} us, fresh {fresh * 1e6:.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--acls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("wb", delete=False) as f:
        f.write((b"x" * 100 + b"\n") * args.records)
        path = f.name
    on = {"authorizer.class.name": "acl", "allow.everyone.if.no.acl.found": "true"}
    configs = {"off": ({}, None), "few": (on, 0), "many": (on, args.acls)}
    results: dict[tuple[str, str], list[float]] = {}
    acl_counts = {}
    try:
        with contextlib.ExitStack() as stack:
            clusters = {}
            for name, (overrides, many) in configs.items():
                cluster = stack.enter_context(local_cluster(1, overrides=overrides))
                acl_counts[name] = 0 if many is None else add_acls(cluster.bootstrap, many)
                create_topic(cluster.bootstrap, TOPIC, 6)
                clusters[name] = cluster
                if many is not None:
                    decision_costs(name, cluster.zk_connect)
            # the three brokers stay up together and take turns, so the machine's noise
            # falls on each alike; the first round warms connections and caches
            for round_no in range(args.rounds + 1):
                for shape, extra in SHAPES.items():
                    for name, cluster in clusters.items():
                        seconds = kcat_produce(cluster.bootstrap, path, extra)
                        if round_no:
                            results.setdefault((name, shape), []).append(args.records / seconds)
    finally:
        Path(path).unlink()
    rows = []
    for (name, shape), rates in results.items():
        rows.append({"authorizer": name, "acls": acl_counts[name], "shape": shape,
                     "median_records_per_s": round(statistics.median(rates)),
                     "runs": [round(r) for r in rates]})  # fmt: skip
        print(f"{name:5} acls={acl_counts[name]:6} {shape:15} median "
              f"{statistics.median(rates):10,.0f} records/s  runs {[round(r) for r in rates]}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
