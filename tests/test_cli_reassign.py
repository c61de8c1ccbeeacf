"""quill-reassign-partitions and quill-leader-election as an operator runs them, on a real
3-broker cluster: Kafka's options, JSON files and output texts, throttles set for the
moving replicas only and removed by --verify/--cancel, errors with exit code 1."""

from __future__ import annotations

import json

import pytest

from broker.zk.znodes import ConfigEntityZNode
from tests.cli_helpers import tool
from tests.ops_helpers import assignment, create_topic, described, state
from tests.wait_helpers import wait_until

pytestmark = pytest.mark.cluster

SETTINGS = {
    # a follower fetches at most ~4 one-record batches at a time, so a move throttled to
    # 2000 B/s stays in progress for the steps that look at it, however slow they run
    # (with 1 MB fetches the first one took everything and the move could finish between
    # two CLI runs on a loaded machine)
    "replica.fetch.max.bytes": "4096",
    "zookeeper.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture(scope="module")
def ops_cluster(cluster_factory):
    return cluster_factory(3, **SETTINGS)


def _plan(topic: str, moves: dict[int, list[int]]) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "replicas": r} for p, r in moves.items()
            ],
        }
    )


def _json_line(topic, parts: dict[int, list[int]]) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for p, r in sorted(parts.items())
            ],
        },
        separators=(",", ":"),
    )


def _throttles(cluster, topic):
    b = cluster.bootstrap
    rates = {(n, k): described(b, "broker", str(n), k) for n in (1, 2, 3) for k in RATES}
    lists = {k: described(b, "topic", topic, k) for k in LISTS}
    return rates, lists


def _no_throttle_left(cluster, topic) -> bool:
    """No throttle key left in ZooKeeper: /config/brokers/<id> and /config/topics/<t>."""
    zk = cluster.zk_client()

    def config(kind, name):
        path = ConfigEntityZNode.path(kind, name)
        return ConfigEntityZNode.decode(zk.get(path)[0]) if zk.exists(path) else {}

    keys = set(config("topics", topic))
    for n in (1, 2, 3):
        keys |= set(config("brokers", str(n)))
    return not keys & set(RATES + LISTS)


def test_generate_execute_verify_with_a_throttle(ops_cluster, tmp_path):
    cluster = ops_cluster
    b = cluster.bootstrap
    topic = create_topic(cluster, "cli", [[1, 2], [2, 1]], records=200, one_per_batch=True)
    assert tool("reassign_partitions", b, "--list").out == "No partition reassignments found.\n"

    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    gen = tool("reassign_partitions", b, f"--generate --topics-to-move-json-file {topics_file} "
               "--broker-list 2,3")  # fmt: skip
    assert gen.code == 0, gen.err
    lines = gen.lines
    assert lines[0] == "Current partition replica assignment"
    assert lines[1] == _json_line(topic, {0: [1, 2], 1: [2, 1]})
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = json.loads(lines[4])["partitions"]
    assert [p["partition"] for p in proposed] == [0, 1]
    assert all(sorted(p["replicas"]) == [2, 3] for p in proposed)

    plan = tmp_path / "plan.json"
    plan.write_text(_plan(topic, {0: [2, 3], 1: [3, 2]}))
    run = tool("reassign_partitions", b,
               f"--execute --reassignment-json-file {plan} --throttle 2000")  # fmt: skip
    assert run.code == 0, run.err
    assert run.out == (
        "Current partition replica assignment\n\n"
        f"{_json_line(topic, {0: [1, 2], 1: [2, 1]})}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.\n"
        "The inter-broker throttle limit was set to 2000 B/s\n"
        f"Successfully started partition reassignments for {topic}-0,{topic}-1\n"
    )
    rates, lists = _throttles(cluster, topic)
    assert set(rates.values()) == {"2000"}
    assert lists == {LISTS[0]: "0:1,0:2,1:1,1:2", LISTS[1]: "0:3,1:3"}

    again = tool("reassign_partitions", b, f"--execute --reassignment-json-file {plan}")
    assert again.code == 1
    assert "Cannot execute because there is an existing partition assignment." in again.err
    # partition 1 is empty, so its move ends once broker 3 has fetched from broker 2 and
    # joined the ISR; the follower throttle, exceeded by partition 0's batches, and a
    # loaded machine can hold that for some seconds
    wait_until(lambda: "1" not in assignment(cluster, topic)["adding_replicas"], timeout=60,
               what=f"{topic}-1's move to finish")  # fmt: skip
    assert assignment(cluster, topic)["partitions"]["1"] == [3, 2]
    listing = tool("reassign_partitions", b, "--list")
    assert listing.out == (
        f"Current partition reassignments:\n{topic}-0: replicas: 1,2,3. adding: 3. removing: 1.\n"
    )
    verify = tool("reassign_partitions", b, f"--verify --reassignment-json-file {plan}")
    assert verify.out == (
        "Status of partition reassignment:\n"
        f"Reassignment of partition {topic}-0 is still in progress.\n"
        f"Reassignment of partition {topic}-1 is completed.\n\n"
    )
    assert _throttles(cluster, topic)[1][LISTS[1]] == "0:3,1:3"  # kept while in progress

    # Kafka's way to change the throttle: resubmit with --additional
    faster = tool("reassign_partitions", b, f"--execute --additional "
                  f"--reassignment-json-file {plan} --throttle 100000000")  # fmt: skip
    assert faster.code == 0, faster.err
    wait_until(lambda: assignment(cluster, topic)["partitions"]["0"] == [2, 3], timeout=90,
               what="the move to finish")  # fmt: skip
    done = tool("reassign_partitions", b, f"--verify --reassignment-json-file {plan}")
    assert done.out == (
        "Status of partition reassignment:\n"
        f"Reassignment of partition {topic}-0 is completed.\n"
        f"Reassignment of partition {topic}-1 is completed.\n\n"
        "Clearing broker-level throttles on brokers 1,2,3\n"
        f"Clearing topic-level throttles on topic {topic}\n"
    )
    assert _no_throttle_left(cluster, topic)


