"""Rebalance proposal benchmark: how long the goal-based proposer takes and how even
its result is.

    python bench/rebalance_proposal.py [--partitions 10000] [--rf 3] [--brokers 6]
                                       [--racks 3] [--seed 1] [--json out.json]

No cluster: the proposer is pure (operations/planner). The starting assignment is the
worst everyday case, brokers added to a full cluster: every partition's replicas on the
first brokers - 2 (racks honoured), partition sizes random between 1 MB and 100 MB. The
proposal then balances onto all brokers. Prints the time (best of 3) and the balance
before and after: max/min replicas, leaders and bytes per broker. Figures are printed,
never asserted; docs/benchmarks.md has them.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from operations.planner import describe, propose  # noqa: E402


def starting_point(partitions: int, rf: int, brokers: int, racks: int, seed: int):
    rng = random.Random(seed)
    rack_of = {b: f"rack-{(b - 1) % racks}" for b in range(1, brokers + 1)}
    old = list(range(1, brokers - 1))  # the two last brokers are the new ones
    assignment, sizes = {}, {}
    for i in range(partitions):
        part = (f"topic-{i % 50}", i // 50)
        start = rng.randrange(len(old))
        replicas = []
        for k in range(len(old)):
            b = old[(start + k) % len(old)]
            if rack_of[b] not in {rack_of[x] for x in replicas}:
                replicas.append(b)
            if len(replicas) == rf:
                break
        assignment[part] = replicas
        sizes[part] = rng.randrange(1 << 20, 100 << 20)
    return assignment, rack_of, sizes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=6)
    ap.add_argument("--racks", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    assignment, racks, sizes = starting_point(
        args.partitions, args.rf, args.brokers, args.racks, args.seed
    )
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        target = propose(assignment, racks, sizes)
        proposal = describe(assignment, target, sizes, racks)
        times.append(time.perf_counter() - t0)
    report = proposal.as_dict()
    figures = {
        "partitions": args.partitions,
        "rf": args.rf,
        "brokers": args.brokers,
        "racks": args.racks,
        "seconds_best_of_3": round(min(times), 3),
        "partitions_to_move": report["partitions_to_move"],
        "gb_to_move": round(report["bytes_to_move"] / 1e9, 1),
        "balance": report["balance"],
    }
    print(
        f"proposal: {figures['seconds_best_of_3']} s (best of 3) for {args.partitions} "
        f"partitions x RF {args.rf} on {args.brokers} brokers, {args.racks} racks"
    )
    print(f"moves: {figures['partitions_to_move']} partitions, {figures['gb_to_move']} GB")
    for what in ("replicas", "leaders", "bytes"):
        b, a = report["balance"][f"{what}_before"], report["balance"][f"{what}_after"]
        print(
            f"{what:>8} per broker: before max {b['max']} min {b['min']}, "
            f"after max {a['max']} min {a['min']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
