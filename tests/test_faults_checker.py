"""The fault harness's checker (faults/checker.py) over hand-made histories: each of
Jepsen's properties for a Kafka-like log is caught when broken and passes when kept."""

from __future__ import annotations

import os

import pytest

from faults import checker, netns


def _acked(value: str, p: int, o: int, t: float = 0.0) -> dict:
    return {"v": value, "p": p, "o": o, "t": t}


def _read(value: str, p: int, o: int) -> dict:
    return {"v": value, "p": p, "o": o}


PRODUCED = [
    _acked("w1-0", 0, 0),
    _acked("w1-1", 1, 0),
    _acked("w1-2", 0, 1),
    {"sent": 4, "writer": "w1"},
]


def test_every_acknowledged_record_read_once_in_place_passes():
    read = [_read("w1-0", 0, 0), _read("w1-1", 1, 0), _read("w1-2", 0, 1), _read("w1-3", 1, 1)]
    report = checker.check_log(PRODUCED, [], read)
    assert report.ok, report.summary()
    assert report.records == 3  # w1-3 was sent, never acknowledged: it may appear


def test_lost_duplicated_unexpected_misplaced_are_caught():
    read = [_read("w1-0", 0, 0), _read("w1-0", 0, 5), _read("w1-2", 0, 2), _read("x-9", 2, 0)]
    report = checker.check_log(PRODUCED, [], read)
    assert report.lost == ["w1-1"]
    assert report.duplicated == ["w1-0"]
    assert report.unexpected == ["x-9"]
    assert [m[0] for m in report.misplaced] == ["w1-0", "w1-2"]
    assert not report.ok


def test_a_writer_acknowledged_out_of_order_is_caught():
    produced = [_acked("w1-0", 0, 5), _acked("w1-2", 0, 4)]
    report = checker.check_log(produced, [], [_read("w1-0", 0, 5), _read("w1-2", 0, 4)])
    assert report.reordered == [(("w1", 0), (0, 5), (2, 4))]


def test_read_committed_must_not_see_aborted_records():
    txns = [
        {"txn": 0, "vals": ["t1-0-0", "t1-0-1"], "outcome": "commit"},
        {"txn": 1, "vals": ["t1-1-0"], "outcome": "abort"},
        {"txn": 2, "vals": ["t1-2-0"], "outcome": "unknown"},
    ]
    read = [
        _read("t1-0-0", 0, 0),
        _read("t1-0-1", 1, 0),
        _read("t1-1-0", 0, 2),
        _read("t1-2-0", 2, 0),
    ]
    report = checker.check_log([], txns, read)
    assert report.aborted_reads == ["t1-1-0"]
    assert report.records == 2 and not report.lost and not report.unexpected
    committed_lost = checker.check_log([], txns, read[2:])
    assert committed_lost.lost == ["t1-0-0", "t1-0-1"]


def test_committed_offsets_moving_backwards_are_caught():
    watched = [{"p": 0, "o": 10, "t": 1}, {"p": 0, "o": 12, "t": 2}, {"p": 1, "o": 3, "t": 2},
               {"p": 0, "o": 11, "t": 3}]  # fmt: skip
    assert checker.check_offsets(watched) == [(0, 12, 11)]
    assert checker.check_offsets(watched[:3]) == []


def test_unwritable_seconds_is_the_longest_gap_around_a_fault():
    acked = [_acked(f"w1-{i}", 0, i, t) for i, t in enumerate([1.0, 2.0, 9.0, 9.5])]
    assert checker.unwritable_seconds(acked, start=2.5, end=8.0) == 7.0


def test_resumed_after_waits_for_every_partition():
    acked = [_acked("a", 0, 0, 1.0), _acked("b", 0, 1, 5.5), _acked("c", 1, 0, 7.0)]
    assert checker.resumed_after(acked, 5.0, partitions=2) == 2.0
    assert checker.resumed_after(acked, 5.0, partitions=3) == float("inf")


