"""Consumer groups of unmodified clients (librdkafka, kafka-python, aiokafka) against a
real broker: assignors, exclusive ownership, every record read, failover, and resuming
exactly at the committed offsets (also after kill -9 of the broker)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.group_helpers import (
    GROUP_BROKER,
    ConfluentMember,
    Ownership,
    all_values,
    committed_offsets,
    join_one_by_one,
    produce,
    topic_and_group,
)
from tests.wait_helpers import wait_until

PARTITIONS = 6
RECORDS = 600


@pytest.fixture(scope="module", params=[1, 3], ids=["1-broker", "3-brokers"])
def broker(cluster_factory, request):
    """One broker, and a 3-broker cluster (topics and __consumer_offsets with RF 3)."""
    return cluster_factory(request.param, **GROUP_BROKER)


def _rf(cluster) -> int:
    return len(cluster.brokers)


def _run_group(bootstrap: str, strategy: str, rf: int) -> None:
    topic, group = topic_and_group(bootstrap, strategy, PARTITIONS, rf)
    sent = produce(bootstrap, topic, RECORDS // 2, PARTITIONS)
    ownership = Ownership()
    members = [
        ConfluentMember(
            bootstrap,
            group,
            topic,
            f"m{i}",
            ownership,
            **{"partition.assignment.strategy": strategy},
        )
        for i in range(3)
    ]
    join_one_by_one(members, ownership)
    sent |= produce(bootstrap, topic, RECORDS // 2, PARTITIONS, start=RECORDS // 2)
    wait_until(lambda: all_values(members) >= sent, what="every record to be read")
    wait_until(lambda: len(ownership.owner) == PARTITIONS, what="all partitions owned")
    owned = [ownership.of(m.name) for m in members]
    for m in members:
        m.stop()
    assert ownership.violations == []
    assert all(len(o) == 2 for o in owned), owned  # 6 partitions over 3 members
    assert set().union(*owned) == set(range(PARTITIONS))
    assert not any(m.fatal for m in members)


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_librdkafka_group_assignors(broker, strategy):
    _run_group(broker.bootstrap, strategy, _rf(broker))


def test_kafka_python_group(broker):
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    topic, group = topic_and_group(broker.bootstrap, "kp", PARTITIONS, _rf(broker))
    sent = produce(broker.bootstrap, topic, RECORDS, PARTITIONS)
    ownership = Ownership()
    got: dict[str, list[bytes]] = {f"kp{i}": [] for i in range(3)}
    stop = threading.Event()

    class Listener(ConsumerRebalanceListener):
        def __init__(self, name):
            self.name = name

        def on_partitions_revoked(self, revoked):
            ownership.revoke(self.name, [tp.partition for tp in revoked])

        def on_partitions_assigned(self, assigned):
            ownership.assign(self.name, [tp.partition for tp in assigned])

    def run(name: str) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            client_id=name,
            auto_offset_reset="earliest",
            session_timeout_ms=30000,  # a loaded machine can starve a heartbeat for 6 s
            heartbeat_interval_ms=300,
        )
        consumer.subscribe([topic], listener=Listener(name))
        # kafka-python 3.0.12 loses the leader's join result when a rejoin that only
        # its metadata snapshot asked for outlasts poll()'s timeout: the leader then
        # never applies its assignment and never heartbeats again. That rejoin happens
        # when the first assignment was made before the topic's metadata arrived, so
        # each member learns the partitions before it joins.
        assert consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
        while not stop.is_set():
            for records in consumer.poll(timeout_ms=100).values():
                got[name].extend(r.value for r in records)
        consumer.close()

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in got]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: set().union(*got.values()) >= sent, what="every record to be read")
        wait_until(
            lambda: all(len(ownership.of(n)) == 2 for n in got), what="2 partitions per member"
        )
    finally:  # a failed wait must not leave consumers polling through the later tests
        stop.set()
        for t in threads:
            t.join(30)
    assert ownership.violations == []


def test_aiokafka_group(broker):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener

    topic, group = topic_and_group(broker.bootstrap, "aio", PARTITIONS, _rf(broker))
    sent = produce(broker.bootstrap, topic, RECORDS, PARTITIONS)
    ownership = Ownership()

    class Listener(ConsumerRebalanceListener):
        def __init__(self, name):
            self.name = name

        async def on_partitions_revoked(self, revoked):
            ownership.revoke(self.name, [tp.partition for tp in revoked])

        async def on_partitions_assigned(self, assigned):
            ownership.assign(self.name, [tp.partition for tp in assigned])

    async def main() -> dict[str, set]:
        got: dict[str, set] = {f"aio{i}": set() for i in range(3)}
        consumers = {}
        for name in got:
            c = AIOKafkaConsumer(
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                client_id=name,
                auto_offset_reset="earliest",
                session_timeout_ms=30000,  # a loaded machine can starve a heartbeat for 6 s
                heartbeat_interval_ms=300,
            )
            c.subscribe([topic], listener=Listener(name))
            await c.start()
            consumers[name] = c
        deadline = asyncio.get_running_loop().time() + 90
        while asyncio.get_running_loop().time() < deadline:
            for name, c in consumers.items():
                batch = await c.getmany(timeout_ms=50)
                for records in batch.values():
                    got[name].update(r.value for r in records)
            done = set().union(*got.values()) >= sent
            if done and all(len(ownership.of(n)) == 2 for n in got):
                break
        for c in consumers.values():
            await c.stop()
        return got

    got = asyncio.run(main())
    assert set().union(*got.values()) >= sent
    assert ownership.violations == []


_CRASHING_MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    bootstrap, group, topic = sys.argv[1:4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "doomed",
                  "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                  "auto.offset.reset": "earliest"})
    def on_assign(consumer, partitions):
        print("ASSIGNED", ",".join(str(p.partition) for p in partitions), flush=True)
    c.subscribe([topic], on_assign=on_assign)
    while True:
        c.poll(0.1)
    """
)


