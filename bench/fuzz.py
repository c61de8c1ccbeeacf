"""Long fuzz runs: every harness of tests/fuzz/ for a while, figures printed.

    python bench/fuzz.py [--seconds 60] [--only records,request] [--save-crashes] [--json out.json]

Each harness runs under atheris (libFuzzer) in its own process, from the committed
corpus (tests/fuzz/corpus/), new inputs kept in a temp dir. Printed per harness:
executions, executions per second, coverage (libFuzzer's "cov": edges of the
instrumented broker modules reached) and features ("ft"), the corpus size at the end,
and crashes. With --save-crashes each crash input is copied to
tests/fuzz/crashes/<harness>/, where tests/test_fuzz_regressions.py replays it.
Figures are printed, never asserted; see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz.harnesses import HARNESSES  # noqa: E402
from tests.fuzz.runner import CRASHES, run_harness  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="per harness")
    parser.add_argument("--only", default="", help="comma-separated harness names")
    parser.add_argument("--save-crashes", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or sorted(HARNESSES)
    rows = []
    print(
        f"{'harness':<22}{'execs':>10}{'execs/s':>10}{'cov':>8}{'ft':>8}{'corpus':>8}{'crashes':>9}"
    )
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as work:
            result = run_harness(name, Path(work), seconds=args.seconds)
            if args.save_crashes:
                for crash in result.crashes:
                    (CRASHES / name).mkdir(parents=True, exist_ok=True)
                    shutil.copy(crash, CRASHES / name / crash.name)
        print(
            f"{name:<22}{result.executions:>10}{result.execs_per_second:>10.0f}"
            f"{result.coverage:>8}{result.features:>8}{result.corpus:>8}{len(result.crashes):>9}"
        )
        if result.crashes:
            print("   " + result.output.strip().splitlines()[-1][:200])
        rows.append(
            {
                "harness": name,
                "seconds": args.seconds,
                "executions": result.executions,
                "execs_per_second": round(result.execs_per_second),
                "coverage": result.coverage,
                "features": result.features,
                "corpus": result.corpus,
                "crashes": [c.name for c in result.crashes],
            }
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
