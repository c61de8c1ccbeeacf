"""The group APIs byte for byte through tests/wire.py: every version we advertise, and
the error codes of bad input, with nothing committed by a refused request."""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode as E

from broker.coordinator.group.codec import partition_for
from broker.protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)
from tests.group_helpers import GROUP_BROKER, commit, create_topic, fetched, find, unique
from tests.wait_helpers import wait_until
from tests.wire import WireClient

TOPIC_PARTITIONS = 3


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1, **GROUP_BROKER)


@pytest.fixture(scope="module")
def topic(broker):
    name = unique("wire")
    create_topic(broker.bootstrap, name, TOPIC_PARTITIONS)
    return name


@pytest.fixture
def wire(broker):
    client = WireClient.for_bootstrap(broker.bootstrap)
    # the first FindCoordinator creates __consumer_offsets
    wait_until(
        lambda: find(client, "warm-up").error_code == E.none, what="a coordinator", interval=0.2
    )
    yield client
    client.close()


def join(wire, group, member_id="", version=5, instance=None, session=6000, topic="t", **kw):
    body = {
        "group_id": group,
        "session_timeout": session,
        "rebalance_timeout": 10000,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(topic)}],
        **kw,
    }
    return wire.request(11, version, body)


def join_fully(wire, group, topic, instance=None):
    """Join (with the member-id round), sync as the leader; (member id, generation)."""
    resp = join(wire, group, topic=topic, instance=instance)
    if resp.error_code == E.member_id_required:
        resp = join(wire, group, resp.member_id, topic=topic, instance=instance)
    assert resp.error_code == E.none, resp
    member, generation = resp.member_id, resp.generation_id
    sync = wire.request(
        14,
        3,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member,
            "group_instance_id": instance,
            "assignments": [
                {
                    "member_id": member,
                    "assignment": assignment(topic, list(range(TOPIC_PARTITIONS))),
                }
            ],
        },
    )
    assert sync.error_code == E.none, sync
    return member, generation


def heartbeat(wire, group, member, generation, instance=None):
    return wire.request(
        12,
        3,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member,
            "group_instance_id": instance,
        },
    ).error_code


NOTHING = {0: (-1, ""), 1: (-1, ""), 2: (-1, "")}


# -- the happy path at every version --------------------------------------------------------
@pytest.mark.parametrize("version", range(0, 5))
def test_find_coordinator_every_version(wire, broker, version):
    if version >= 4:
        resp = wire.request(10, version, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [c.key for c in resp.coordinators] == ["a", "b"]
        assert all(
            c.error_code == E.none and c.port == broker.brokers[0].port for c in resp.coordinators
        )
    else:
        resp = find(wire, "a", version)
        assert (
            resp.error_code == E.none and resp.node_id == 1 and resp.port == broker.brokers[0].port
        )


@pytest.mark.parametrize("version", range(0, 10))
def test_join_sync_heartbeat_leave_every_version(wire, topic, version):
    group = unique("v")
    kw = {} if version < 8 else {"reason": "testing"}
    resp = join(wire, group, version=version, topic=topic, **kw)
    if version >= 4:  # the member-id-required round (KIP-394)
        assert resp.error_code == E.member_id_required and resp.member_id
        resp = join(wire, group, resp.member_id, version=version, topic=topic, **kw)
    assert resp.error_code == E.none
    assert resp.leader == resp.member_id and resp.generation_id == 1
    assert resp.protocol_name == "range"
    assert [m.member_id for m in resp.members] == [resp.member_id]
    member = resp.member_id
    sync_version = min(version, 5)
    body = {
        "group_id": group,
        "generation_id": 1,
        "member_id": member,
        "assignments": [{"member_id": member, "assignment": assignment(topic, [0])}],
    }
    if sync_version >= 5:
        body |= {"protocol_type": "consumer", "protocol_name": "range"}
    sync = wire.request(14, sync_version, body)
    assert sync.error_code == E.none and sync.assignment == assignment(topic, [0])
    assert (
        wire.request(
            12, min(version, 4), {"group_id": group, "generation_id": 1, "member_id": member}
        ).error_code
        == E.none
    )
    leave_version = min(version, 5)
    if leave_version >= 3:
        leave = wire.request(
            13, leave_version, {"group_id": group, "members": [{"member_id": member}]}
        )
        assert [m.error_code for m in leave.members] == [E.none]
    else:
        leave = wire.request(13, leave_version, {"group_id": group, "member_id": member})
    assert leave.error_code == E.none


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_and_fetch_every_version(wire, topic, version):
    group = unique("c")
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time": -1,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 1,
                        "committed_offset": 42 + version,
                        "committed_metadata": "m",
                    }
                ],
            }
        ],
    }
    resp = wire.request(8, version, body)
    assert resp.topics[0].partitions[0].error_code == E.none
    for fetch_version in range(1, 9):
        topics = [{"name": topic, "partition_indexes": [1]}]
        if fetch_version >= 8:
            r = wire.request(9, fetch_version, {"groups": [{"group_id": group, "topics": topics}]})
            parts = r.groups[0].topics[0].partitions
        else:
            r = wire.request(9, fetch_version, {"group_id": group, "topics": topics})
            parts = r.topics[0].partitions
        assert (parts[0].committed_offset, parts[0].metadata) == (42 + version, "m")


