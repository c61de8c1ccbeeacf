"""Faults across hosts (issue 27): kill -9 of a partition leader, on three brokers and
one ZooKeeper, each in its own network namespace, with idempotent and transactional
producers and a consumer group running in a client namespace throughout.

Conditions, not times: after the leader is killed and restarted, every acknowledged
record is read back exactly once in its place, no aborted transaction is read, the
group's committed offsets never fell, the cluster converges (every replica back in the
ISR, replicas' logs equal below the HW), and writes were accepted again after the fault.
"""

from __future__ import annotations

import json

import pytest

from faults.run import run_once
from tests.faults_helpers import assert_safe, require_hosts


@pytest.fixture(scope="module")
def kill_run(tmp_path_factory):
    require_hosts()
    return run_once(tmp_path_factory.mktemp("faults-kill"), ["kill-leader"], seed=27)


def test_kill_leader_loses_and_duplicates_nothing(kill_run):
    assert_safe(kill_run)


def test_writes_resume_after_kill(kill_run):
    (window,) = kill_run.windows
    acked_after = [r for r in _acked(kill_run) if r["t"] > window.healed]
    assert acked_after, "no write was acknowledged after the killed leader came back"
    assert {r["p"] for r in acked_after} == {0, 1, 2}


def _acked(result):
    rows = (json.loads(line) for line in (result.logs / "produce.jsonl").read_text().splitlines())
    return [r for r in rows if "o" in r]