def test_cancel_puts_the_replicas_back(ops_cluster, tmp_path):
    cluster = ops_cluster
    b = cluster.bootstrap
    topic = create_topic(cluster, "cli", [[2, 3]], records=200, one_per_batch=True)
    plan = tmp_path / "plan.json"
    plan.write_text(_plan(topic, {0: [1, 2]}))
    run = tool("reassign_partitions", b,
               f"--execute --reassignment-json-file {plan} --throttle 2000")  # fmt: skip
    assert run.code == 0, run.err
    assert assignment(cluster, topic)["adding_replicas"] == {"0": [1]}
    cancel = tool("reassign_partitions", b, f"--cancel --reassignment-json-file {plan}")
    assert cancel.code == 0, cancel.err
    assert cancel.out == (
        f"Successfully cancelled partition reassignment for: {topic}-0\n"
        "None of the specified partition moves are active."
        "Clearing broker-level throttles on brokers 1,2,3\n"
        f"Clearing topic-level throttles on topic {topic}\n"
    )
    after = assignment(cluster, topic)
    assert after["partitions"]["0"] == [2, 3] and after["adding_replicas"] == {}
    assert _no_throttle_left(cluster, topic)
    second = tool("reassign_partitions", b, f"--cancel --reassignment-json-file {plan} "
                  "--preserve-throttles")  # fmt: skip
    assert second.out == (
        "None of the specified partition reassignments are active.\n"
        "None of the specified partition moves are active.\n"
    )


def test_bad_plans_are_refused_and_change_nothing(ops_cluster, tmp_path):
    cluster = ops_cluster
    b = cluster.bootstrap
    topic = create_topic(cluster, "cli", [[1, 2]])
    before = assignment(cluster, topic)
    cases = {
        _plan(topic, {0: [1, 9]}): "Unknown broker id 9",
        _plan(topic, {7: [1, 2]}): f"Unable to find partition: {topic}-7",
        _plan(topic, {0: [1, 1]}): "Partition replica lists may not contain duplicate entries",
        '{"version":1,"partitions":[]}': "Partition reassignment list cannot be empty",
        "{not json": "The reassignment JSON is not valid JSON",
    }
    for text, message in cases.items():
        plan = tmp_path / "bad.json"
        plan.write_text(text)
        run = tool("reassign_partitions", b, f"--execute --reassignment-json-file {plan}")
        assert run.code == 1 and message in run.err, (text, run.err)
    assert assignment(cluster, topic) == before
    usage = tool("reassign_partitions", b, "--execute")
    assert usage.code == 1 and "--reassignment-json-file" in usage.err


def test_leader_election_tool(ops_cluster, tmp_path):
    cluster = ops_cluster
    b = cluster.bootstrap
    topic = create_topic(cluster, "cli", [[1, 2], [2, 1]])
    cluster.broker(1).stop()  # controlled shutdown: partition 0 is led by 2
    cluster.broker(1).start()
    wait_until(lambda: sorted(state(cluster, topic, 0)["isr"]) == [1, 2], what="1 back in sync")
    assert state(cluster, topic, 0)["leader"] == 2

    run = tool("leader_election", b, "--election-type preferred --all-topic-partitions")
    assert run.code == 0, run.err
    (line,) = [x for x in run.lines if x.startswith("Successfully completed")]
    assert line.startswith("Successfully completed leader election (PREFERRED) for partitions ")
    assert f"{topic}-0" in line.split("partitions ", 1)[1].split(", ")
    assert state(cluster, topic, 0)["leader"] == 1

    one = tool("leader_election", b, f"--election-type PREFERRED --topic {topic} --partition 1")
    assert one.out == f"Valid replica already elected for partitions {topic}-1\n"
    parts = tmp_path / "parts.json"
    parts.write_text(json.dumps({"partitions": [{"topic": topic, "partition": p} for p in (1, 0)]}))
    by_file = tool("leader_election", b,
                   f"--election-type UNCLEAN --path-to-json-file {parts}")  # fmt: skip
    assert by_file.out == f"Valid replica already elected for partitions {topic}-0, {topic}-1\n"

    bad = tool("leader_election", b, "--election-type PREFERRED --topic nosuch --partition 0")
    assert bad.code == 1
    assert bad.out == (
        "Error completing leader election (PREFERRED) for partition: nosuch-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Unknown partition.\n"
    )
    assert "1 replica(s) could not be elected" in bad.err
    usage = tool("leader_election", b, f"--election-type PREFERRED --topic {topic}")
    assert usage.code == 1 and "partition" in usage.err