def test_killed_member_partitions_move_to_the_others(broker):
    topic, group = topic_and_group(broker.bootstrap, "kill", PARTITIONS, _rf(broker))
    ownership = Ownership()
    survivors = [
        ConfluentMember(broker.bootstrap, group, topic, f"s{i}", ownership) for i in range(2)
    ]
    for m in survivors:
        m.start()
    wait_until(lambda: len(ownership.owner) == PARTITIONS, what="the survivors to own all")
    doomed = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_MEMBER, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = ""
        while not line.startswith("ASSIGNED") or line.strip() == "ASSIGNED":
            line = doomed.stdout.readline()
            assert line, "the doomed member exited"
        doomed_parts = {int(p) for p in line.split()[1].split(",")}
        wait_until(
            lambda: not (doomed_parts & set(ownership.owner)), what="the survivors to release"
        )
        os.kill(doomed.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout tells
        doomed.wait(10)
        wait_until(lambda: len(ownership.owner) == PARTITIONS, what="the partitions to move")
        sent = produce(broker.bootstrap, topic, 60, PARTITIONS)
        wait_until(lambda: all_values(survivors) >= sent, what="the survivors to read all")
    finally:
        if doomed.poll() is None:
            doomed.kill()
        for m in survivors:
            m.stop()
    assert ownership.violations == []


def _read_some_and_commit(bootstrap: str, group: str, topic: str, count: int) -> dict[int, int]:
    """Read ``count`` records, commit synchronously, close; returns the next offsets."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    c.subscribe([topic])
    position: dict[int, int] = {}
    seen = 0
    while seen < count:
        msg = c.poll(1.0)
        if msg is None or msg.error():
            continue
        position[msg.partition()] = msg.offset() + 1
        seen += 1
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in position.items()], asynchronous=False)
    c.close()
    return position


def _first_offsets(bootstrap: str, group: str, topic: str, partitions: set[int]) -> dict[int, int]:
    """The offset of the first record a new member of ``group`` reads, per partition."""
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    c.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 60
    try:
        while not set(first) >= partitions and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                first.setdefault(msg.partition(), msg.offset())
    finally:
        c.close()
    return first


@pytest.mark.parametrize("kill_broker", [False, True], ids=["restart-group", "kill-9-broker"])
def test_group_resumes_exactly_at_committed_offsets(cluster_factory, kill_broker):
    cluster = cluster_factory(1, **GROUP_BROKER)
    bootstrap = cluster.bootstrap
    topic, group = topic_and_group(bootstrap, "resume", PARTITIONS)
    produce(bootstrap, topic, 300, PARTITIONS)
    position = _read_some_and_commit(bootstrap, group, topic, 100)
    if kill_broker:
        cluster.brokers[0].kill()
        cluster.brokers[0].start()
    produce(bootstrap, topic, 60, PARTITIONS)  # every partition has records past the commit
    assert committed_offsets(bootstrap, group, topic, PARTITIONS) == {
        p: position.get(p, -1001) for p in range(PARTITIONS)
    }
    first = _first_offsets(bootstrap, group, topic, set(range(PARTITIONS)))
    assert first == {p: position.get(p, 0) for p in range(PARTITIONS)}
