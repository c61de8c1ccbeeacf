"""Restarts at scale (issue 27): one broker of three restarted under many partitions.

    python bench/restart_scale.py --partitions 1000 [--src OTHER_TREE] [--json out.json]

Starts ZooKeeper and 3 brokers, creates ``--partitions`` partitions (RF 3, topics of
at most 500 partitions), waits until every ISR is full, then restarts one broker that
is not the controller (SIGTERM, wait for exit, start). Reported:

- sigterm_to_exit_s (with the stopping broker's controlled-shutdown log lines), the
  restarted broker's start (its "Loaded N logs" and "started in" lines), and
  full_isr_s: from the start of the restart until every partition state znode shows
  its full ISR again, and metadata_full_isr_s: until a broker's metadata (what
  clients see) shows it too;
- controller_cpu_s: CPU seconds of the controller's process over that window;
- zk_ops: requests ZooKeeper received over the window (``mntr`` zk_packets_received);
- create_topics_s: latencies of CreateTopics (1 partition, RF 2, 30 s operation
  timeout) sent every 3 s meanwhile, with their errors;
- the CPU model.

``--src`` runs the brokers from another source tree (a before/after comparison);
``--settle`` waits before the restart until the metadata shows every ISR full too (the
controller done with the creation); ``--py-spy FILE`` samples the controller over the
restart (py-spy's raw format).
Figures are printed, never asserted. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import machine_cpu  # noqa: E402
from bench.localstack import emit, local_cluster  # noqa: E402
from broker.zk.znodes import ControllerZNode, TopicPartitionStateZNode  # noqa: E402

TOPIC_SIZE = 500


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def zk_packets(zk_connect: str) -> int:
    host, port = zk_connect.split("/", 1)[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"mntr")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    for line in data.decode().splitlines():
        if line.startswith("zk_packets_received"):
            return int(line.split()[1])
    raise RuntimeError("no zk_packets_received in mntr")


def states(zk, topics: dict[str, int]) -> dict[tuple[str, int], dict]:
    pending = [
        ((t, p), zk.get_async(TopicPartitionStateZNode.path(t, p)))
        for t, n in topics.items()
        for p in range(n)
    ]
    out = {}
    for key, result in pending:
        try:
            out[key] = json.loads(result.get()[0])
        except Exception:  # noqa: BLE001 - not created yet
            continue
    return out


def all_full(zk, topics: dict[str, int], rf: int) -> bool:
    found = states(zk, topics)
    total = sum(topics.values())
    return len(found) == total and all(len(s["isr"]) == rf for s in found.values())


def metadata_full(admin, topics: dict[str, int], rf: int) -> bool:
    meta = admin.list_topics(timeout=30).topics
    for name, n in topics.items():
        t = meta.get(name)
        if t is None or len(t.partitions) != n:
            return False
        if any(len(p.isrs) != rf or p.leader < 0 for p in t.partitions.values()):
            return False
    return True


def wait(cond, limit_s: float, step_s: float = 0.5) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if cond():
            return time.monotonic() - start
        time.sleep(step_s)
    return None


def create_probe(stop: threading.Event, bootstrap: str, out: list) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300000})
    i = 0
    while not stop.is_set():
        name = f"probe-{i}"
        i += 1
        start = time.monotonic()
        try:
            fut = admin.create_topics(
                [NewTopic(name, 1, 2)], operation_timeout=30, request_timeout=300
            )[name]
            fut.result(timeout=300)
            out.append({"s": round(time.monotonic() - start, 2), "error": None})
        except Exception as exc:  # noqa: BLE001 - reported
            out.append({"s": round(time.monotonic() - start, 2), "error": str(exc)[:120]})
        stop.wait(3)


def profile_start(pid: int, out: str | None):
    """py-spy on the controller over the restart window (collapsed stacks: --format raw)."""
    if not out:
        return None
    spy = Path(sys.executable).parent / "py-spy"
    argv = [str(spy), "record", "--pid", str(pid), "--format", "raw", "--output", out]
    return subprocess.Popen([*argv, "--nonblocking", "--rate", "50"], stdout=subprocess.DEVNULL)


def profile_stop(spy) -> None:
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


def run(args) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kazoo.client import KazooClient

    overrides = {"zookeeper.session.timeout.ms": 18000}
    src = Path(args.src).resolve() if args.src else None
    with local_cluster(3, overrides=overrides, src=src) as cluster:
        zk = KazooClient(hosts=cluster.zk_connect, timeout=30)
        zk.start(timeout=30)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topics = {}
        left, i = args.partitions, 0
        while left > 0:
            topics[f"scale-{i}"] = min(TOPIC_SIZE, left)
            left -= topics[f"scale-{i}"]
            i += 1
        started = time.monotonic()
        for name, n in topics.items():
            admin.create_topics([NewTopic(name, n, 3)], request_timeout=600)[name].result(600)
        setup_s = wait(lambda: all_full(zk, topics, 3), args.limit)
        if setup_s is None:
            raise RuntimeError("ISRs not full after creating the topics")
        if args.settle and wait(lambda: metadata_full(admin, topics, 3), args.limit, 2.0) is None:
            raise RuntimeError("metadata never showed every ISR full after creating the topics")
        time.sleep(5)
        controller = json.loads(zk.get(ControllerZNode.path)[0])["brokerid"]
        victim = max(b for b in cluster.brokers if b != controller)
        cpid = cluster.brokers[controller].pid
        before = machine_cpu.snapshot()
        zk_before = zk_packets(cluster.zk_connect)
        probes: list = []
        stop = threading.Event()
        prober = threading.Thread(
            target=create_probe, args=(stop, cluster.bootstrap, probes), daemon=True
        )
        spy = profile_start(cpid, args.py_spy)
        t0 = time.monotonic()
        prober.start()
        proc = cluster.brokers[victim]
        proc.stop(timeout=300)
        sigterm_s = time.monotonic() - t0
        said = Path(proc.spec.log_path).read_text().splitlines()
        shutdown_log = [line[:200] for line in said if "controlled shutdown" in line][-4:]
        proc.start()
        proc.wait_healthy(args.limit)
        since = Path(proc.spec.log_path).read_text().splitlines()[len(said) :]
        start_log = [line[:200] for line in since if "started in" in line or "Loaded " in line]
        full = wait(lambda: all_full(zk, topics, 3), args.limit, 1.0)
        full_s = time.monotonic() - t0 if full is not None else None
        meta = wait(lambda: metadata_full(admin, topics, 3), args.limit, 1.0)
        meta_s = time.monotonic() - t0 if meta is not None else None
        after = machine_cpu.snapshot()
        zk_after = zk_packets(cluster.zk_connect)
        profile_stop(spy)
        stop.set()
        prober.join(330)
        zk.stop()
        return {
            "partitions": args.partitions,
            "topics": len(topics),
            "src": str(src or ROOT),
            "cpu_model": cpu_model(),
            "setup_s": round(time.monotonic() - started, 1),
            "controller": controller,
            "restarted": victim,
            "sigterm_to_exit_s": round(sigterm_s, 2),
            "shutdown_log": shutdown_log,
            "start_log": start_log,
            "full_isr_s": round(full_s, 1) if full_s else None,
            "metadata_full_isr_s": round(meta_s, 1) if meta_s else None,
            "controller_cpu_s": round(machine_cpu.used_seconds(before, after, cpid), 1),
            "zk_ops": zk_after - zk_before,
            "create_topics": probes,
            "create_topics_max_s": max((p["s"] for p in probes), default=None),
            "create_topics_errors": sum(1 for p in probes if p["error"]),
        }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--src", help="run the brokers from this source tree")
    p.add_argument("--limit", type=float, default=900.0, help="seconds to wait for full ISRs")
    p.add_argument("--py-spy", help="write py-spy's collapsed stacks of the controller here")
    p.add_argument(
        "--settle",
        action="store_true",
        help="before the restart, wait until the metadata (the controller) shows every ISR full",
    )
    p.add_argument("--json")
    args = p.parse_args(argv)
    return emit(run(args), args.json)


if __name__ == "__main__":
    sys.exit(main())