def test_the_fault_clock_moves_wall_time_only(tmp_path):
    """broker/server/clock_fault.py in a process of its own: time.time() follows the
    offset file (forward, back, unreadable = 0); time.monotonic() does not."""
    import subprocess
    import sys

    offset = tmp_path / "clock"
    script = (
        "import time, sys\n"
        "from broker.server import clock_fault\n"
        "assert clock_fault.install()\n"
        "for line in sys.stdin:\n"
        "    open(sys.argv[1], 'w').write(line)\n"
        "    time.sleep(0.06)\n"
        "    m0, w0 = time.monotonic(), time.time()\n"
        "    print(round(w0 - time.time_ns() / 1e9, 3), round(w0 - m0), flush=True)\n"
    )
    env = {**os.environ, "QUILL_FAULT_CLOCK_FILE": str(offset)}
    out = subprocess.run(
        [sys.executable, "-c", script, str(offset)],
        input="3600\n-3600\nnot a number\n0\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout.split("\n")
    walls = [int(line.split()[1]) for line in out if line]
    assert len(walls) == 4
    # wall - monotonic moved by the offsets: +3600, then -3600, then back to the base
    base = walls[3]
    assert [w - base for w in walls] == [3600, -3600, 0, 0]


def test_acknowledgement_without_an_offset_is_checked_where_it_was_read():
    """librdkafka acknowledges an idempotent batch whose answer was lost once a later one
    is taken, without an offset (None): such a record must still be read back once, in
    its partition and its writer's order (found by bench/faults.py seed 103, whose
    checker stopped on the comparison of None with an offset)."""
    produced = [_acked("w1-0", 0, 0), _acked("w1-1", 0, None), _acked("w1-2", 0, 2)]
    read = [_read("w1-0", 0, 0), _read("w1-1", 0, 1), _read("w1-2", 0, 2)]
    assert checker.check_log(produced, [], read).ok
    swapped = [_read("w1-0", 0, 0), _read("w1-1", 0, 3), _read("w1-2", 0, 2)]
    assert checker.check_log(produced, [], swapped).reordered
    elsewhere = [_read("w1-0", 0, 0), _read("w1-1", 1, 0), _read("w1-2", 0, 2)]
    assert checker.check_log(produced, [], elsewhere).misplaced
    assert checker.check_log(produced, [], read[::2]).lost == ["w1-1"]


def test_a_second_network_names_its_own_hosts_and_subnet():
    """A soak on network 78 must touch nothing of the suite's network 77: other namespace
    and veth names, another bridge, another subnet, and only numbers a subnet can take."""
    try:
        netns.use_network(78)
        host = netns.Host("b1", f"{netns.SUBNET}.10")
        assert (host.netns, host.veth, netns.BRIDGE) == ("q78-b1", "q78vb1", "q78br")
        assert (host.address, netns.BRIDGE_ADDRESS) == ("10.78.0.10", "10.78.0.1")
        assert netns.FORWARD_RULE[2] == netns.FORWARD_RULE[4] == "q78br"
        for bad in (0, 255):
            with pytest.raises(ValueError, match="outside 1-254"):
                netns.use_network(bad)
    finally:
        netns.use_network(netns.DEFAULT_NETWORK)
    assert netns.Host("b1", "").netns == "q77-b1"


def test_soak_logs_run_side_by_side_add_up_to_one_table(tmp_path):
    """bench/faults_tables.py: runs from two logs count once each, a violation counts
    under its column, a failed run is a run error, and a cut-off run is not a run."""
    from bench.faults_tables import read_logs

    (tmp_path / "a.log").write_text(
        "run 1/2 seed 401: kill-leader, netem\n"
        "  fault 1/2: kill -9 broker-2 (leader)\n"
        "  records=100 unwritable [6.5, 0.2] resumed after heal [0.1, 0.0] (80s)\n"
        "run 2/2 seed 402: pause-leader\n"
        "  run failed: TimeoutError: cluster did not settle\n"
    )
    (tmp_path / "b.log").write_text(
        "run 1/2 seed 451: kill-leader\n"
        "  records=50 lost=2 e.g. ['w1-3', 'w1-4'] aborted_reads=1 e.g. [('t', 1)] "
        "diverged=1 e.g. ['p0'] unwritable [9.5] resumed after heal [8.5] (95s)\n"
        "run 2/2 seed 452: netem\n"
        "  fault 1/1: 5% loss\n"
    )
    totals, per_kind, unwritable, resumed, seeds = read_logs(
        [tmp_path / "a.log", tmp_path / "b.log"]
    )
    assert (totals["runs"], totals["errors"], totals["records"]) == (2, 1, 150)
    assert (totals["lost"], totals["aborted reads"], totals["other violations"]) == (2, 1, 1)
    assert per_kind == {"kill-leader": 2, "netem": 1}
    assert unwritable["kill-leader"] == [6.5, 9.5] and resumed["kill-leader"] == [0.1, 8.5]
    assert seeds == [401, 451]
