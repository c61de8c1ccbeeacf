"""The goal-based proposer (operations.planner) on plain data: its goals hold, it moves
only what it must, and it refuses input it cannot meet."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from operations.planner import PlanError, describe, propose


def counts(target, position=None):
    c = Counter()
    for replicas in target.values():
        for i, b in enumerate(replicas):
            if position is None or i == position:
                c[b] += 1
    return c


def spread(c, brokers):
    values = [c.get(b, 0) for b in brokers]
    return max(values) - min(values)


def test_rebalance_onto_a_new_broker_evens_replicas_and_leaders():
    current = {("t", p): [1 + p % 2, 2 - p % 2] for p in range(6)}  # brokers 1-2 of 3
    racks = {1: None, 2: None, 3: None}
    sizes = {("t", p): 1000 * (p + 1) for p in range(6)}
    target = propose(current, racks, sizes)
    assert counts(target) == {1: 4, 2: 4, 3: 4}
    assert spread(counts(target, 0), racks) <= 1
    assert all(len(set(r)) == 2 for r in target.values())
    proposal = describe(current, target, sizes, racks).as_dict()
    moved_onto_3 = [m for m in proposal["moves"] if 3 in m["adding"]]
    assert len(moved_onto_3) == 4
    assert proposal["bytes_to_move"] == sum(m["bytes"] for m in proposal["moves"])
    assert proposal["bytes_to_move"] == sum(
        sizes[(m["topic"], m["partition"])] for m in moved_onto_3
    )
    by_id = {row["id"]: row for row in proposal["brokers"]}
    assert by_id[3]["before"]["replicas"] == 0 and by_id[3]["after"]["replicas"] == 4
    assert proposal["plan"]["version"] == 1
    assert {(p["topic"], p["partition"]) for p in proposal["plan"]["partitions"]} == {
        (m["topic"], m["partition"]) for m in proposal["moves"]
    }


def test_a_balanced_cluster_gets_no_moves():
    current = {("t", p): [1 + p % 3, 1 + (p + 1) % 3] for p in range(6)}
    target = propose(current, {1: None, 2: None, 3: None})
    assert target == current
    assert describe(current, target).moves == []


def test_rack_awareness_is_never_broken_and_racks_spread():
    rng = random.Random(7)
    racks = {b: f"r{b % 3}" for b in range(1, 10)}
    current = {}
    for p in range(300):
        first = rng.choice([1, 2, 3])  # everything on brokers 1-3, one per rack
        current[("a", p)] = [first] + [b for b in (1, 2, 3) if b != first]
    target = propose(current, racks)
    for replicas in target.values():
        assert len({racks[b] for b in replicas}) == 3
    assert spread(counts(target), racks) <= 1
    assert spread(counts(target, 0), racks) <= 1


def test_remove_broker_drains_it_and_keeps_the_replication_factor():
    current = {("t", p): [1 + p % 4, 1 + (p + 1) % 4] for p in range(12)}
    target = propose(current, {1: None, 2: None, 3: None, 4: None}, remove=[4])
    assert 4 not in counts(target)
    assert all(len(set(r)) == 2 for r in target.values())
    assert spread(counts(target), [1, 2, 3]) <= 1


def test_change_replication_factor():
    current = {("t", p): [1 + p % 3] for p in range(6)}
    target = propose(current, {1: None, 2: None, 3: None}, replication_factors={"t": 3})
    assert all(sorted(r) == [1, 2, 3] for r in target.values())
    assert [r[0] for r in target.values()] == [r[0] for r in current.values()]  # leaders stay
    down = propose(target, {1: None, 2: None, 3: None}, replication_factors={"t": 1})
    assert all(len(r) == 1 for r in down.values())


@pytest.mark.parametrize(
    ("kwargs", "racks", "field", "words"),
    [
        ({"remove": [9]}, {1: None, 2: None}, "brokers", "Unknown broker(s) [9]"),
        ({"replication_factors": {"t": 3}}, {1: None, 2: None}, "replication_factor", "between 1"),
        ({"replication_factors": {"nope": 1}}, {1: None, 2: None}, "topics", "Unknown topic"),
        ({"remove": [2]}, {1: None, 2: None}, "brokers", "only 1 brokers"),
        ({}, {1: "a", 2: None}, "brokers", "no broker.rack"),
    ],
)
def test_refusals_name_the_problem(kwargs, racks, field, words):
    current = {("t", 0): [1, 2]}
    with pytest.raises(PlanError) as caught:
        propose(current, racks, **kwargs)
    assert caught.value.field == field
    assert words in caught.value.message
