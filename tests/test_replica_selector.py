"""Kafka's RackAwareReplicaSelector rules (broker/replica/selector.py), on views alone."""

from __future__ import annotations

import pytest

from broker.replica.selector import (
    LEADER_SELECTOR,
    RACK_AWARE_SELECTOR,
    ReplicaView,
    select_rack_aware,
    selector_for,
)

LEADER = ReplicaView(1, "a", 100, 0)


def test_same_rack_follower_is_chosen_and_the_most_caught_up_wins():
    behind = ReplicaView(2, "b", 90, 0)
    ahead = ReplicaView(3, "b", 100, 50)
    fresher = ReplicaView(4, "b", 100, 10)
    views = [LEADER, behind, ahead, fresher]
    assert select_rack_aware("b", LEADER, views) == fresher  # highest LEO, then latest caught up
    assert select_rack_aware("b", LEADER, [LEADER, behind]) == behind


def test_the_leader_when_in_the_rack_or_without_a_match():
    follower = ReplicaView(2, "a", 100, 0)
    assert select_rack_aware("a", LEADER, [LEADER, follower]) == LEADER
    assert select_rack_aware("z", LEADER, [LEADER, follower]) == LEADER
    assert select_rack_aware("", LEADER, [LEADER, follower]) == LEADER
    no_rack = ReplicaView(2, None, 100, 0)
    assert select_rack_aware("b", LEADER, [LEADER, no_rack]) == LEADER


def test_selector_class_names():
    assert selector_for(None) is None and selector_for("") is None
    assert selector_for(LEADER_SELECTOR) is None
    assert selector_for(RACK_AWARE_SELECTOR) is select_rack_aware
    with pytest.raises(ValueError, match="RackAwareReplicaSelector"):
        selector_for("com.example.Other")
