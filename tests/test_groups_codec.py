"""__consumer_offsets records byte for byte (Kafka's schemas, packed by hand here),
Java's String.hashCode for the group -> partition mapping, the consumer protocol, and
offset expiry (offsets.retention.minutes) on the group state machine."""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.group import codec
from broker.coordinator.group.codec import GroupRecord, MemberRecord, OffsetAndMetadata
from broker.coordinator.group.group import CommitRecord, GroupMetadata, GroupState
from broker.coordinator.group.member import MemberMetadata


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text.encode())) + text.encode()


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_offset_commit_key_and_value_are_kafkas_bytes():
    assert codec.offset_commit_key("grp", "topic", 7) == (
        struct.pack(">h", 1) + s16("grp") + s16("topic") + struct.pack(">i", 7)
    )
    om = OffsetAndMetadata(42, 5, "meta", 1700000000000)
    assert codec.offset_commit_value(om) == (
        struct.pack(">hqi", 3, 42, 5) + s16("meta") + struct.pack(">q", 1700000000000)
    )
    no_epoch = OffsetAndMetadata(42, None, "", 1)
    assert codec.offset_commit_value(no_epoch) == struct.pack(">hqi", 3, 42, -1) + s16(
        ""
    ) + struct.pack(">q", 1)
    # an explicit retention (OffsetCommit v2-v4) is written as value v1, as Kafka does
    expiring = OffsetAndMetadata(9, None, "m", 100, 200)
    assert codec.offset_commit_value(expiring) == (
        struct.pack(">hq", 1, 9) + s16("m") + struct.pack(">qq", 100, 200)
    )


def test_group_metadata_key_and_value_are_kafkas_bytes():
    assert codec.group_metadata_key("grp") == struct.pack(">h", 2) + s16("grp")
    record = GroupRecord(
        "consumer", 3, "range", "m-1", 1234,
        [MemberRecord("m-1", "inst", "client", "/10.0.0.1", 300000, 45000, b"sub", b"asg")],
    )  # fmt: skip
    expected = (
        struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 3) + s16("range") + s16("m-1")
        + struct.pack(">q", 1234) + struct.pack(">i", 1)
        + s16("m-1") + s16("inst") + s16("client") + s16("/10.0.0.1")
        + struct.pack(">ii", 300000, 45000) + b32(b"sub") + b32(b"asg")
    )  # fmt: skip
    assert codec.group_metadata_value(record) == expected
    assert codec.read_group_value(expected) == record
    empty = GroupRecord("consumer", 4, None, None, 99, [])
    assert codec.group_metadata_value(empty) == (
        struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16(None) + s16(None)
        + struct.pack(">qi", 99, 0)
    )  # fmt: skip


def test_older_value_versions_written_by_older_kafkas_are_read():
    v0 = struct.pack(">hq", 0, 10) + s16("a") + struct.pack(">q", 5)
    assert codec.read_offset_value(v0) == OffsetAndMetadata(10, None, "a", 5, None)
    v1 = struct.pack(">hq", 1, 10) + s16("a") + struct.pack(">qq", 5, 6)
    assert codec.read_offset_value(v1) == OffsetAndMetadata(10, None, "a", 5, 6)
    v2 = struct.pack(">hq", 2, 10) + s16("a") + struct.pack(">q", 5)
    assert codec.read_offset_value(v2).offset == 10
    # v4 is flexible: compact strings and tagged fields
    v4 = struct.pack(">hqi", 4, 10, 3) + bytes([2]) + b"a" + struct.pack(">q", 5) + b"\x00"
    assert codec.read_offset_value(v4) == OffsetAndMetadata(10, 3, "a", 5, None)
    group_v0 = (
        struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
        + struct.pack(">i", 1) + s16("m") + s16("c") + s16("/h") + struct.pack(">i", 10000)
        + b32(b"s") + b32(b"a")
    )  # fmt: skip
    g = codec.read_group_value(group_v0)
    assert g.members[0].rebalance_timeout == 10000 and g.members[0].group_instance_id is None
    assert codec.read_key(struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 1)) == (
        codec.OffsetKey("g", "t", 1)
    )
    assert codec.read_key(struct.pack(">h", 9) + s16("g")) is None
    with pytest.raises(codec.CodecError):
        codec.read_offset_value(struct.pack(">hq", 3, 1))  # cut short


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -(2**31)), ("日本", 835047)],
)
def test_java_string_hashcode(text, expected):
    assert codec.java_string_hash(text) == expected


