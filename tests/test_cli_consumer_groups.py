"""quill-consumer-groups against a real broker: list, describe (lag), reset, delete."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.cli_helpers import tool
from tests.group_helpers import GROUP_BROKER, create_topic, produce, unique

PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1, **GROUP_BROKER)


def groups(bootstrap: str, command: str):
    return tool("consumer_groups", bootstrap, command)


def _commit(bootstrap, group, topic, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def _rows(run) -> list[list[str]]:
    lines = [line.split() for line in run.lines if line.strip()]
    header = next(i for i, cols in enumerate(lines) if cols[0] == "GROUP")
    return [cols for cols in lines[header + 1 :] if not cols[0].startswith("Group")]


@pytest.fixture
def idle_group(broker):
    topic, group = unique("cg"), unique("cg-group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, 30, PARTITIONS)  # 10 per partition
    _commit(broker.bootstrap, group, topic, {0: 4, 1: 10})
    return topic, group


def test_list_and_describe_an_idle_group(broker, idle_group):
    topic, group = idle_group
    assert group in groups(broker.bootstrap, "--list").lines
    run = groups(broker.bootstrap, f"--describe --group {group}")
    assert run.code == 0, run.err
    assert f"Consumer group '{group}' has no active members." in run.out
    assert _rows(run) == [
        [group, topic, "0", "4", "10", "6", "-", "-", "-"],
        [group, topic, "1", "10", "10", "0", "-", "-", "-"],
    ]
    assert "Group state: Empty" in run.out
    state = groups(broker.bootstrap, f"--describe --group {group} --state")
    assert _rows(state)[0][-2:] == ["Empty", "0"]


def test_describe_an_active_group_shows_members_and_lag(broker):
    topic, group = unique("cg-active"), unique("cg-active-group")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, 30, PARTITIONS)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": "lag-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    try:
        deadline = time.time() + 30
        while not c.assignment() and time.time() < deadline:
            c.poll(0.2)
        c.commit(offsets=[TopicPartition(topic, 2, 7)], asynchronous=False)
        run = groups(broker.bootstrap, f"--describe --group {group}")
        rows = {int(r[2]): r for r in _rows(run)}
        assert set(rows) == {0, 1, 2}
        assert rows[2][3:6] == ["7", "10", "3"]
        assert rows[0][3:6] == ["-", "10", "-"]  # assigned, nothing committed yet
        assert all(r[6].startswith("lag-reader-") and r[7] == "/127.0.0.1" for r in rows.values())
        assert all(r[8] == "lag-reader" for r in rows.values())
        assert "Group state: Stable" in run.out
        members = groups(broker.bootstrap, f"--describe --group {group} --members --verbose")
        assert _rows(members)[0][-1] == f"{topic}(0,1,2)"
        # resetting an active group is refused, and changes nothing
        refused = groups(
            broker.bootstrap,
            f"--reset-offsets --group {group} --topic {topic} --to-earliest --execute",
        )
        assert refused.code == 1
        assert "can only be reset if the group" in refused.err and "Stable" in refused.err
    finally:
        c.close()
    assert [r[2:4] for r in _rows(groups(broker.bootstrap, f"--describe --group {group}"))] == [
        ["2", "7"]
    ]


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("--to-earliest", {0: 0, 1: 0, 2: 0}),
        ("--to-latest", {0: 10, 1: 10, 2: 10}),
        ("--to-offset 5", {0: 5, 1: 5, 2: 5}),
        ("--to-offset 50", {0: 10, 1: 10, 2: 10}),  # clamped to the log end
        ("--shift-by -3", {0: 1, 1: 7, 2: 7}),  # from the committed offset (or the end)
        ("--shift-by -30", {0: 0, 1: 0, 2: 0}),
        ("--to-datetime 2000-01-01T00:00:00.000", {0: 0, 1: 0, 2: 0}),
        ("--by-duration P1D", {0: 0, 1: 0, 2: 0}),
        ("--to-datetime 2999-01-01T00:00:00.000", {0: 10, 1: 10, 2: 10}),
    ],
)
def test_reset_offsets_dry_run_then_execute(broker, idle_group, scenario, expected):
    topic, group = idle_group
    dry = groups(broker.bootstrap, f"--reset-offsets --group {group} --topic {topic} {scenario}")
    assert dry.code == 0, dry.err
    assert {int(r[2]): int(r[3]) for r in _rows(dry)} == expected
    unchanged = groups(broker.bootstrap, f"--describe --group {group}")
    assert {int(r[2]): r[3] for r in _rows(unchanged)} == {0: "4", 1: "10"}
    done = groups(
        broker.bootstrap, f"--reset-offsets --group {group} --topic {topic} {scenario} --execute"
    )
    assert done.code == 0, done.err
    after = groups(broker.bootstrap, f"--describe --group {group}")
    assert {int(r[2]): int(r[3]) for r in _rows(after)} == expected


def test_reset_one_partition_and_all_topics(broker, idle_group):
    topic, group = idle_group
    run = groups(
        broker.bootstrap,
        f"--reset-offsets --group {group} --topic {topic}:1 --to-offset 2 --execute",
    )
    assert [r[2:] for r in _rows(run)] == [["1", "2"]]
    run = groups(
        broker.bootstrap, f"--reset-offsets --group {group} --all-topics --to-latest --execute"
    )
    assert {int(r[2]): int(r[3]) for r in _rows(run)} == {0: 10, 1: 10}


def test_delete(broker, idle_group):
    _topic, group = idle_group
    run = groups(broker.bootstrap, f"--delete --group {group}")
    assert run.code == 0, run.err
    assert f"Deletion of requested consumer groups ('{group}') was successful." in run.out
    assert group not in groups(broker.bootstrap, "--list").lines
    again = groups(broker.bootstrap, f"--delete --group {group}")
    assert again.code == 1 and "GROUP_ID_NOT_FOUND" in again.err
