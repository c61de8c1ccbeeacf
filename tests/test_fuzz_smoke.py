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

# executions per harness: a few seconds each on a loaded 2-core machine
RUNS = {"log": 400, "checkpoint": 3000, "request": 6000, "response": 6000}
DEFAULT_RUNS = 4000


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_harness_short_run_finds_no_crash(harness, tmp_path):
    assert any((CORPUS / harness).iterdir()), f"no seed corpus for {harness}"
    runs = RUNS.get(harness, DEFAULT_RUNS)
    result = run_harness(harness, tmp_path, runs=runs)
    crashes = {p.name: p.read_bytes()[:2000].hex() for p in result.crashes}
    assert result.returncode == 0 and not crashes, (crashes, result.output)
    assert result.executions >= runs, result.output
    assert result.coverage > 0, result.output
