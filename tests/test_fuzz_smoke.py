"""A short coverage-guided run of every fuzz harness (tests/fuzz/harnesses.py).

Each harness runs under atheris in its own process, a fixed number of executions from
its committed corpus (tests/fuzz/corpus/, seeded from real clients' frames and files
the broker wrote), with a fixed seed. A crash fails the test with the input in hex;
put the input under tests/fuzz/crashes/<harness>/ and fix the parser (the regression
test replays it). Long runs: bench/fuzz.py.
"""

from __future__ import annotations

import pytest

from tests.fuzz.harnesses import HARNESSES
from tests.fuzz.runner import CORPUS, run_harness

# executions per harness (seed 14, tests/fuzz/runner.py): every committed corpus input,
# then mutations, a few seconds each on a loaded 2-core machine. Half of what they were
# (the suite's 45-minute budget); bench/fuzz.py runs for minutes.
RUNS = {"log": 200, "checkpoint": 1500, "request": 3000, "response": 3000}
DEFAULT_RUNS = 2000


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_harness_short_run_finds_no_crash(harness, tmp_path):
    assert any((CORPUS / harness).iterdir()), f"no seed corpus for {harness}"
    runs = RUNS.get(harness, DEFAULT_RUNS)
    result = run_harness(harness, tmp_path, runs=runs)
    crashes = {p.name: p.read_bytes()[:2000].hex() for p in result.crashes}
    assert result.returncode == 0 and not crashes, (crashes, result.output)
    assert result.executions >= runs, result.output
    assert result.coverage > 0, result.output
