"""Drive tests/fuzz/run.py in a subprocess and read libFuzzer's figures back.

Shared by the smoke test in the suite (tests/test_fuzz_smoke.py: a fixed number of runs
per harness from the committed corpus) and bench/fuzz.py (long runs).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "corpus"
CRASHES = Path(__file__).parent / "crashes"
_STATS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")


@dataclass
class FuzzResult:
    harness: str
    returncode: int
    executions: int = 0
    coverage: int = 0
    features: int = 0
    corpus: int = 0
    seconds: float = 0.0
    crashes: list[Path] = field(default_factory=list)
    output: str = ""

    @property
    def execs_per_second(self) -> float:
        return self.executions / self.seconds if self.seconds else 0.0


def run_harness(
    harness: str, workdir: Path, *, runs: int | None = None, seconds: int | None = None
) -> FuzzResult:
    """Fuzz ``harness`` from its committed corpus; new inputs go to ``workdir`` only."""
    new_inputs = workdir / "new"
    artifacts = workdir / "artifacts"
    new_inputs.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    args = [
        sys.executable,
        "-m",
        "tests.fuzz.run",
        harness,
        "-seed=14",
        "-timeout=60",
        "-max_len=65536",
        "-print_final_stats=1",
        f"-artifact_prefix={artifacts}/",
    ]
    if runs is not None:
        args.append(f"-runs={runs}")
    if seconds is not None:
        args.append(f"-max_total_time={seconds}")
    args += [str(new_inputs), str(CORPUS / harness)]
    start = time.monotonic()
    env = {**os.environ, "QUILL_FUZZ_SCRATCH": str(workdir)}
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, errors="replace")
    result = FuzzResult(harness, proc.returncode, seconds=time.monotonic() - start)
    result.output = proc.stderr[-6000:]
    for match in _STATS.finditer(proc.stderr):
        result.executions, result.coverage, result.features, result.corpus = map(
            int, match.groups()
        )
    result.crashes = sorted(artifacts.iterdir())
    return result
