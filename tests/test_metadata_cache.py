"""A broker's MetadataCache under partial UpdateMetadata (Kafka's MetadataCache), and the
controller channel's merge of UpdateMetadata bodies waiting for a busy broker."""

from __future__ import annotations

from broker.controller.channel import merge_update_metadata
from broker.replica.partition import PartitionState
from broker.server.metadata_cache import MetadataCache
from broker.zk.znodes import BrokerInfo

BROKERS = {1: BrokerInfo(1, "127.0.0.1", 9092, ["PLAINTEXT://127.0.0.1:9092"])}


def _led(leader: int, replicas=(1,)) -> PartitionState:
    return PartitionState(leader, 0, list(replicas), list(replicas))


def test_partitions_not_named_are_kept_and_leader_minus_two_removes():
    cache = MetadataCache(1)
    assert cache.update(5, BROKERS, [("a", "id-a", {0: _led(1), 1: _led(1)})]) == []
    assert cache.update(5, BROKERS, [("b", "id-b", {0: _led(1)})]) == []
    assert sorted(cache.topics) == ["a", "b"]
    assert sorted(cache.topics["a"].states) == [0, 1]
    # a leader change of a:1 only: a:0 and b stay as they were
    cache.update(5, BROKERS, [("a", "id-a", {1: _led(-1)})])
    assert cache.leader_of("a", 0) == 1 and cache.leader_of("a", 1) == -1
    assert cache.leader_of("b", 0) == 1
    # b deleted: its partitions with Kafka's LeaderDuringDelete
    removed = cache.update(5, BROKERS, [("b", "id-b", {0: _led(-2, ())})])
    assert removed == [("b", 0)]
    assert sorted(cache.topics) == ["a"]


def test_a_topic_created_again_replaces_the_old_one():
    cache = MetadataCache(1)
    cache.update(5, BROKERS, [("a", "old", {0: _led(1), 1: _led(1), 2: _led(1)})])
    removed = cache.update(5, BROKERS, [("a", "new", {0: _led(1)})])
    assert sorted(removed) == [("a", 1), ("a", 2)]
    assert cache.topics["a"].topic_id == "new" and sorted(cache.topics["a"].replicas) == [0]


def test_the_first_update_of_a_newer_controller_is_its_full_picture():
    cache = MetadataCache(1)
    cache.update(5, BROKERS, [("a", "id-a", {0: _led(1)}), ("b", "id-b", {0: _led(1)})])
    removed = cache.update(6, BROKERS, [("a", "id-a", {0: _led(1)})])
    assert removed == [("b", 0)] and sorted(cache.topics) == ["a"]
    cache.update(6, BROKERS, [("c", "id-c", {0: _led(1)})])  # same epoch: partial
    assert sorted(cache.topics) == ["a", "c"]


def _body(epoch: int, topics: dict[str, dict[int, int]]) -> dict:
    return {
        "controller_id": 1,
        "controller_epoch": epoch,
        "live_brokers": [{"id": epoch}],
        "topic_states": [
            {
                "topic_name": name,
                "topic_id": name.encode(),
                "partition_states": [
                    {"partition_index": p, "leader": leader} for p, leader in parts.items()
                ],
            }
            for name, parts in topics.items()
        ],
    }


def test_waiting_update_metadata_bodies_merge_newest_state_winning():
    merged = merge_update_metadata(
        [_body(1, {"a": {0: 1, 1: 1}, "b": {0: 2}}), _body(2, {"a": {1: 3}, "b": {0: -2}})]
    )
    assert merged["live_brokers"] == [{"id": 2}] and merged["controller_epoch"] == 2
    got = {
        t["topic_name"]: {p["partition_index"]: p["leader"] for p in t["partition_states"]}
        for t in merged["topic_states"]
    }
    assert got == {"a": {0: 1, 1: 3}, "b": {0: -2}}