def test_describe_list_delete(wire, topic):
    group = unique("d")
    member, generation = join_fully(wire, group, topic)
    desc = wire.request(15, 5, {"groups": [group, "no-such-group"]})
    g, missing = desc.groups
    assert (g.group_state, g.protocol_type, g.protocol_data) == ("Stable", "consumer", "range")
    assert g.members[0].member_id == member and g.members[0].client_host == "/127.0.0.1"
    assert g.members[0].client_id == "wire-test"
    assert g.members[0].member_assignment == assignment(topic, [0, 1, 2])
    assert missing.group_state == "Dead" and missing.error_code == E.none
    listed = wire.request(16, 4, {"states_filter": ["stable"]})
    assert group in {x.group_id for x in listed.groups}
    assert group not in {
        x.group_id for x in wire.request(16, 4, {"states_filter": ["empty"]}).groups
    }
    assert wire.request(42, 2, {"groups_names": [group]}).results[0].error_code == E.non_empty_group
    assert commit(wire, group, topic, {0: 5, 1: 6}, member, generation) == {0: E.none, 1: E.none}
    # OffsetDelete of a subscribed topic is refused while the group is active
    od = wire.request(
        47,
        0,
        {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
    )
    assert od.topics[0].partitions[0].error_code == E.group_subscribed_to_topic
    wire.request(13, 4, {"group_id": group, "members": [{"member_id": member}]})
    od = wire.request(
        47,
        0,
        {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
    )
    assert od.error_code == E.none and od.topics[0].partitions[0].error_code == E.none
    assert fetched(wire, group, topic) == {**NOTHING, 1: (6, "")}
    results = wire.request(42, 2, {"groups_names": [group, "never-was"]}).results
    assert {r.group_id: r.error_code for r in results} == {
        group: E.none,
        "never-was": E.group_id_not_found,
    }
    assert fetched(wire, group, topic) == NOTHING
    assert wire.request(15, 5, {"groups": [group]}).groups[0].group_state == "Dead"


# -- bad input -------------------------------------------------------------------------------------
def test_invalid_group_id(wire):
    assert join(wire, "").error_code == E.invalid_group_id
    assert heartbeat(wire, "", "m", 1) == E.invalid_group_id
    assert (
        wire.request(
            14, 3, {"group_id": "", "generation_id": 1, "member_id": "m", "assignments": []}
        ).error_code
        == E.invalid_group_id
    )


def test_stale_generation_is_illegal_and_commits_nothing(wire, topic):
    group = unique("gen")
    member, generation = join_fully(wire, group, topic)
    assert heartbeat(wire, group, member, generation - 1) == E.illegal_generation
    assert heartbeat(wire, group, member, generation + 5) == E.illegal_generation
    assert commit(wire, group, topic, {0: 10, 1: 11}, member, generation + 1) == {
        0: E.illegal_generation,
        1: E.illegal_generation,
    }
    assert fetched(wire, group, topic) == NOTHING
    assert commit(wire, group, topic, {0: 10}, member, generation) == {0: E.none}
    assert fetched(wire, group, topic)[0] == (10, "")


def test_unknown_member_and_non_members(wire, topic):
    group = unique("unk")
    member, generation = join_fully(wire, group, topic)
    assert heartbeat(wire, group, "who-is-this", generation) == E.unknown_member_id
    assert join(wire, group, "who-is-this", topic=topic).error_code == E.unknown_member_id
    # a non-member may not commit to a group with members, even without a generation
    assert commit(wire, group, topic, {0: 3}) == {0: E.unknown_member_id}
    assert commit(wire, group, topic, {0: 3}, "who-is-this", generation) == {0: E.unknown_member_id}
    assert fetched(wire, group, topic) == NOTHING
    assert heartbeat(wire, unique("no-group"), "x", 1) == E.unknown_member_id


def test_oversized_metadata_is_refused_per_partition(wire, topic):
    group = unique("meta")
    big, ok = "x" * 4097, "y" * 4096
    assert commit(wire, group, topic, {0: 7}, metadata=big) == {0: E.offset_metadata_too_large}
    assert fetched(wire, group, topic) == NOTHING
    assert commit(wire, group, topic, {1: 8}, metadata=ok) == {1: E.none}
    assert fetched(wire, group, topic)[1] == (8, ok)


def test_unknown_topic_and_session_timeout(wire, topic):
    group = unique("misc")
    resp = wire.request(
        8,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": "no-such-topic",
                    "partitions": [{"partition_index": 0, "committed_offset": 1}],
                },
                {"name": topic, "partitions": [{"partition_index": 99, "committed_offset": 1}]},
            ],
        },
    )
    assert [p.error_code for t in resp.topics for p in t.partitions] == [
        E.unknown_topic_or_partition,
        E.unknown_topic_or_partition,
    ]
    assert join(wire, group, session=999, topic=topic).error_code == E.invalid_session_timeout
    assert join(wire, group, session=1_800_001, topic=topic).error_code == E.invalid_session_timeout


