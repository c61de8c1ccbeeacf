"""Python function calls per acknowledged record, by role (issue 24, fourth session).

    python bench/call_counts.py [--records 600] [--gap-ms 20] [--baseline REF] [--top 25]
    python bench/call_counts.py --rate 100 --seconds 20   # fixed rate instead

Three brokers (bench/localstack.py), topic ``small`` with 6 partitions, RF 3,
min.insync.replicas=2, and an acks=all linger.ms=0 producer: by default one record at a
time (each acknowledged before the next, partitions in turn, --gap-ms apart), else
bench/acks_all.py's fixed-rate producer at --rate.
Each broker runs bench/call_tracer.py (``sys.setprofile`` on the event loop's thread)
while the producer runs, then the calls of the three brokers are summed by role and
divided by the acknowledged records. A Python call is a frame entered (a coroutine
resumed counts again); a C call is a builtin or extension function called from Python.
Counting slows the brokers several-fold. At a fixed rate, how many records a follower
round carries then depends on how fast the (slowed) brokers turn around, which moves
the counts per record between runs; one at a time, every record is one Produce request
and its own replication rounds, the linger-0 path the issue is about, and the counts
repeat. The table's last rows count the events. Counts, not time:
they do not depend on the machine's load. ``--baseline REF`` counts REF's brokers first.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.acks_all import TOPIC_CONFIG, export_tree, fixed_rate  # noqa: E402
from bench.localstack import local_cluster  # noqa: E402
from bench.profile_roles import batching  # noqa: E402
from bench.throughput import create_topic  # noqa: E402

ROLES = (
    "leader produce",
    "leader serving fetch",
    "follower fetch round",
    "HW advance, DelayedProduce",
    "response encode+send",
    "request read+dispatch",
    "other",
)


def one_at_a_time(bootstrap: str, topic: str, records: int, gap_s: float, **props) -> dict:
    """``records`` records, each acknowledged before the next is sent, to partitions 0-5
    in turn, ``gap_s`` apart: every record takes the same path (one Produce request, the
    followers' rounds for it, their parked fetches), so its counts repeat run to run."""
    from confluent_kafka import Producer

    from bench.acks_all import warm_up

    producer = Producer({"bootstrap.servers": bootstrap, **props})
    warm_up(producer, topic)
    errors = []
    started = time.perf_counter()
    for i in range(records):
        producer.produce(
            topic, b"x" * 100, partition=i % 6, on_delivery=lambda e, _m: errors.append(e)
        )
        producer.flush(30)
        time.sleep(gap_s)
    elapsed = time.perf_counter() - started
    failed = sum(1 for e in errors if e is not None)
    return {"records": records, "errors": failed, "records_per_sec": records / elapsed}


def count(src: Path | None, seconds: float, rate: int, records: int, gap_s: float) -> dict:
    out_dir = tempfile.mkdtemp(prefix="quill-calls-")
    prelude = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); from bench import call_tracer; "
        f"call_tracer.install({out_dir!r})"
    )
    try:
        with local_cluster(3, src=src, prelude=prelude) as cluster:
            create_topic(cluster.bootstrap, "small", 6, 3, TOPIC_CONFIG)
            time.sleep(6.0)  # past the new topic's one-off work, as acks_all.py's SETTLE_S
            pids = [proc.pid for proc in cluster.brokers.values()]
            for pid in pids:
                os.kill(pid, signal.SIGUSR1)
            stats: list[dict] = []
            props = {
                "acks": "all",
                "linger.ms": "0",
                "statistics.interval.ms": 1000,
                "stats_cb": lambda text: stats.append(json.loads(text)),
            }
            if rate:
                run = fixed_rate(cluster.bootstrap, "small", rate, seconds, tuple(pids), **props)
            else:
                run = one_at_a_time(cluster.bootstrap, "small", records, gap_s, **props)
            for pid in pids:
                os.kill(pid, signal.SIGUSR2)
            files = [Path(out_dir) / f"{pid}.json" for pid in pids]
            deadline = time.time() + 60
            while not all(f.exists() for f in files) and time.time() < deadline:
                time.sleep(0.5)
            time.sleep(1.0)  # written whole
            calls: collections.Counter = collections.Counter()
            funcs: collections.Counter = collections.Counter()
            for f in files:
                data = json.loads(f.read_text())
                for role, kind, n in data["calls"]:
                    calls[role, kind] += n
                for role, name, n in data["funcs"]:
                    funcs[role, name] += n
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    records = run["records"] - run["errors"]
    return {
        "records": records,
        "per_request": batching(stats),
        "records_per_sec": run["records_per_sec"],
        "calls": {f"{r}|{k}": n / records for (r, k), n in calls.items()},
        "funcs": [(r, f, n / records) for (r, f), n in funcs.most_common()],
    }


