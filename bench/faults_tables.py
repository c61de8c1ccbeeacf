"""The tables of one soak made of several `bench/faults.py` logs.

    python bench/faults_tables.py soak-net78.log soak-net79.log

Two harnesses on separate networks (`--network 78`, `--network 79`) and seeds run side by
side, as one soak in about half the time; each log has one line per run. This reads the
runs' lines of every log (the run's faults, its checker summary, the seconds each fault
left a partition unwritable and writes took to resume after its heal) and prints the
tables `bench/faults.py` prints, over all of them. A run that failed to finish counts
as a run error; a log cut short counts the runs it finished.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.faults import print_table  # noqa: E402

RUN = re.compile(r"^run \d+/\d+ seed (?P<seed>\d+): (?P<kinds>.+)$")
DONE = re.compile(
    r"^  records=(?P<records>\d+)(?P<violations>.*?) unwritable (?P<unwritable>\[[^\]]*\]) "
    r"resumed after heal (?P<resumed>\[[^\]]*\]) \(\d+s\)$"
)
VIOLATION = re.compile(r"\b(\w+)=(\d+) e\.g\.")
OTHER = {"unexpected", "reordered", "misplaced", "offsets_backwards", "diverged"}


def read_logs(paths: list[Path]) -> tuple[Counter, Counter, dict, dict, list[int]]:
    totals, per_kind = Counter(), Counter()
    unwritable, resumed = defaultdict(list), defaultdict(list)
    seeds: list[int] = []
    for path in paths:
        kinds = None
        for line in path.read_text(errors="replace").splitlines():
            if m := RUN.match(line):
                kinds, seed = m["kinds"].split(", "), int(m["seed"])
            elif line.startswith("  run failed:") and kinds is not None:
                totals["errors"] += 1
                kinds = None
            elif (m := DONE.match(line)) and kinds is not None:
                gaps, after = ast.literal_eval(m["unwritable"]), ast.literal_eval(m["resumed"])
                if len(gaps) != len(kinds) or len(after) != len(kinds):
                    raise ValueError(f"{path}: seed {seed}: {len(kinds)} faults, line {line!r}")
                totals["runs"] += 1
                totals["records"] += int(m["records"])
                for name, count in VIOLATION.findall(m["violations"]):
                    key = "other violations" if name in OTHER else name.replace("_", " ")
                    totals[key] += int(count)
                for kind, gap, resume in zip(kinds, gaps, after, strict=True):
                    per_kind[kind] += 1
                    unwritable[kind].append(gap)
                    resumed[kind].append(resume)
                seeds.append(seed)
                kinds = None
    return totals, per_kind, unwritable, resumed, seeds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="bench/faults.py outputs")
    parser.add_argument(
        "--session-ms", type=int, default=6000, help="the soaks' --session-ms (default 6000)"
    )
    args = parser.parse_args(argv)
    totals, per_kind, unwritable, resumed, seeds = read_logs(args.logs)
    if len(set(seeds)) != len(seeds):
        parser.error("a seed appears twice: these logs are not one soak's parts")
    print(f"{totals['runs']} runs finished, seeds {min(seeds, default=0)}-{max(seeds, default=0)}")
    print_table(totals, per_kind, unwritable, resumed, args.session_ms / 1000 + 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