def test_rebalance_in_progress_and_commit_during_sync(wire, broker, topic):
    group = unique("rip")
    first, generation = join_fully(wire, group, topic)
    other = WireClient.for_bootstrap(broker.bootstrap)
    try:
        # a second member's JoinGroup puts the group in PreparingRebalance until the
        # first rejoins; meanwhile the first member is told to rejoin
        pending = join(other, group, topic=topic)
        assert pending.error_code == E.member_id_required
        body = join_body(group, pending.member_id, topic)
        send(other, 11, 5, body)  # no answer yet: the group waits for the first member
        assert heartbeat(wire, group, first, generation) == E.rebalance_in_progress
        sync = wire.request(
            14,
            3,
            {"group_id": group, "generation_id": generation, "member_id": first, "assignments": []},
        )
        assert sync.error_code == E.rebalance_in_progress
        rejoin = join(wire, group, first, topic=topic)
        assert rejoin.error_code == E.none and rejoin.generation_id == generation + 1
        answer = receive(other, 11, 5)
        assert answer.error_code == E.none and answer.generation_id == generation + 1
        # CompletingRebalance: commits wait for the new assignment
        assert commit(wire, group, topic, {0: 1}, first, generation + 1) == {
            0: E.rebalance_in_progress
        }
        assert fetched(wire, group, topic) == NOTHING
    finally:
        other.close()


def test_rebalance_timeout_zero_bounds_the_sync_as_kafka_3(wire, topic):
    """rebalance_timeout_ms=0 (KafkaJS's broker-level joinGroup without one): Kafka 3's
    GroupCoordinator waits for the SyncGroups of a completed join for the group's
    rebalance timeout (schedulePendingSync: DelayedSync(group.rebalanceTimeoutMs),
    KAFKA-12890), so with 0 the member is gone before its SyncGroup comes: UNKNOWN_MEMBER_ID.
    Kafka before 2.8 bounded that wait by the session timeout only. JoinGroup v0, which has
    no rebalance timeout, uses the session timeout, as Kafka (KAFKA-8653)."""
    group = unique("zero")
    resp = join(wire, group, topic=topic, rebalance_timeout=0)
    resp = join(wire, group, resp.member_id, topic=topic, rebalance_timeout=0)
    assert resp.error_code == E.none
    body = {
        "group_id": group,
        "generation_id": resp.generation_id,
        "member_id": resp.member_id,
        "assignments": [{"member_id": resp.member_id, "assignment": assignment(topic, [0])}],
    }
    assert wire.request(14, 3, body).error_code == E.unknown_member_id
    v0 = unique("zero-v0")
    resp = join(wire, v0, version=0, topic=topic)
    assert resp.error_code == E.none
    body |= {"group_id": v0, "generation_id": resp.generation_id, "member_id": resp.member_id}
    body["assignments"][0]["member_id"] = resp.member_id
    assert wire.request(14, 0, body).error_code == E.none


