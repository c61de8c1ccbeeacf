"""bench/machine_cpu.py: CPU split between the benchmark's own processes and the rest of
the machine, measured on real processes (one below this test, one orphaned outside it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from bench import machine_cpu
from tests.wait_helpers import wait_until

# Spins until it has used `cpu` seconds of CPU, says so in `marker`, then sleeps.
_BUSY = (
    "import sys, time, pathlib\n"
    "cpu, marker = float(sys.argv[1]), sys.argv[2]\n"
    "while time.process_time() < cpu: pass\n"
    "pathlib.Path(marker).write_text('done')\n"
    "time.sleep(120)\n"
)


def _orphan(cpu_s: float, marker: Path) -> int:
    """A busy process whose parent exits at once: outside this test's process tree."""
    shell = subprocess.run(
        [
            "sh",
            "-c",
            f'"$0" -c "$1" {cpu_s} {marker} >/dev/null 2>&1 & echo $!',
            sys.executable,
            _BUSY,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(shell.stdout.strip())


def test_a_process_outside_the_tree_counts_as_others_and_a_child_does_not(tmp_path):
    before = machine_cpu.snapshot()
    child = subprocess.Popen([sys.executable, "-c", _BUSY, "0.4", str(tmp_path / "child")])
    outsider = _orphan(0.6, tmp_path / "outsider")
    try:
        wait_until((tmp_path / "child").exists, what="the child to start", interval=0.02)
        wait_until((tmp_path / "outsider").exists, what="the outsider to start", interval=0.02)
        after = machine_cpu.snapshot()
    finally:
        child.kill()
        child.wait()
        os.kill(outsider, signal.SIGKILL)

    assert outsider not in machine_cpu.descendants(os.getpid(), before, after)
    assert child.pid in machine_cpu.descendants(os.getpid(), before, after)

    as_broker = machine_cpu.cpu_between(before, after, brokers=[child.pid], top=50)
    by_pid = {t["pid"]: t for t in as_broker["others_top"]}
    assert outsider in by_pid, as_broker["others_top"]
    assert by_pid[outsider]["seconds"] >= 0.5  # it spun 0.6 s; ticks are 10 ms
    assert child.pid not in by_pid
    assert as_broker["brokers_cores"] * as_broker["wall_s"] >= 0.3

    # the same child, not named as a broker, is the rest of the benchmark's tree
    unnamed = machine_cpu.cpu_between(before, after, brokers=[], top=50)
    assert unnamed["brokers_cores"] == 0
    assert unnamed["bench_rest_cores"] * unnamed["wall_s"] >= 0.3
    assert child.pid not in {t["pid"] for t in unnamed["others_top"]}


def test_used_seconds_of_a_reused_pid_starts_from_zero_and_a_renamed_one_does_not():
    before = machine_cpu.Snapshot(0.0, {7: machine_cpu.Proc("old", 1, 500, 1000)})
    reused = machine_cpu.Snapshot(1.0, {7: machine_cpu.Proc("new", 1, 30, 1090)})
    assert machine_cpu.used_seconds(before, reused, 7) == 30 * machine_cpu.TICK_S
    # a kernel worker's name follows its work queue: the same process all the same
    renamed = machine_cpu.Snapshot(1.0, {7: machine_cpu.Proc("other-queue", 1, 530, 1000)})
    assert machine_cpu.used_seconds(before, renamed, 7) == 30 * machine_cpu.TICK_S
    assert machine_cpu.used_seconds(before, machine_cpu.Snapshot(1.0), 7) == 0.0


def test_describe_names_the_busiest_others():
    cell = machine_cpu.describe(
        {
            "brokers_cores": 1.5432,
            "client_cores": 0.3,
            "others_cores": 0.012,
            "others_top": [{"pid": 77, "name": "kdamond.0", "seconds": 0.13}],
        }
    )
    assert cell == "brokers 1.54, client 0.30, others 0.01 (kdamond.0 0.13 s)"
