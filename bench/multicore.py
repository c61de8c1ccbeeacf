"""Does a second broker process on the same machine use a second core? (issue 11)

    python bench/multicore.py [--requests 200000] [--producers 4] [--rounds 2] [--json out]

A broker is one Python process: one event loop, one core. The deployment that uses
more cores today is more broker processes per machine (each with ``broker.rack`` set
to the machine, so rack-aware placement keeps a partition's replicas on different
machines). This measures what that buys on this machine: 1-record produce requests
(acks=1, linger.ms=0, batch.num.messages=1, kcat, so the client is C and cheap) from
``--producers`` kcat processes at once, each sending ``--requests`` records, to a
topic of 4 partitions (RF 1) held by one broker, then by two (two partitions each).
Printed per round: acknowledged requests/s in all and each broker's CPU (utime+stime
from /proc, as a share of one core). Figures are printed, never asserted. See
docs/benchmarks.md and docs/multicore.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import machine_cpu  # noqa: E402
from bench.localstack import emit, local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402

PARTITIONS = 4


def one_record_requests(bootstrap: str, topic: str, path: str, producers: int) -> float:
    """Start ``producers`` kcat processes on ``path`` at once; seconds until all exit."""
    cmd = [
        "kcat", "-P", "-b", bootstrap, "-t", topic, "-l", path,
        "-X", "acks=1", "-X", "linger.ms=0", "-X", "batch.num.messages=1",
        "-X", "queue.buffering.max.messages=100000",
    ]  # fmt: skip
    started = time.perf_counter()
    procs = [subprocess.Popen(cmd, stderr=subprocess.DEVNULL) for _ in range(producers)]
    for proc in procs:
        if proc.wait() != 0:
            raise RuntimeError(f"kcat exited with {proc.returncode}")
    return time.perf_counter() - started


def run(brokers: int, path: str, args) -> list[dict]:
    rows = []
    with local_cluster(brokers) as cluster:
        pids = [proc.pid for proc in cluster.brokers.values()]
        for rnd in range(args.rounds):
            topic = f"req-{rnd}"
            create_topic(cluster.bootstrap, topic, PARTITIONS, 1)
            time.sleep(1)
            before = machine_cpu.snapshot()
            seconds = one_record_requests(cluster.bootstrap, topic, path, args.producers)
            after = machine_cpu.snapshot()
            cpu = [machine_cpu.used_seconds(before, after, pid) / seconds for pid in pids]
            row = {
                "brokers": brokers,
                "round": rnd + 1,
                "requests_per_sec": args.requests * args.producers / seconds,
                "broker_cpu_share": [round(c, 2) for c in cpu],
            }
            print(row, file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=200_000, help="records per kcat process")
    p.add_argument("--producers", type=int, default=4, help="kcat processes at once")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write((b"x" * 100 + b"\n") * args.requests)
    try:
        rows = run(1, f.name, args) + run(2, f.name, args)
    finally:
        os.unlink(f.name)
    return emit({"rows": rows}, args.json)


if __name__ == "__main__":
    sys.exit(main())