def send(client: WireClient, api_key: int, version: int, body: dict) -> None:
    """A request whose response is read later with ``receive``."""
    client.correlation += 1
    request = build(request_schema(api_key, version), body)
    header = RequestHeader(api_key, version, client.correlation, "wire-test")
    client.send_raw(encode_request(header, request))


def receive(client: WireClient, api_key: int, version: int):
    return parse_response(api_key, version, client.read_frame())[1]


def join_body(group, member_id, topic):
    return {
        "group_id": group,
        "session_timeout": 6000,
        "rebalance_timeout": 10000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(topic)}],
    }


def test_static_member_duplicate_is_fenced(wire, broker, topic):
    group = unique("static")
    old_member, generation = join_fully(wire, group, topic, instance="instance-1")
    other = WireClient.for_bootstrap(broker.bootstrap)
    try:
        # the same instance id again: it takes over the membership without a rebalance
        resp = join(other, group, topic=topic, instance="instance-1")
        assert resp.error_code == E.none and resp.generation_id == generation
        assert resp.member_id != old_member and resp.leader == old_member
        new_member = resp.member_id
        sync = other.request(
            14,
            3,
            {
                "group_id": group,
                "generation_id": generation,
                "member_id": new_member,
                "group_instance_id": "instance-1",
                "assignments": [],
            },
        )
        assert sync.assignment == assignment(topic, list(range(TOPIC_PARTITIONS)))
        # the old instance is fenced everywhere
        assert heartbeat(wire, group, old_member, generation, "instance-1") == E.fenced_instance_id
        assert commit(
            wire, group, topic, {0: 1}, old_member, generation, instance="instance-1"
        ) == {0: E.fenced_instance_id}
        assert join(wire, group, old_member, topic=topic, instance="instance-1").error_code == (
            E.fenced_instance_id
        )
        assert heartbeat(other, group, new_member, generation, "instance-1") == E.none
        assert fetched(wire, group, topic) == NOTHING
    finally:
        other.close()


def test_not_coordinator_on_another_broker(cluster_factory):
    cluster = cluster_factory(2, **GROUP_BROKER)
    client = WireClient.for_bootstrap(cluster.bootstrap)
    try:
        wait_until(lambda: find(client, "x").error_code == E.none, what="a coordinator")
        group = next(g for g in (f"g{i}" for i in range(100)) if find(client, g).node_id == 2)
        assert partition_for(group, 10) >= 0
        assert join(client, group).error_code == E.not_coordinator
        assert heartbeat(client, group, "m", 1) == E.not_coordinator
    finally:
        client.close()


def test_list_offsets_v0_as_sarama_tools_send_it(wire, topic):
    """Burrow's sarama sends ListOffsets v0 (max_num_offsets, old_style_offsets)."""
    from broker.protocol import list_offsets_v0 as v0

    body = struct.pack(">ii", -1, 1) + struct.pack(">h", len(topic)) + topic.encode()
    body += struct.pack(">i", 3)
    for partition, ts in ((0, -1), (1, -2), (7, -1)):
        body += struct.pack(">iqi", partition, ts, 1)
    header = struct.pack(">hhih", 2, 0, 99, 4) + b"test"
    wire.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
    frame = wire.read_frame()
    assert struct.unpack_from(">i", frame, 0)[0] == 99
    expected = v0.encode_response(
        99, [(topic, [(0, 0, [0]), (1, 0, [0]), (7, int(E.unknown_topic_or_partition), [])])]
    )
    assert frame == expected[4:]
