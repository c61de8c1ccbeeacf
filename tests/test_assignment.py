"""Replica assignment: Kafka's placement, plain and rack-aware (pure functions)."""

import itertools
from collections import Counter

import pytest

from broker.controller.assignment import (
    assign_replicas,
    assign_replicas_rack_aware,
    rack_alternated,
)
from broker.protocol.errors import KafkaError


def test_plain_assignment_spreads_leaders_and_never_repeats_a_broker():
    result = assign_replicas([1, 2, 3, 4], 8, 3, start_index=0, next_shift=0)
    assert result[0][0] == 1 and result[1][0] == 2 and result[4][0] == 1
    for replicas in result.values():
        assert len(set(replicas)) == 3
    assert Counter(r[0] for r in result.values()) == {1: 2, 2: 2, 3: 2, 4: 2}
    with pytest.raises(KafkaError):
        assign_replicas([1, 2], 1, 3)


def test_rack_alternated_order():
    assert rack_alternated({1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}) == [1, 3, 5, 2, 4]


@pytest.mark.parametrize("start,shift", list(itertools.product(range(6), range(6))))
def test_rack_aware_puts_each_replica_in_a_different_rack(start, shift):
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    result = assign_replicas_rack_aware(racks, 12, 3, start_index=start, next_shift=shift)
    for replicas in result.values():
        assert len(set(replicas)) == 3
        assert len({racks[b] for b in replicas}) == 3
    assert Counter(r[0] for r in result.values()) == dict.fromkeys(racks, 2)


def test_rack_aware_with_more_replicas_than_racks_uses_every_rack():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    result = assign_replicas_rack_aware(racks, 4, 3, start_index=1, next_shift=0)
    for replicas in result.values():
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"a", "b"}
