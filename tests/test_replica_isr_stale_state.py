"""A leader's ISR never falls below the one it wrote to ZooKeeper (found by the fault
harness, issue 27: bench/faults.py seed 5, ZooKeeper minority cut off after the leader
of faults-0 was cut off from ZooKeeper).

The leader wrote ISR [1, 2, 3] (zk version 2); a same-epoch state built before that
write ([1, 2], zk version 1) then replaced it, so the leader advanced its HW with
brokers 1 and 2 only, while ZooKeeper's ISR still named broker 3; when brokers 1 and 2
lost their sessions the controller elected broker 3, which lacked acknowledged
records: 40 acks=all records were truncated away. A real ReplicaManager, Partition and
LogManager in one process; the ISR writer stands for ZooKeeper's conditional write.
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

        async def isr_writer(part, new_isr) -> bool:  # ZooKeeper accepts: version 2
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
