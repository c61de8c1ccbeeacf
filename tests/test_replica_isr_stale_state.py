"""A leader's ISR never falls below the one it wrote to ZooKeeper (found by the fault
harness, issue 27: bench/faults.py seed 5, ZooKeeper minority cut off after the leader
of faults-0 was cut off from ZooKeeper).

The leader wrote ISR [1, 2, 3] (zk version 2); a same-epoch state built before that
write ([1, 2], zk version 1) then replaced it, so the leader advanced its HW with
brokers 1 and 2 only, while ZooKeeper's ISR still named broker 3; when brokers 1 and 2
lost their sessions the controller elected broker 3, which lacked acknowledged
records: 40 acks=all records were truncated away. A real ReplicaManager, Partition and
LogManager in one process; the ISR writer stands for ZooKeeper's conditional write.
The second test: a conditional write ZooKeeper refused stops the leader's ISR changes
until the controller's next state (issue 27, the zombie leader).
"""

from __future__ import annotations

import asyncio

from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.replica.fetcher import ReplicaFetcherManager
from broker.replica.manager import ReplicaManager
from broker.replica.partition import PartitionState

from .log_helpers import batch


def test_stale_same_epoch_state_does_not_shrink_the_written_isr(tmp_path) -> None:
    async def scenario() -> None:
        logs = LogManager([tmp_path / "logs"], LogConfig())
        fetchers = ReplicaFetcherManager(1, {}, lambda _broker: None)

        async def isr_writer(part, new_isr, _state) -> bool:  # ZooKeeper accepts: version 2
            part.state.isr, part.state.zk_version = list(new_isr), 2
            return True

        manager = ReplicaManager(1, logs, lambda _topic: LogConfig(), fetchers, isr_writer)
        manager.apply_state("t", 0, PartitionState(1, 1, [1, 2], [1, 2, 3], 1, zk_version=1))
        part = manager.partitions[("t", 0)]
        part.log.append_as_leader(batch(2), leader_epoch=1)
        for follower in (2, 3):  # both followers catch up: broker 3 joins the ISR
            assert manager.read_for_follower(follower, "t", 0, 2, 1000, 1).error == 0
        await asyncio.sleep(0)
        assert sorted(part.isr) == [1, 2, 3]
        # the controller's same-epoch request, built before our write, arrives late
        manager.apply_state("t", 0, PartitionState(1, 1, [1, 2], [1, 2, 3], 1, zk_version=1))
        assert sorted(part.isr) == [1, 2, 3]
        part.log.append_as_leader(batch(1), leader_epoch=1)
        assert manager.read_for_follower(2, "t", 0, 3, 1000, 1).error == 0
        # broker 3 has not fetched offset 2: the HW must wait for it
        assert part.high_watermark == 2
        logs.close()

    asyncio.run(scenario())


def test_lost_conditional_isr_write_stops_isr_changes_until_a_new_state(tmp_path) -> None:
    """ZooKeeper refused our conditional ISR write (the controller changed the state:
    we are a zombie, or about to hear of a new epoch). As Kafka's Partition.updateIsr,
    the leader proposes no ISR change again on that state, and its HW keeps counting the
    follower it could not drop, so nothing more is acknowledged; a new state from the
    controller lets it propose again."""

    async def scenario() -> None:
        logs = LogManager([tmp_path / "logs"], LogConfig())
        fetchers = ReplicaFetcherManager(1, {}, lambda _broker: None)
        proposals: list = []

        async def isr_writer(part, new_isr, _state) -> bool:  # ZooKeeper: the version moved on
            proposals.append(sorted(new_isr))
            return False

        manager = ReplicaManager(1, logs, lambda _topic: LogConfig(), fetchers, isr_writer)
        manager.apply_state("t", 0, PartitionState(1, 1, [1, 2, 3], [1, 2, 3], 1, zk_version=4))
        part = manager.partitions[("t", 0)]
        part.log.append_as_leader(batch(2), leader_epoch=1)
        assert manager.read_for_follower(2, "t", 0, 2, 1000, 1).error == 0  # 3 never fetches
        later = part.followers[2].last_caught_up_ms + 60_000
        for tick in range(5):  # the lag check, five times, 3 lagging all along
            part.followers[2].last_caught_up_ms = later + tick
            manager.shrink_lagging_isrs(1_000, now=later + tick)
            await asyncio.sleep(0)
        assert proposals == [[1, 2]]  # proposed once, refused, never again on this state
        assert sorted(part.isr) == [1, 2, 3] and part.high_watermark == 0
        manager.apply_state("t", 0, PartitionState(1, 2, [1, 2, 3], [1, 2, 3], 1, zk_version=5))
        part.followers[2].last_caught_up_ms = later + 10
        manager.shrink_lagging_isrs(1_000, now=later + 10)
        await asyncio.sleep(0)
        assert proposals == [[1, 2], [1, 2]]  # a new state: it may propose again
        logs.close()

    asyncio.run(scenario())
