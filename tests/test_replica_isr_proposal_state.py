"""A leader's ISR proposal is written on the state it was computed from (stop 36's CI,
test_cluster_reassignment): a reassignment added broker 3, the leader saw 3 caught up
and proposed ISR [1, 2, 3]; the cancel (epoch 2, replicas [1, 2]) reached the leader
before its write ran, and the write, made on the new state's zk version, went through:
ZooKeeper's ISR named broker 3, no longer a replica, over the controller's decision.

Real ZooKeeper, a real KafkaZkClient, ReplicaManager, Partition and LogManager, and the
broker's own ISR writer (KafkaServer._write_isr)."""

from __future__ import annotations

import asyncio
import functools
import uuid

import pytest
from kazoo.client import KazooClient

from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.replica.fetcher import ReplicaFetcherManager
from broker.replica.manager import ReplicaManager
from broker.replica.partition import PartitionState
from broker.server.kafka_server import KafkaServer
from broker.zk.client import KafkaZkClient
from broker.zk.znodes import LeaderAndIsr, TopicAssignment


@pytest.fixture
def zk(zookeeper):
    root = f"/isr-proposal-{uuid.uuid4().hex[:8]}"
    raw = KazooClient(hosts=zookeeper.address, timeout=10)
    raw.start(timeout=30)
    raw.ensure_path(root)
    client = KafkaZkClient(f"{zookeeper.address}{root}")
    client.start()
    yield client
    client.close()
    raw.delete(root, recursive=True)
    raw.stop()
    raw.close()


class _Broker:
    """What KafkaServer._write_isr reads of its broker: the ZooKeeper client and the
    record of ISR changes told to the controller."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk
        self.changed: list[tuple[str, int]] = []
        self.isr_changes = self

    def record(self, topic: str, partition: int) -> None:
        self.changed.append((topic, partition))


def _manager(tmp_path, broker: _Broker) -> tuple[ReplicaManager, LogManager]:
    logs = LogManager([tmp_path / "logs"], LogConfig())
    fetchers = ReplicaFetcherManager(1, {}, lambda _broker: None)
    writer = functools.partial(KafkaServer._write_isr, broker)
    return ReplicaManager(1, logs, lambda _topic: LogConfig(), fetchers, writer), logs


def test_a_proposal_made_before_a_new_state_is_not_written_on_it(tmp_path, zk) -> None:
    assert zk.create_topic("orders", TopicAssignment({0: [1, 2, 3]}), {})
    zk.create_partition_states("orders", {0: LeaderAndIsr(1, 1, [1, 2], 1, 0)})
    first = zk.get_partition_state("orders", 0)
    broker = _Broker(zk)

    async def scenario() -> None:
        manager, logs = _manager(tmp_path, broker)
        try:
            manager.apply_state(
                "orders", 0, PartitionState(1, 1, [1, 2], [1, 2, 3], 1, first.zk_version)
            )
            part = manager.partitions[("orders", 0)]
            # broker 3, being added, has fetched the (empty) log: the leader proposes it
            assert manager.read_for_follower(3, "orders", 0, 0, 1000, 1).error == 0
            assert part.pending_isr == [1, 2, 3]
            # before that write runs, the controller cancels: epoch 2, replicas [1, 2]
            cancel = LeaderAndIsr(1, 2, [1, 2], 1, first.zk_version)
            version = zk.update_partition_state("orders", 0, cancel)
            assert version is not None
            manager.apply_state("orders", 0, PartitionState(1, 2, [1, 2], [1, 2], 1, version))
            for _ in range(200):  # the write runs in a thread: wait for its answer
                await asyncio.sleep(0.05)
                if part.pending_isr is None:
                    break
            assert part.pending_isr is None
            stored = zk.get_partition_state("orders", 0)
            assert (stored.leader, stored.leader_epoch, stored.isr) == (1, 2, [1, 2])
            assert stored.zk_version == version
            assert sorted(part.isr) == [1, 2] and broker.changed == []
            # on the new state the leader's own proposals still go through
            manager.apply_state("orders", 0, PartitionState(1, 2, [1], [1, 2], 1, version))
            assert manager.read_for_follower(2, "orders", 0, 0, 1000, 2).error == 0
            for _ in range(200):
                await asyncio.sleep(0.05)
                if part.pending_isr is None and broker.changed:
                    break
            assert zk.get_partition_state("orders", 0).isr == [1, 2]
            assert broker.changed == [("orders", 0)]
        finally:
            logs.close()

    asyncio.run(scenario())