def test_partition_for_is_kafkas():
    # Utils.abs(Integer.MIN_VALUE) is 0 in Kafka, not Integer.MIN_VALUE
    assert codec.partition_for("polygenelubricants", 50) == 0
    assert codec.partition_for("hello", 50) == 99162322 % 50
    assert codec.partition_for("my-group", 50) == abs(codec.java_string_hash("my-group")) % 50


def test_consumer_protocol():
    sub = struct.pack(">hi", 1, 2) + s16("a") + s16("b") + struct.pack(">i", -1) + b"more v1 fields"
    assert codec.subscription_topics(sub) == {"a", "b"}
    asg = struct.pack(">hi", 0, 1) + s16("t") + struct.pack(">iii", 2, 0, 3) + struct.pack(">i", -1)
    assert codec.assignment_partitions(asg) == [("t", [0, 3])]
    assert codec.assignment_partitions(b"") == []


# -- expiry ------------------------------------------------------------------------------------
DAY = 24 * 3600 * 1000


def _with_offsets(group: GroupMetadata, committed_at: int, **expire) -> None:
    for t in ("kept", "gone"):
        om = OffsetAndMetadata(1, None, "", committed_at, expire.get(t))
        group.offsets[(t, 0)] = CommitRecord(0, om)


def test_empty_group_offsets_expire_retention_after_it_became_empty():
    group = GroupMetadata("g")
    group.protocol_type = "consumer"
    group.current_state_timestamp = 10 * DAY
    _with_offsets(group, committed_at=0)
    assert group.remove_expired_offsets(now=16 * DAY, retention_ms=7 * DAY) == {}
    removed = group.remove_expired_offsets(now=17 * DAY, retention_ms=7 * DAY)
    assert set(removed) == {("kept", 0), ("gone", 0)} and not group.offsets


def test_offsets_only_group_expires_each_offset_from_its_commit():
    group = GroupMetadata("g")  # no protocol type: a "simple" consumer's offsets
    group.offsets[("old", 0)] = CommitRecord(0, OffsetAndMetadata(1, None, "", 0))
    group.offsets[("new", 0)] = CommitRecord(1, OffsetAndMetadata(1, None, "", 5 * DAY))
    assert set(group.remove_expired_offsets(now=8 * DAY, retention_ms=7 * DAY)) == {("old", 0)}
    assert set(group.offsets) == {("new", 0)}


def test_stable_group_keeps_subscribed_offsets_and_explicit_expiry_wins():
    group = GroupMetadata("g", GroupState.STABLE)
    group.protocol_type = "consumer"
    group.subscribed_topics = {"kept"}
    _with_offsets(group, committed_at=0)
    assert set(group.remove_expired_offsets(now=8 * DAY, retention_ms=7 * DAY)) == {("gone", 0)}
    simple = GroupMetadata("s")
    _with_offsets(simple, committed_at=0, kept=100 * DAY, gone=DAY)
    assert set(simple.remove_expired_offsets(now=2 * DAY, retention_ms=30 * DAY)) == {("gone", 0)}


def test_pending_commits_never_expire_and_protocol_selection():
    group = GroupMetadata("g")
    group.offsets[("t", 0)] = CommitRecord(0, OffsetAndMetadata(1, None, "", 0))
    group.pending_offset_commits[("t", 0)] = OffsetAndMetadata(2)
    assert group.remove_expired_offsets(now=100 * DAY, retention_ms=DAY) == {}
    # protocol selection: the protocol all support with the most first-choice votes
    for i, prefs in enumerate([["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin"]]):
        protocols = [(p, b"") for p in prefs]
        group.add(MemberMetadata(f"m{i}", None, "c", "/h", 1000, 1000, "consumer", protocols))
    assert group.candidate_protocols() == {"roundrobin"}
    assert group.select_protocol() == "roundrobin"
    group.state = GroupState.STABLE  # an Empty group accepts any protocol
    assert group.supports_protocols("consumer", {"roundrobin"})
    assert not group.supports_protocols("consumer", {"range"})
    assert not group.supports_protocols("connect", {"roundrobin"})
