"""Where a replicated record's broker CPU goes, by role (issue 24: per record, not per function).

    python bench/profile_roles.py [--seconds 20] [--rate 10000] [--py-spy-rate 100]

Three brokers (bench/localstack.py), topic ``small`` with 6 partitions, RF 3,
min.insync.replicas=2 (each broker leads 2), and bench/acks_all.py's fixed-rate
acks=all linger.ms=0 producer at ``--rate`` records/s for ``--seconds``. Meanwhile
``py-spy record --format raw --nonblocking`` samples every broker. Each broker's CPU
(utime + stime from /proc over the run) is split by the share of its samples in each
role and divided by the acknowledged records: µs of CPU per record, per broker, per
role, summing to the total. Roles, by the frames of a sample's stack (first match):

- leader produce handling: under ``handle_produce`` (server/handlers/produce.py);
- leader serving fetches: under ``handle_fetch`` (server/handlers/fetch.py): the
  followers' fetches (no consumer runs here);
- follower fetch rounds: frames of replica/fetcher.py or the inter-broker client
  (broker/client/connection.py);
- request dispatch: server/apis.py outside a handler (parse, quota, encode);
- network layer: server/network.py outside the above (framing, ordering, writes);
- event loop: no broker frame but the entry point's, split into samples inside the
  selector's ``select()`` (epoll: the syscall, and waking up) and the rest (the loop
  running callbacks and task steps, transports reading and writing);
- other: anything else (timers, ISR checks, metrics), its first broker frame named.

Figures are printed, never asserted. See docs/benchmarks.md, issue 24.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import machine_cpu  # noqa: E402
from bench.acks_all import TOPIC_CONFIG, fixed_rate  # noqa: E402
from bench.localstack import local_cluster  # noqa: E402
from bench.throughput import create_topic  # noqa: E402

PY_SPY = Path(sys.executable).with_name("py-spy")
ROLES = (
    "leader produce handling",
    "leader serving fetches",
    "follower fetch rounds",
    "request dispatch",
    "network layer",
    "event loop: in select()",
    "event loop: callbacks, tasks",
    "other",
)
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
_ENTRY_FILES = ("broker/__main__.py", "server/main.py")  # under every stack of the broker
_LOOP_FILES = ("asyncio/", "uvloop", "selectors.py", "runpy.py", "threading.py")


def frames(stack: str) -> list[tuple[str, str]]:
    """(function, file) of each frame of one py-spy raw stack, outermost first."""
    out = []
    for part in stack.split(";"):
        m = _FRAME.match(part.strip())
        if m:
            out.append((m["func"], m["file"]))
    return out


def role_of(stack: list[tuple[str, str]]) -> tuple[str, str]:
    """The role of one sample and, for 'other', the first broker frame in it."""
    funcs = {f for f, _ in stack}
    files = [path for _, path in stack]
    if "handle_produce" in funcs:
        return "leader produce handling", ""
    if "handle_fetch" in funcs:
        return "leader serving fetches", ""
    if any(p.endswith(("replica/fetcher.py", "client/connection.py")) for p in files):
        return "follower fetch rounds", ""
    if any(p.endswith("server/apis.py") for p in files):
        return "request dispatch", ""
    if any(p.endswith("server/network.py") for p in files):
        return "network layer", ""
    ours = [(f, p) for f, p in stack if "broker/" in p and not p.endswith(_ENTRY_FILES)]
    if not ours and stack and stack[-1][0].endswith("Selector.select"):
        return "event loop: in select()", ""
    loop = [p for p in files if not p.endswith(_ENTRY_FILES)]
    if not ours and all(any(x in p for x in _LOOP_FILES) or "<" in p for p in loop):
        return "event loop: callbacks, tasks", ""
    first = ours[0] if ours else stack[-1] if stack else ("?", "?")
    return "other", f"{first[0]} ({first[1].split('broker/')[-1]})"


def parse_raw(text: str) -> tuple[collections.Counter, collections.Counter]:
    """Samples per role, and per first frame of the 'other' ones, from py-spy raw output."""
    roles: collections.Counter = collections.Counter()
    others: collections.Counter = collections.Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        role, where = role_of(frames(stack))
        roles[role] += int(count)
        if where:
            others[where] += int(count)
    return roles, others


def profile(cluster, seconds: float, rate: int, spy_rate: int, out_dir: Path) -> dict:
    pids = {bid: proc.pid for bid, proc in cluster.brokers.items()}
    spies = {
        bid: subprocess.Popen(
            [str(PY_SPY), "record", "--format", "raw", "--nonblocking", "--rate", str(spy_rate)]
            + ["--duration", str(int(seconds + 60)), "--pid", str(pid)]
            + ["-o", str(out_dir / f"broker-{bid}.txt")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for bid, pid in pids.items()
    }
    time.sleep(0.5)  # py-spy attached before the first record
    before = machine_cpu.snapshot()
    stats: list[dict] = []  # librdkafka's statistics: records per Produce request
    props = {
        "acks": "all",
        "linger.ms": "0",
        "statistics.interval.ms": 1000,
        "stats_cb": lambda text: stats.append(json.loads(text)),
    }
    run = fixed_rate(cluster.bootstrap, "small", rate, seconds, tuple(pids.values()), **props)
    after = machine_cpu.snapshot()
    for spy in spies.values():  # stop sampling with the run: py-spy writes its file on SIGINT
        spy.send_signal(signal.SIGINT)
    for spy in spies.values():
        spy.wait(60)
    records = run["records"] - run["errors"]
    per_broker = {}
    for bid, pid in pids.items():
        roles, others = parse_raw((out_dir / f"broker-{bid}.txt").read_text())
        total = sum(roles.values()) or 1
        us = machine_cpu.used_seconds(before, after, pid) / records * 1e6
        per_broker[bid] = {
            "us_per_record": us,
            "roles": {r: us * roles[r] / total for r in ROLES},
            "samples": total,
            "others": others.most_common(5),
        }
    return {"records": records, "run": run, "brokers": per_broker, "batching": batching(stats)}


def batching(stats: list[dict]) -> float:
    """Records per Produce request over the run, from the first and last statistics."""
    if len(stats) < 2:
        return float("nan")

    def counts(s: dict) -> tuple[int, int]:
        requests = sum(b.get("req", {}).get("Produce", 0) for b in s["brokers"].values())
        records = sum(p["txmsgs"] for t in s["topics"].values() for p in t["partitions"].values())
        return requests, records

    (req0, rec0), (req1, rec1) = counts(stats[0]), counts(stats[-1])
    return (rec1 - rec0) / max(req1 - req0, 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rate", type=int, default=10_000)
    p.add_argument("--py-spy-rate", type=int, default=100, help="samples/s per broker")
    p.add_argument("--raw-dir", help="keep py-spy's raw stacks here (default: a temp dir)")
    args = p.parse_args(argv)
    with local_cluster(3) as cluster, tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(args.raw_dir or tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        create_topic(cluster.bootstrap, "small", 6, 3, TOPIC_CONFIG)
        from confluent_kafka.admin import AdminClient

        meta = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("small")
        leads = collections.Counter(p.leader for p in meta.topics["small"].partitions.values())
        time.sleep(6.0)  # past the new topic's one-off work, as acks_all.py's SETTLE_S
        result = profile(cluster, args.seconds, args.rate, args.py_spy_rate, out_dir)
    brokers = result["brokers"]
    run = result["run"]
    print(
        f"{machine_cpu.cpu_model()}; acks=all linger.ms=0 @{args.rate}/s for {args.seconds:g} s: "
        f"{result['records']:,} records acknowledged ({run['records_per_sec']:,.0f}/s, "
        f"p99 {run['p99_ms']:.1f} ms, {result['batching']:.2f} records per Produce request); "
        f"machine meanwhile: {machine_cpu.describe(run['cpu'])}"
    )
    head = " | ".join(f"broker {b} (leads {leads[b]})" for b in brokers)
    print(f"| µs CPU per acknowledged record | {head} | all three |")
    print("| --- |" + " --- |" * (len(brokers) + 1))
    for role in ROLES:
        cells = [brokers[b]["roles"][role] for b in brokers]
        print(f"| {role} | " + " | ".join(f"{c:.1f}" for c in cells) + f" | {sum(cells):.1f} |")
    cells = [brokers[b]["us_per_record"] for b in brokers]
    print(
        "| **total** | " + " | ".join(f"**{c:.1f}**" for c in cells) + f" | **{sum(cells):.1f}** |"
    )
    print("samples per broker: " + ", ".join(f"{b}: {brokers[b]['samples']}" for b in brokers))
    for b in brokers:
        if brokers[b]["others"]:
            print(
                f"broker {b} 'other', top frames: "
                + "; ".join(f"{w} {n}" for w, n in brokers[b]["others"])
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
