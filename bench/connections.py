"""Connections and partitions at scale, one broker on this machine.

    python bench/connections.py [--connections 1000] [--records 200000]
                                [--partitions 10000] [--json out.json]

- memory per idle connection: the broker's RSS before and after opening
  ``--connections`` connections that each made one ApiVersions round trip;
- produce and consume records/s through kcat (librdkafka), 100-byte values, 6
  partitions, with the ``--connections`` held open and with none, alternating for
  ``--rounds`` rounds (best of each);
- ``--partitions``: a topic with that many partitions (one record each) next to the
  held connections (about one record each), then ``kill -9`` and a restart, once per
  ``--recovery-threads`` value (num.recovery.threads.per.data.dir): the broker's own
  start-up time (log recovery after an unclean shutdown) and the time to healthy;
  then the throughput again with the connections held and all those partitions.

Figures are printed, never asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import emit, local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402

API_VERSIONS_V0 = struct.pack(">ihhih", 10 + 7, 18, 0, 1, 7) + b"connbch"


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def open_connections(host: str, port: int, count: int) -> list[socket.socket]:
    held = []
    for _ in range(count):
        # generous: a broker just restarted with 10,000 partitions is busy for a while
        s = socket.create_connection((host, port), timeout=600)
        s.sendall(API_VERSIONS_V0)
        size = struct.unpack(">i", _read(s, 4))[0]
        _read(s, size)
        held.append(s)
    return held


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def kcat_produce(bootstrap: str, topic: str, records: int, size: int = 100) -> float:
    with tempfile.NamedTemporaryFile("wb", delete=False) as f:
        f.write((b"x" * size + b"\n") * records)
        path = f.name
    start = time.perf_counter()
    subprocess.run(
        ["kcat", "-P", "-b", bootstrap, "-t", topic, "-l", path, "-X", "linger.ms=10"],
        check=True,
        capture_output=True,
    )
    elapsed = time.perf_counter() - start
    Path(path).unlink()
    return records / elapsed


def kcat_consume(bootstrap: str, topic: str, records: int) -> float:
    start = time.perf_counter()
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q"],
        check=True,
        capture_output=True,
    ).stdout
    elapsed = time.perf_counter() - start
    got = out.count(b"\n")
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    return got / elapsed


def throughput(bootstrap: str, label: str, records: int) -> dict:
    topic = f"conn-bench-{label}"
    create_topic(bootstrap, topic, 6)
    produce = kcat_produce(bootstrap, topic, records)
    consume = kcat_consume(bootstrap, topic, records)
    print(f"{label}: produce {produce:,.0f} records/s, consume {consume:,.0f}", file=sys.stderr)
    return {"produce_records_per_s": round(produce), "consume_records_per_s": round(consume)}


def many_partitions(cluster, partitions: int, recovery_threads: list[int]) -> dict:
    """``partitions`` partitions (topics of 1,000, about one record each by key), then
    a kill -9 and restart per ``recovery_threads`` value."""
    bootstrap = cluster.bootstrap
    started = time.perf_counter()
    chunk = 1000  # topics of 1,000 partitions: one CreateTopics stays within its timeout
    for first in range(0, partitions, chunk):
        count = min(chunk, partitions - first)
        topic = f"wide-{first // chunk}"
        create_topic(bootstrap, topic, count)
        lines = "".join(f"{p}:x\n" for p in range(count))
        subprocess.run(
            ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", ":", "-l", "/dev/stdin"],
            input=lines.encode(),
            check=True,
            capture_output=True,
        )
    results = {"partitions": partitions, "create_s": round(time.perf_counter() - started, 1)}
    for threads in recovery_threads:
        results[f"recovery_threads_{threads}"] = kill_and_restart(cluster.brokers[1], threads)
        settled = time.perf_counter()
        wait_leaders(bootstrap, partitions)
        results[f"recovery_threads_{threads}"]["healthy_to_all_led_s"] = round(
            time.perf_counter() - settled, 1
        )
    return results


def wait_leaders(bootstrap: str, partitions: int) -> None:
    """Until Metadata shows a leader for each of the ``partitions`` (the broker
    applies the controller's LeaderAndIsr for all of them after a restart)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.perf_counter() + 1200
    while time.perf_counter() < deadline:
        try:
            topics = admin.list_topics(timeout=120).topics
        except Exception:  # noqa: BLE001 - busy broker: ask again
            continue
        led = sum(
            1
            for name, meta in topics.items()
            if name.startswith("wide-")
            for part in meta.partitions.values()
            if part.leader >= 0
        )
        if led >= partitions:
            return
        time.sleep(1)
    raise RuntimeError("partitions still without a leader after 1,200 s")


def kill_and_restart(proc, recovery_threads: int) -> dict:
    """kill -9, then start with num.recovery.threads.per.data.dir=``recovery_threads``:
    the broker's own "started in" figure (log loading and recovery included) and the
    time to healthy."""
    proc.kill()
    proc.spec.env["QUILL_NUM_RECOVERY_THREADS_PER_DATA_DIR"] = str(recovery_threads)
    before = proc.spec.log_path.stat().st_size
    restart = time.perf_counter()
    proc.start()
    # the old registration lingers until its ZooKeeper session expires, so healthy
    # alone could be the dead broker's: wait for this start's own "started" line
    started = re.compile(r"started in ([\d.]+)s \(cluster id \S+, (\d+) partition logs\)")
    deadline = time.perf_counter() + 900
    while (
        m := started.search(proc.spec.log_path.read_bytes()[before:].decode("ascii", "replace"))
    ) is None:
        if time.perf_counter() > deadline:
            raise RuntimeError("the broker did not start within 900 s")
        time.sleep(0.2)
    proc.wait_healthy(900)
    healthy_s = time.perf_counter() - restart
    figures = {
        "start_after_kill9_s": float(m.group(1)) if m else None,
        "partition_logs": int(m.group(2)) if m else None,
        "restart_to_healthy_s": round(healthy_s, 1),
    }
    print(f"restart, {recovery_threads} recovery thread(s): {figures}", file=sys.stderr)
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--rounds", type=int, default=3, help="best of this many, alternating")
    p.add_argument("--partitions", type=int, default=0, help="0: skip the partitions part")
    p.add_argument(
        "--recovery-threads",
        type=int,
        nargs="+",
        default=[1, 8],
        help="num.recovery.threads.per.data.dir of each kill -9 and restart",
    )
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    results: dict = {"connections": args.connections, "records": args.records}
    with local_cluster(1, {"max.connections": str(args.connections + 200)}) as cluster:
        host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
        pid = cluster.brokers[1].pid
        throughput(cluster.bootstrap, "warm-up", args.records)  # first topic, JIT of caches
        base = rss_bytes(pid)
        held = open_connections(host, int(port), args.connections)
        time.sleep(1.0)
        grown = rss_bytes(pid) - base
        results["rss_before_mb"] = round(base / 2**20, 1)
        results["bytes_per_idle_connection"] = round(grown / args.connections)
        print(
            f"{args.connections} idle connections: RSS {base / 2**20:.1f} MB -> "
            f"{(base + grown) / 2**20:.1f} MB, {grown / args.connections:,.0f} bytes each",
            file=sys.stderr,
        )
        rounds: dict[str, list] = {"without_connections": [], "with_connections": []}
        for i in range(args.rounds):  # alternate, so both see the same machine load
            rounds["with_connections"].append(
                throughput(cluster.bootstrap, f"held{i}", args.records)
            )
            for s in held:
                s.close()
            rounds["without_connections"].append(
                throughput(cluster.bootstrap, f"alone{i}", args.records)
            )
            held = open_connections(host, int(port), args.connections)
        for name, runs in rounds.items():
            results[name] = {key: max(r[key] for r in runs) for key in runs[0]}
        if args.partitions:
            results["many_partitions"] = many_partitions(
                cluster, args.partitions, args.recovery_threads
            )
            print(f"partitions: {results['many_partitions']}", file=sys.stderr)
            for s in held:
                s.close()
            held = open_connections(host, int(port), args.connections)
            results["with_connections_and_partitions"] = throughput(
                cluster.bootstrap, "held-wide", args.records
            )
        for s in held:
            s.close()
    return emit(results, args.json)


if __name__ == "__main__":
    sys.exit(main())
