"""Faults across hosts, a soak (issue 27): many short runs of faults/ with the checker.

    python bench/faults.py --runs 100 [--seed 1] [--zk 3] [--faults kill-leader,...]
                           [--max-faults 2] [--state /tmp/quill-faults]

Each run starts a fresh cluster (three brokers and --zk ZooKeeper servers, each in its
own network namespace), runs the workload (an idempotent acks=all producer, a
transactional producer with a read_committed check, a consumer group whose members come
and go) through one to --max-faults faults picked at random (a mix when more than one),
then checks: acknowledged records lost or duplicated, reads of aborted transactions,
committed offsets moving backwards, replicas' logs diverging. It prints one line per run
and at the end a table: runs, faults of each kind, records, lost, duplicated, aborted
reads, and per fault kind the seconds it left a partition unwritable (the longest stretch
without an acknowledged write from the fault until recovery), against the target
zookeeper.session.timeout.ms + 2 s. Needs root (namespaces, iptables, tc). A failing
run keeps its state dir (logs and histories) and prints its seed.
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from faults import netns  # noqa: E402
from faults.nemesis import FAULTS  # noqa: E402
from faults.run import run_once  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=100, help="runs to make (default 100)")
    parser.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the first run; run N uses seed+N-1, so a failing run is re-made "
        "alone with --runs 1 --seed S (default 1)",
    )
    parser.add_argument(
        "--zk", type=int, default=3, choices=(1, 3, 5), help="ZooKeeper servers (default 3)"
    )
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help="comma-separated fault kinds to pick from (default: all): " + ", ".join(FAULTS),
    )
    parser.add_argument(
        "--max-faults",
        type=int,
        default=2,
        help="at most this many faults a run, one after another (default 2)",
    )
    parser.add_argument(
        "--session-ms",
        type=int,
        default=6000,
        help="zookeeper.session.timeout.ms of brokers and clients; the target for "
        "'resumed after heal' is this + 2 s (default 6000)",
    )
    parser.add_argument(
        "--state",
        type=Path,
        default=Path("/tmp/quill-faults"),
        help="where each run keeps logs and histories; a clean run's are deleted "
        "(default /tmp/quill-faults)",
    )
    parser.add_argument(
        "--network",
        type=int,
        default=netns.DEFAULT_NETWORK,
        help="name namespaces q<N> on 10.<N>.0.0/24, so a soak and the suite's fault tests "
        f"(q{netns.DEFAULT_NETWORK}) can run side by side (default {netns.DEFAULT_NETWORK})",
    )
    parser.add_argument(
        "--table-every",
        type=int,
        default=5,
        help="also print the table "
        "every N runs (a soak stopped early still has one); 0: only at the end",
    )
    args = parser.parse_args(argv)
    try:
        netns.use_network(args.network)
    except ValueError as exc:
        parser.error(str(exc))
    # SIGTERM (or SIGINT in a background job) ends the soak through the runs' cleanup
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    kinds = [k.strip() for k in args.faults.split(",") if k.strip()]
    unknown = set(kinds) - set(FAULTS)
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}; choose from {', '.join(FAULTS)}")
    totals = Counter()
    per_kind = Counter()
    unwritable = defaultdict(list)
    resumed = defaultdict(list)
    failed = []
    for n in range(args.runs):
        seed = args.seed + n
        rng = random.Random(seed)
        chosen = [rng.choice(kinds) for _ in range(rng.randint(1, args.max_faults))]
        state = args.state / f"run-{seed}"
        shutil.rmtree(state, ignore_errors=True)
        began = time.monotonic()
        print(f"run {n + 1}/{args.runs} seed {seed}: {', '.join(chosen)}", flush=True)
        try:
            result = run_once(state, chosen, seed, n_zk=args.zk, session_timeout_ms=args.session_ms)
        except Exception as exc:  # a run that could not finish is a finding too
            print(f"  run failed: {type(exc).__name__}: {exc}", flush=True)
            failed.append((seed, chosen, f"{type(exc).__name__}: {exc}"))
            totals["errors"] += 1
            continue
        report = result.report
        totals["runs"] += 1
        totals["records"] += report.records
        totals["lost"] += len(report.lost)
        totals["duplicated"] += len(report.duplicated)
        totals["aborted reads"] += len(report.aborted_reads)
        totals["fatal"] += len(report.fatal)
        totals["other violations"] += (
            len(report.unexpected)
            + len(report.reordered)
            + len(report.misplaced)
            + len(report.offsets_backwards)
            + len(report.diverged)
        )
        for w in result.windows:
            per_kind[w.kind] += 1
            unwritable[w.kind].append(w.unwritable_s)
            resumed[w.kind].append(w.resumed_s)
        print(f"  {report.summary()} unwritable "
              f"{[round(w.unwritable_s, 1) for w in result.windows]} resumed after heal "
              f"{[round(w.resumed_s, 1) for w in result.windows]} "
              f"({time.monotonic() - began:.0f}s)", flush=True)  # fmt: skip
        if report.ok:
            shutil.rmtree(state, ignore_errors=True)
        else:
            failed.append((seed, chosen, report.summary()))
        if args.table_every and totals["runs"] % args.table_every == 0:
            print_table(totals, per_kind, unwritable, resumed, args.session_ms / 1000 + 2)
    print_table(totals, per_kind, unwritable, resumed, args.session_ms / 1000 + 2)
    for seed, chosen, what in failed:
        print(f"FAILED seed {seed} {chosen}: {what[:400]}")
    return 1 if failed else 0


def print_table(
    totals: Counter, per_kind: Counter, unwritable: dict, resumed: dict, target: float
) -> None:
    if not totals["runs"]:
        return
    print()
    print("| runs | run errors | records | lost | duplicated | aborted reads | other violations "
          "| fatal producer errors |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {totals['runs']} | {totals['errors']} | {totals['records']} | {totals['lost']} "
          f"| {totals['duplicated']} | {totals['aborted reads']} | {totals['other violations']} "
          f"| {totals['fatal']} |")  # fmt: skip
    print()
    print(f"| fault | times | unwritable s (median) | (max) | resumed after heal s (median) "
          f"| (max) | over target {target:.0f} s |")  # fmt: skip
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for kind in sorted(per_kind):
        gaps, after = unwritable[kind], resumed[kind]
        over = sum(v > target for v in after)
        print(f"| {kind} | {per_kind[kind]} | {statistics.median(gaps):.1f} | {max(gaps):.1f} "
              f"| {statistics.median(after):.1f} | {max(after):.1f} | {over} |")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
