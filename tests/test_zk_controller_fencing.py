"""Controller writes are fenced by /controller_epoch's version (Kafka's
expectedControllerEpochZkVersion, KAFKA-6082), on a real ZooKeeper: a controller that
another broker has replaced cannot overwrite partition states or assignments, while
the leaders' own conditional ISR writes (no fence) go on as before."""

from __future__ import annotations

import time
import uuid

import pytest
from kazoo.client import KazooClient

from broker.controller.controller import Controller
from broker.zk.client import ControllerMovedError, KafkaZkClient
from broker.zk.znodes import (
    BrokerInfo,
    ControllerEpochZNode,
    ControllerZNode,
    LeaderAndIsr,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
)


@pytest.fixture
def chroot(zookeeper):
    """A fresh chroot of the session's ZooKeeper: (connect string, raw client at the root)."""
    root = f"/fencing-{uuid.uuid4().hex[:8]}"
    raw = KazooClient(hosts=zookeeper.address, timeout=10)
    raw.start(timeout=30)
    raw.ensure_path(root)
    yield f"{zookeeper.address}{root}", raw, root
    raw.delete(root, recursive=True)
    raw.stop()
    raw.close()


def _client(connect: str) -> KafkaZkClient:
    zk = KafkaZkClient(connect)
    zk.start()
    return zk


def _topic_with_one_partition(zk: KafkaZkClient, epoch: int) -> LeaderAndIsr:
    assert zk.create_topic("orders", TopicAssignment({0: [1, 2, 3]}), {})
    zk.create_partition_states("orders", {0: LeaderAndIsr(1, 0, [1, 2, 3], epoch, 0)})
    return zk.get_partition_state("orders", 0)


def test_a_replaced_controller_cannot_overwrite_its_successors_states(chroot):
    connect, raw, root = chroot
    old, new = _client(connect), _client(connect)
    try:
        epoch, fence = old.try_become_controller(1)
        assert raw.get(f"{root}{ControllerEpochZNode.path}")[1].version == fence
        state = _topic_with_one_partition(old, epoch)
        # while it is the controller its fenced writes go through
        moved = LeaderAndIsr(2, 1, [2, 3], epoch, state.zk_version)
        version = old.update_partition_state("orders", 0, moved, fence)
        assert version == state.zk_version + 1

        # its session is gone as far as ZooKeeper knows; broker 2 is elected
        old.zk.delete(ControllerZNode.path)
        new_epoch, new_fence = new.try_become_controller(2)
        assert (new_epoch, new_fence) == (epoch + 1, fence + 1)

        before, stat = raw.get(f"{root}{TopicPartitionStateZNode.path('orders', 0)}")
        stale = LeaderAndIsr(3, 2, [3], epoch, version)  # the old one's next decision
        with pytest.raises(ControllerMovedError, match="another broker has become"):
            old.update_partition_state("orders", 0, stale, fence)
        with pytest.raises(ControllerMovedError):
            old.update_partition_states({("orders", 0): stale}, fence)
        with pytest.raises(ControllerMovedError):
            old.set_topic_assignment("orders", TopicAssignment({0: [3]}), fence)
        after, stat_after = raw.get(f"{root}{TopicPartitionStateZNode.path('orders', 0)}")
        assert (after, stat_after.version) == (before, stat.version)
        assert TopicZNode.decode(raw.get(f"{root}{TopicZNode.path('orders')}")[0]).partitions == {
            0: [1, 2, 3]
        }

        # the new controller's fence is the current version: its writes go through
        mine = LeaderAndIsr(3, 2, [3], new_epoch, version)
        assert new.update_partition_state("orders", 0, mine, new_fence) == version + 1
        # a version conflict under a good fence is a lost race (None), not a moved controller
        assert new.update_partition_states({("orders", 0): mine}, new_fence) == {
            ("orders", 0): None
        }
        # a leader's own ISR write carries no fence, only the state's version
        shrunk = LeaderAndIsr(3, 2, [3], new_epoch, version + 1)
        assert old.update_partition_state("orders", 0, shrunk) == version + 2
    finally:
        for zk in (old, new):
            zk.close()


def _wait(predicate, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.05)


def test_a_controller_that_finds_the_epoch_moved_resigns_and_writes_nothing(chroot):
    connect, raw, root = chroot
    brokers = {}
    for broker_id in (1, 2, 3):  # three registrations, each in its own session
        zk = brokers[broker_id] = _client(connect)
        port = 9000 + broker_id
        zk.register_broker(
            BrokerInfo(broker_id, "127.0.0.1", port, [f"PLAINTEXT://127.0.0.1:{port}"]), 5.0
        )
    setup = _client(connect)
    assert setup.create_topic("orders", TopicAssignment({0: [1, 2, 3]}), {})
    setup.create_partition_states("orders", {0: LeaderAndIsr(1, 0, [1, 2, 3], 0, 0)})
    controller_zk = _client(connect)
    controller = Controller(controller_zk, 9, auto_rebalance=False)
    state_path = f"{root}{TopicPartitionStateZNode.path('orders', 0)}"
    try:
        controller.start()
        _wait(lambda: controller.epoch is not None, "broker 9 becomes the controller")
        # while it is the controller, a broker leaving shrinks the ISR (a fenced write)
        brokers.pop(3).close()
        _wait(lambda: setup.get_partition_state("orders", 0).isr == [1, 2], "ISR [1, 2]")

        # another controller bumps /controller_epoch before this one notices anything
        data, _stat = raw.get(f"{root}{ControllerEpochZNode.path}")
        bumped_epoch = ControllerEpochZNode.decode(data) + 1
        raw.set(f"{root}{ControllerEpochZNode.path}", ControllerEpochZNode.encode(bumped_epoch))
        before = raw.get(state_path)
        resigned = []
        real_resign = controller._on_resign
        controller._on_resign = lambda *why: (resigned.append(why), real_resign(*why))
        brokers.pop(1).close()  # the leader leaves: broker 9 would elect broker 2
        _wait(lambda: resigned, "broker 9 resigns")
        # /controller still named it, so it deleted that: elected again with a new epoch
        # and fence, it makes the decision the refused write held. One write, under the
        # new epoch: had the refused one landed (epoch 1), the state would carry that
        _wait(lambda: (controller.epoch or 0) > bumped_epoch, "broker 9 elected again")
        _wait(lambda: setup.get_partition_state("orders", 0).leader == 2, "leader 2")
        data, stat = raw.get(state_path)
        final = TopicPartitionStateZNode.decode(data, stat.version)
        assert final.isr == [2] and final.controller_epoch == controller.epoch
        assert stat.version == before[1].version + 1
    finally:
        controller.stop()
        for zk in (controller_zk, setup, *brokers.values()):
            zk.close()
