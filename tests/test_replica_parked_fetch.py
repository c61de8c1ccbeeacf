"""Which parked fetch wakes on what, as Kafka's DelayedFetch completes them.

A consumer reads up to the high watermark: it wakes when the HW moves, not when data
is appended below an unmoved HW. A follower reads up to the log end: it wakes on
appends, not on HW moves (its fetch would find no new bytes and park again). A change
of the partition's state wakes both. The tests drive a real ReplicaManager, Partition
and LogManager in one process, the followers' fetches through the calls the leader's
Fetch handler makes.
"""

from __future__ import annotations

import asyncio

from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.replica.fetcher import ReplicaFetcherManager
from broker.replica.manager import ReplicaManager
from broker.replica.partition import PartitionState

from .log_helpers import batch

KEY = ("t", 0)


def _leader(tmp_path) -> tuple[ReplicaManager, LogManager]:
    logs = LogManager([tmp_path / "logs"], LogConfig())

    async def isr_writer(_part, _new_isr, _state) -> bool:
        return True

    fetchers = ReplicaFetcherManager(1, {}, lambda _broker: None)
    manager = ReplicaManager(1, logs, lambda _topic: LogConfig(), fetchers, isr_writer)
    manager.apply_state("t", 0, PartitionState(1, 1, [1, 2, 3], [1, 2, 3]))
    for follower in (2, 3):  # both followers at the log end (0)
        assert manager.read_for_follower(follower, "t", 0, 0, 1000, 1).error == 0
    return manager, logs


async def _parked(manager: ReplicaManager, *, follower: bool) -> asyncio.Task:
    task = asyncio.ensure_future(manager.wait_for_data([KEY], 30.0, follower=follower))
    await asyncio.sleep(0)  # parked now
    return task


async def _settle() -> None:
    for _ in range(3):  # a woken waiter finishes within a loop turn or two
        await asyncio.sleep(0)


def test_an_append_wakes_followers_and_a_hw_move_wakes_consumers(tmp_path) -> None:
    async def scenario() -> None:
        manager, logs = _leader(tmp_path)
        part = manager.partitions[KEY]
        consumer = await _parked(manager, follower=False)
        follower = await _parked(manager, follower=True)

        # an append below an unmoved HW (followers 2 and 3 still at 0): the follower
        # wakes for the new bytes, the consumer has nothing new to read
        assert manager.append("t", 0, bytes(batch(3))).error == 0
        assert part.log.log_end_offset == 3 and part.log.high_watermark == 0
        await _settle()
        assert follower.done()
        assert not consumer.done()

        # a follower parks again; broker 2 then 3 fetch from 3: the HW moves to 3
        follower = await _parked(manager, follower=True)
        assert manager.read_for_follower(2, "t", 0, 3, 1000, 1).error == 0
        assert part.log.high_watermark == 0
        assert manager.read_for_follower(3, "t", 0, 3, 1000, 1).error == 0
        assert part.log.high_watermark == 3
        await _settle()
        assert consumer.done()  # records 0-2 are readable now
        assert not follower.done()  # no bytes past its offset: it stays parked

        # the next append wakes it
        assert manager.append("t", 0, bytes(batch(1))).error == 0
        await _settle()
        assert follower.done()
        logs.close()

    asyncio.run(scenario())


def test_a_new_state_wakes_every_parked_fetch(tmp_path) -> None:
    async def scenario() -> None:
        manager, logs = _leader(tmp_path)
        consumer = await _parked(manager, follower=False)
        follower = await _parked(manager, follower=True)
        # a new leader epoch (another broker leads): both must look again at once
        manager.apply_state("t", 0, PartitionState(2, 2, [1, 2, 3], [1, 2, 3]))
        await _settle()
        assert consumer.done() and follower.done()
        logs.close()

    asyncio.run(scenario())


def test_an_acks_all_produce_completes_before_consumers_wake(tmp_path) -> None:
    """The HW move completes the delayed produce first, then wakes the consumers: the
    produce's answer is not queued behind their re-reads (callbacks run in the order
    their futures were set)."""

    async def scenario() -> None:
        manager, logs = _leader(tmp_path)
        part = manager.partitions[KEY]
        order: list[str] = []
        assert manager.append("t", 0, bytes(batch(2)), acks=-1).error == 0
        produce = manager.delayed_produce([("t", 0, 1)], 30.0)
        produce.future.add_done_callback(lambda _f: order.append("produce"))
        consumer = asyncio.get_running_loop().create_future()
        consumer.add_done_callback(lambda _f: order.append("consumer"))
        part.parked.add(consumer)  # as wait_for_data parks a consumer's fetch
        for follower in (2, 3):
            assert manager.read_for_follower(follower, "t", 0, 2, 1000, 1).error == 0
        await _settle()
        assert produce.future.result() == [True]
        assert order == ["produce", "consumer"]
        logs.close()

    asyncio.run(scenario())
