"""Consume throughput of one broker (issue 11): is it the broker or the client?

    python bench/consume.py [--records 2000000] [--partitions 6] [--rounds 2] [--json out]

One broker on this machine (bench/localstack.py), a topic of ``--partitions`` (RF 1)
filled by kcat with ``--records`` 100-byte records, then read from the beginning by:

- kcat (``-C -e -q -f '%o\\n'``, its output counted): librdkafka plus kcat's per-record
  formatting and a pipe;
- do-nothing C loops on librdkafka (bench/noop_consumer.c, built here with gcc against
  the system's librdkafka.so.1), both timed from the first record to the last and, as
  kcat is, from start to exit: "C callback" reads with the simple consumer's queue
  callback (the API kcat -C uses), "C poll" with the high-level consumer
  (rd_kafka_consumer_poll + rd_kafka_message_destroy per record), nothing else;
- confluent-kafka's consume() in batches of 10,000, nothing done per record (the Python
  loop a pipeline would start from).

If the C loop is far above kcat, kcat was the wall, not the broker. Each reader runs
``--rounds`` times, interleaved; every run is printed. Figures are printed, never
asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import kcat_produce  # noqa: E402
from bench.localstack import emit, local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402

TOPIC = "consume"
FETCH = ["-X", "fetch.max.bytes=52428800"]


def build_noop(workdir: Path) -> Path | None:
    """Compile bench/noop_consumer.c; None without gcc or librdkafka.so.1."""
    if shutil.which("gcc") is None:
        return None
    exe = workdir / "noop_consumer"
    built = subprocess.run(
        [
            "gcc",
            "-O2",
            "-o",
            str(exe),
            str(ROOT / "bench" / "noop_consumer.c"),
            "-l:librdkafka.so.1",
        ],
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        print(f"cannot build the C loop: {built.stderr.strip()}", file=sys.stderr)
        return None
    return exe


def kcat_consume(bootstrap: str, partitions: int) -> dict:
    start = time.perf_counter()
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-q"]
        + ["-f", "%o\\n", *FETCH],
        check=True,
        capture_output=True,
    ).stdout
    seconds = time.perf_counter() - start
    return {"records": out.count(b"\n"), "seconds": seconds}


def noop_consume(exe: Path, mode: str, bootstrap: str, partitions: int, records: int) -> dict:
    start = time.perf_counter()
    out = subprocess.run(
        [str(exe), mode, bootstrap, TOPIC, str(partitions), str(records)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    wall = time.perf_counter() - start
    return {"records": int(out[0]), "seconds": float(out[1]), "wall_seconds": wall}


def python_consume(bootstrap: str, partitions: int, records: int) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "py-noop", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    first = None
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        batch = consumer.consume(num_messages=10_000, timeout=0.5)
        if batch and first is None:
            first = time.perf_counter()
        got += len(batch)
    seconds = time.perf_counter() - (first or time.perf_counter())
    consumer.close()
    return {"records": got, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    results: dict = {"records": args.records, "partitions": args.partitions, "runs": []}
    with tempfile.TemporaryDirectory() as tmp, local_cluster(1) as cluster:
        exe = build_noop(Path(tmp))
        bs = cluster.bootstrap
        create_topic(bs, TOPIC, args.partitions, 1)
        results["produce_per_sec"] = kcat_produce(bs, TOPIC, args.records, 100, "1")
        readers = [("kcat", lambda: kcat_consume(bs, args.partitions))]
        for mode in ("callback", "poll") if exe is not None else ():
            readers.append(
                (f"C {mode}", partial(noop_consume, exe, mode, bs, args.partitions, args.records))
            )
        readers.append(
            ("confluent-kafka", lambda: python_consume(bs, args.partitions, args.records))
        )
        for _ in range(args.rounds):
            for name, read in readers:
                run = read()
                run["reader"] = name
                run["records_per_sec"] = run["records"] / run["seconds"] if run["seconds"] else 0
                if "wall_seconds" in run:
                    run["records_per_wall_sec"] = run["records"] / run["wall_seconds"]
                results["runs"].append(run)
                print(f"{name}: {run}", file=sys.stderr)
    return emit(results, args.json)


if __name__ == "__main__":
    sys.exit(main())
