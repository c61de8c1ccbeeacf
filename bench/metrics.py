"""What the broker metrics cost: a scrape at 10,000 partitions, and produce throughput
with metrics on and off, side by side in one run.

```sh
.venv/bin/python bench/metrics.py                          # 10,000 partitions, 3 rounds
.venv/bin/python bench/metrics.py --partitions 2000 --records 100000 --rounds 2
.venv/bin/python bench/metrics.py --skip counters --skip produce --before 9e96330
```

1. Counter cost: ``prometheus_client``'s labelled ``Counter.inc`` against the plain
   attribute increments the broker does per produced partition (``TopicStats``).
2. Scrape cost: one broker (metrics on) hosting ``--partitions`` partitions (topics of
   500); ``--scrapes`` scrapes, one a second: the scrape's wall time seen by the
   scraper, and the broker's CPU (utime+stime from /proc) over the scraping window
   minus an equally long idle window, per scrape and as a share of one core at a 1 s
   interval; with ``--before <commit>`` that commit's broker first, in the same run.
3. Produce throughput: two single-broker clusters started together, one with
   ``quill.metrics.port`` set (and scraped once a second during the runs), one
   without; ``--rounds`` alternating runs of ``--records`` 100-byte records each
   (bench/throughput.py's producer settings); the medians and their ratio, the
   on/off ratio of each round (the two runs of a round are back to back), and the
   broker's CPU time per record (utime+stime over each run), which the machine's other
   load disturbs less than throughput.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import timeit
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.acks_all import export_tree  # noqa: E402
from bench.localstack import local_cluster  # noqa: E402
from bench.throughput import create_topic, produce  # noqa: E402
from quill_stack import ports  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def scrape(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as resp:
        return len(resp.read())


def counter_cost() -> None:
    from prometheus_client import CollectorRegistry, Counter

    from broker.metrics.stats import BrokerTopicStats

    class Result:  # a ProduceResult's fields the stats read
        error, base_offset, last_offset = 0, 0, 9

    counter = Counter("bench_messages", "x", ["topic"], registry=CollectorRegistry())
    n = 200_000
    lib = timeit.timeit(lambda: counter.labels("t").inc(10), number=n) / n * 1e9
    stats = BrokerTopicStats()
    ours = timeit.timeit(lambda: stats.produced("t", Result, 1000), number=n) / n * 1e9
    print(f"counter cost per produced partition: prometheus_client labels().inc() {lib:.0f} ns")
    print(f"  (one counter of seven), BrokerTopicStats.produced {ours:.0f} ns (all seven)")


def scrape_cost(args) -> None:
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if args.before:
        trees.insert(0, (args.before, export_tree(args.before)))
    for label, src in trees:
        print(f"scrape cost, {label}:")
        scrape_cost_of(args, src)


def scrape_cost_of(args, src: Path | None) -> None:
    port = ports.free_port()
    overrides = {"quill.metrics.port": port, "num.partitions": 1}
    with local_cluster(1, overrides, src=src) as cluster:
        pid = cluster.brokers[1].pid
        started = time.monotonic()
        topics = args.partitions // 500
        for i in range(topics):
            create_topic(cluster.bootstrap, f"wide-{i}", min(500, args.partitions), 1)
        print(f"created {topics * 500:,} partitions in {time.monotonic() - started:.0f} s")
        size = scrape(port)
        time.sleep(5)  # let the broker settle after the creations
        idle0 = cpu_seconds(pid)
        time.sleep(args.scrapes)
        idle = cpu_seconds(pid) - idle0
        walls = []
        busy0 = cpu_seconds(pid)
        t0 = time.monotonic()
        for i in range(args.scrapes):
            start = time.perf_counter()
            size = scrape(port)
            walls.append(time.perf_counter() - start)
            time.sleep(max(0.0, t0 + i + 1 - time.monotonic()))
        busy = cpu_seconds(pid) - busy0
        per_scrape = max(0.0, busy - idle) / args.scrapes
        print(f"scrape at {topics * 500:,} partitions: {size / 1e6:.1f} MB of text")
        print(
            f"  wall per scrape: median {statistics.median(walls) * 1e3:.0f} ms, "
            f"max {max(walls) * 1e3:.0f} ms"
        )
        print(
            f"  broker CPU: {busy:.2f} s scraped vs {idle:.2f} s idle over {args.scrapes} s: "
            f"{per_scrape * 1e3:.0f} ms per scrape = {per_scrape * 100:.1f} % of a core at 1 s"
        )


class Scraper(threading.Thread):
    """Scrapes a broker once a second, as Prometheus or the console's monitor would."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.stop, self.count = port, threading.Event(), 0

    def run(self) -> None:
        while not self.stop.wait(1.0):
            scrape(self.port)
            self.count += 1


def throughput(args) -> None:
    port = ports.free_port()
    with (
        local_cluster(1, {"quill.metrics.port": port}) as on,
        local_cluster(1) as off,
    ):
        for c in (on, off):
            create_topic(c.bootstrap, "bench", 6, 1)
        scraper = Scraper(port)
        scraper.start()
        rates: dict[str, list[float]] = {"on": [], "off": []}
        cpu_us: dict[str, list[float]] = {"on": [], "off": []}  # broker CPU per record
        for r in range(args.rounds):
            for label, c in (
                (("off", off), ("on", on)) if r % 2 == 0 else (("on", on), ("off", off))
            ):
                cpu0 = cpu_seconds(c.brokers[1].pid)
                summary = produce(c.bootstrap, "bench", args)
                cpu = cpu_seconds(c.brokers[1].pid) - cpu0
                rates[label].append(summary["records_per_sec"])
                cpu_us[label].append(cpu / args.records * 1e6)
                print(
                    f"  round {r + 1} metrics {label}: {summary['records_per_sec']:,.0f} rec/s, "
                    f"broker CPU {cpu_us[label][-1]:.2f} us/record"
                )
        scraper.stop.set()
    pairs = sorted(a / b for a, b in zip(rates["on"], rates["off"], strict=True))
    cpu_pairs = sorted(b / a for a, b in zip(cpu_us["on"], cpu_us["off"], strict=True))
    on_med, off_med = statistics.median(rates["on"]), statistics.median(rates["off"])
    print(
        f"produce, median of {args.rounds}: metrics on {on_med:,.0f} rec/s "
        f"(scraped {scraper.count}x), off {off_med:,.0f} rec/s: {on_med / off_med:.3f}x"
    )
    print(
        f"  on/off throughput per round: median {statistics.median(pairs):.3f}x, "
        f"range {pairs[0]:.3f}-{pairs[-1]:.3f}x"
    )
    print(
        f"  broker CPU per record, off/on per round (1.0: no cost): median "
        f"{statistics.median(cpu_pairs):.3f}x, range {cpu_pairs[0]:.3f}-{cpu_pairs[-1]:.3f}x; "
        f"medians {statistics.median(cpu_us['on']):.2f} us on, "
        f"{statistics.median(cpu_us['off']):.2f} us off"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=10_000)
    p.add_argument("--scrapes", type=int, default=30)
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--skip", action="append", default=[], choices=["counters", "scrape", "produce"])
    p.add_argument("--before", help="a commit whose broker's scrape cost is measured first")
    args = p.parse_args(argv)
    args.latency_seconds = 0
    print(f"(a shared 2-core machine: {os.cpu_count()} CPUs; figures are noisy)")
    if "counters" not in args.skip:
        counter_cost()
    if "scrape" not in args.skip:
        scrape_cost(args)
    if "produce" not in args.skip:
        throughput(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
