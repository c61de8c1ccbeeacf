"""Static membership (KIP-345, spec 4.5) with librdkafka: a member restarted within its
session timeout gets its partitions back with no rebalance, and a second live member
with the same group.instance.id fences the first."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from tests.group_helpers import (
    GROUP_BROKER,
    ConfluentMember,
    Ownership,
    all_values,
    join_one_by_one,
    produce,
    topic_and_group,
)
from tests.wait_helpers import wait_until

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1, **GROUP_BROKER)


def _static(bootstrap, group, topic, name, ownership, instance):
    return ConfluentMember(
        bootstrap,
        group,
        topic,
        name,
        ownership,
        **{"group.instance.id": instance, "session.timeout.ms": 20000},
    )


def _stable_group(bootstrap):
    topic, group = topic_and_group(bootstrap, "static", PARTITIONS)
    ownership = Ownership()
    members = [_static(bootstrap, group, topic, f"m{i}", ownership, f"inst-{i}") for i in range(3)]
    join_one_by_one(members, ownership)
    wait_until(
        lambda: all(len(ownership.of(m.name)) == 2 for m in members), what="2 partitions each"
    )
    return topic, group, ownership, members


def test_restart_within_session_timeout_keeps_assignment_without_rebalance(broker):
    topic, group, ownership, members = _stable_group(broker.bootstrap)
    before = {m.name: ownership.of(m.name) for m in members}
    rebalances = dict(ownership.assignments)
    members[2].stop()  # a static member's close sends no LeaveGroup
    restarted = _static(broker.bootstrap, group, topic, "m2-again", ownership, "inst-2")
    restarted.start()
    try:
        wait_until(lambda: ownership.of("m2-again"), what="the restarted member's partitions")
        assert ownership.of("m2-again") == before["m2"]
        sent = produce(broker.bootstrap, topic, 120, PARTITIONS)
        live = [members[0], members[1], restarted]
        wait_until(lambda: all_values(live) >= sent, what="every record")
        # the other members saw no rebalance at all
        assert ownership.assignments["m0"] == rebalances["m0"]
        assert ownership.assignments["m1"] == rebalances["m1"]
        assert {m.name: ownership.of(m.name) for m in members[:2]} == {
            n: before[n] for n in ("m0", "m1")
        }
    finally:
        for m in live:
            m.stop()
    assert ownership.violations == []


def test_duplicate_instance_is_fenced(broker):
    topic, group, ownership, members = _stable_group(broker.bootstrap)
    duplicate = _static(broker.bootstrap, group, topic, "dup", ownership, "inst-0")
    try:
        duplicate.start()
        wait_until(lambda: members[0].fatal is not None, what="the first inst-0 to be fenced")
        fatal = members[0].fatal  # librdkafka reports FENCED_INSTANCE_ID as a fatal error
        assert fatal.code() in (KafkaError._FATAL, KafkaError.FENCED_INSTANCE_ID), fatal
        assert "fenced by other consumer with same group.instance.id" in fatal.str()
        assert duplicate.fatal is None
        assert all(m.fatal is None for m in members[1:])
    finally:
        for m in [*members, duplicate]:
            m.stop()