#: one call per event: (label, the functions as call_tracer names them; a tree has one
#: of them on its path, the general or the short one)
EVENTS = (
    ("Produce requests", ("protocol/produce_response.py:encode_produce_response",)),
    (
        "Fetch responses at leaders",
        (
            "protocol/fetch_response.py:encode_fetch_response",
            "protocol/fetch_response.py:encode_follower_fetch_response",
        ),
    ),
    ("follower fetch rounds", ("replica/fetch_session_handler.py:FetchSessionHandler.build",)),
    ("reads (data_received)", ("server/network.py:Connection.data_received",)),
    ("loop turns (event loop iterations)", ("asyncio/base_events.py:BaseEventLoop._run_once",)),
)


def events(col: dict) -> dict[str, float]:
    """How often each EVENTS function ran, per acknowledged record."""
    by_func: collections.Counter = collections.Counter()
    for _role, func, n in col["funcs"]:
        by_func[func] += n
    return {label: sum(by_func[f] for f in funcs) for label, funcs in EVENTS}


def table(columns: dict[str, dict]) -> None:
    names = list(columns)
    print("| calls per acknowledged record (3 brokers) | " + " | ".join(names) + " |")
    print("| --- |" + " ---: |" * len(names))
    for role in ROLES:
        for kind, label in (("py", "Python"), ("c", "C")):
            cells = [columns[n]["calls"].get(f"{role}|{kind}", 0.0) for n in names]
            print(f"| {role}, {label} | " + " | ".join(f"{c:.0f}" for c in cells) + " |")
    for kind, label in (("py", "Python"), ("c", "C")):
        cells = [
            sum(v for k, v in columns[n]["calls"].items() if k.endswith("|" + kind)) for n in names
        ]
        print(f"| **all, {label}** | " + " | ".join(f"**{c:.0f}**" for c in cells) + " |")
    for label, _func in EVENTS:
        cells = [events(columns[n])[label] for n in names]
        print(f"| {label}, per record | " + " | ".join(f"{c:.2f}" for c in cells) + " |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument(
        "--rate", type=int, default=0, help="fixed-rate records/s (0: one at a time, the default)"
    )
    p.add_argument("--records", type=int, default=600, help="one at a time: how many")
    p.add_argument("--gap-ms", type=float, default=20.0, help="one at a time: pause after each")
    p.add_argument("--baseline", help="git ref whose brokers make the 'before' column")
    p.add_argument("--top", type=int, default=25, help="functions listed per column")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    columns: dict[str, dict] = {}
    if args.baseline:
        src = export_tree(args.baseline)
        try:
            columns[f"before ({args.baseline})"] = count(
                src, args.seconds, args.rate, args.records, args.gap_ms / 1000
            )
        finally:
            shutil.rmtree(src, ignore_errors=True)
    columns["after (this tree)" if args.baseline else "this tree"] = count(
        None, args.seconds, args.rate, args.records, args.gap_ms / 1000
    )
    for name, col in columns.items():
        print(
            f"{name}: {col['records']:,} records acknowledged "
            f"({col['records_per_sec']:,.0f}/s, {col['per_request']:.2f} per Produce request)"
        )
        for role, func, n in col["funcs"][: args.top]:
            print(f"  {n:7.2f}  {role:28s} {func}")
    table(columns)
    if args.json:
        Path(args.json).write_text(json.dumps(columns, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
