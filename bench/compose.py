"""The stack in containers: image sizes, `up` to healthy, and produce/consume through the
published ports next to a bare-metal cluster in the same run.

    python bench/compose.py [--records 200000] [--size 100] [--port-base 27100]

Builds the images first (scripts/compose.sh build; cached after the first time), runs the
stack as compose project `quillbench` on host ports from --port-base, times `up -d` until
every service is healthy, then with kcat (acks=all, a 3-partition RF 3 topic) produces and
consumes --records records of --size bytes through localhost:<published port>, and the
same against three brokers started on bare metal (bench/localstack.py). Deletes the
project's containers and volumes at the end. Needs root (or docker group) and kcat.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from localstack import ROOT, local_cluster

IMAGES = ["quill:latest", "quill-zookeeper:latest", "quill-redis:latest"]


def run(argv, env=None, timeout=3600) -> str:
    result = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        )
    return result.stdout


def kcat_round(bootstrap: str, topic: str, records: Path, count: int) -> tuple[float, float]:
    """(produce, consume) records/s through kcat."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(60)
    started = time.monotonic()
    run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "acks=all", "-l", str(records)])
    produce = count / (time.monotonic() - started)
    started = time.monotonic()
    out = run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q"])
    consume = count / (time.monotonic() - started)
    got = out.count("\n")
    if got != count:
        raise SystemExit(f"consumed {got} records, produced {count}")
    return produce, consume


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--port-base", type=int, default=27100)
    args = parser.parse_args()
    base = args.port_base
    env = {
        **os.environ,
        "COMPOSE_PROJECT_NAME": "quillbench",
        "QUILL_ZK_PORT": str(base),
        "QUILL_BROKER_1_PORT": str(base + 1),
        "QUILL_BROKER_2_PORT": str(base + 2),
        "QUILL_BROKER_3_PORT": str(base + 3),
        "QUILL_CONSOLE_PORT": str(base + 4),
    }
    run(["scripts/compose.sh", "build"], env)
    for image in IMAGES:
        size = json.loads(run(["docker", "image", "inspect", image]))[0]["Size"]
        print(f"image {image}: {size / 1e6:.0f} MB")
    records = Path(tempfile.mkdtemp(prefix="quill-bench-")) / "records.txt"
    line = "x" * (args.size - 1)
    records.write_text((line + "\n") * args.records)
    try:
        started = time.monotonic()
        run(["scripts/compose.sh", "up"], env)
        print(
            f"compose up (built images, fresh volumes) to healthy: {time.monotonic() - started:.1f} s"
        )
        bootstrap = ",".join(f"localhost:{base + i}" for i in (1, 2, 3))
        produce, consume = kcat_round(bootstrap, "bench-compose", records, args.records)
        print(
            f"containers, published ports: produce {produce:,.0f} records/s, consume {consume:,.0f} records/s"
        )
    finally:
        run(["docker-compose", "down", "-v"], env)
    with local_cluster(3) as cluster:
        produce, consume = kcat_round(cluster.bootstrap, "bench-bare", records, args.records)
        print(
            f"bare metal:                 produce {produce:,.0f} records/s, consume {consume:,.0f} records/s"
        )


if __name__ == "__main__":
    main()
