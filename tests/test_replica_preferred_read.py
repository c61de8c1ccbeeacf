"""Fetch from follower (KIP-392) inside the ReplicaManager: which replica the leader
offers a consumer, what a follower serves, and how a leader with a replica selector
tells its followers a new high watermark. A real ReplicaManager, Partition and
LogManager in one process; the followers' fetches through the calls the leader's Fetch
handler makes (tests/test_fetch_from_follower.py has the same on real brokers)."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace as NS

from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.protocol.errors import ErrorCode
from broker.replica.fetcher import ReplicaFetcherManager
from broker.replica.manager import ReplicaManager
from broker.replica.partition import PartitionState
from broker.replica.selector import select_rack_aware

from .log_helpers import batch

KEY = ("t", 0)
RACKS = {1: "a", 2: "b", 3: "c"}


def _manager(tmp_path, selector=select_rack_aware, alive=(1, 2, 3)):
    logs = LogManager([tmp_path / "logs"], LogConfig())

    async def isr_writer(_part, _new_isr, _state) -> bool:
        return True

    fetchers = ReplicaFetcherManager(1, {}, lambda _broker: None)
    manager = ReplicaManager(1, logs, lambda _topic: LogConfig(), fetchers, isr_writer)
    manager.replica_selector = selector
    manager.live_broker = lambda b: NS(rack=RACKS[b]) if b in alive else None
    return manager, logs


def _leading(manager: ReplicaManager, records: int = 3) -> None:
    """Broker 1 leads t-0 with ISR [1, 2, 3]; both followers have every record."""
    manager.apply_state("t", 0, PartitionState(1, 1, [1, 2, 3], [1, 2, 3]))
    if records:
        assert manager.append("t", 0, bytes(batch(records))).error == 0
    for follower in (2, 3):
        assert manager.read_for_follower(follower, "t", 0, records, 1000, 1, 0).error == 0


def _preferred(manager: ReplicaManager, rack: str | None, offset: int = 0) -> int:
    return manager.read("t", 0, offset, 1000, client_rack=rack).preferred_read_replica


def test_the_leader_offers_the_in_sync_replica_of_the_clients_rack(tmp_path) -> None:
    async def scenario() -> None:
        manager, logs = _manager(tmp_path)
        _leading(manager)
        assert (_preferred(manager, "b"), _preferred(manager, "c")) == (2, 3)
        assert _preferred(manager, "a") == _preferred(manager, "") == -1
        assert _preferred(manager, None) == -1  # Fetch v10 and older: no client metadata
        redirected = manager.read("t", 0, 0, 1000, client_rack="b")
        assert redirected.size == 0 and redirected.high_watermark == 3
        # out of the ISR: no longer offered
        manager.apply_state("t", 0, PartitionState(1, 1, [1, 3], [1, 2, 3]))
        assert (_preferred(manager, "b"), _preferred(manager, "c")) == (-1, 3)
        assert manager.read("t", 0, 0, 1000, client_rack="b").size > 0
        logs.close()

    asyncio.run(scenario())


def test_a_replica_without_the_offset_or_not_alive_is_not_offered(tmp_path) -> None:
    async def scenario() -> None:
        manager, logs = _manager(tmp_path, alive=(1, 2))
        _leading(manager)
        assert _preferred(manager, "c") == -1  # broker 3 is not alive
        assert manager.append("t", 0, bytes(batch(2))).error == 0  # LEO 5, followers at 3
        assert _preferred(manager, "b", offset=4) == -1  # broker 2 does not have offset 4
        assert _preferred(manager, "b", offset=3) == 2
        assert manager.read_for_follower(2, "t", 0, 3, 1000, 1, log_start_offset=4).error == 0
        assert _preferred(manager, "b", offset=3) == -1  # its log starts past offset 3
        logs.close()

    asyncio.run(scenario())


def test_without_a_selector_the_leader_serves_every_rack(tmp_path) -> None:
    async def scenario() -> None:
        manager, logs = _manager(tmp_path, selector=None)
        _leading(manager)
        served = manager.read("t", 0, 0, 1000, client_rack="b")
        assert served.preferred_read_replica == -1 and served.size > 0
        logs.close()

    asyncio.run(scenario())


def test_a_follower_serves_v11_consumers_up_to_its_high_watermark(tmp_path) -> None:
    async def scenario() -> None:
        manager, logs = _manager(tmp_path)
        manager.apply_state("t", 0, PartitionState(2, 1, [1, 2, 3], [1, 2, 3]))  # 2 leads
        part = manager.partitions[KEY]
        for offset in range(3):  # replicated: three batches of one record, offsets 0-2
            replicated = batch(1)
            struct.pack_into(">q", replicated, 0, offset)  # the base offset (not in the CRC)
            part.log.append_as_follower(bytes(replicated))
        part.log.high_watermark = 2
        served = manager.read("t", 0, 0, 1000, client_rack="")
        assert served.error == ErrorCode.none and served.high_watermark == 2 and served.size > 0
        assert manager.read("t", 0, 2, 1000, client_rack="").size == 0  # past its HW: later
        assert manager.read("t", 0, 3, 1000, client_rack="").error == ErrorCode.none  # its end
        past = manager.read("t", 0, 4, 1000, client_rack="")
        assert past.error == ErrorCode.offset_out_of_range  # past its log end
        assert manager.read("t", 0, 0, 1000).error == ErrorCode.not_leader_or_follower
        logs.close()

    asyncio.run(scenario())


def test_with_a_selector_followers_hear_a_new_high_watermark_at_once(tmp_path) -> None:
    async def scenario() -> None:
        manager, logs = _manager(tmp_path)
        _leading(manager, records=0)
        part = manager.partitions[KEY]
        assert manager.append("t", 0, bytes(batch(2))).error == 0
        assert not manager.read_for_follower(2, "t", 0, 2, 1000, 1).hw_news  # HW still 0
        parked = asyncio.ensure_future(manager.wait_for_data([KEY], 30.0, follower=True))
        await asyncio.sleep(0)
        third = manager.read_for_follower(3, "t", 0, 2, 1000, 1)  # moves the HW to 2
        assert part.log.high_watermark == 2 and third.hw_news  # answered at once
        for _ in range(3):
            await asyncio.sleep(0)
        assert parked.done()  # broker 2's parked fetch wakes to carry the HW
        assert manager.read_for_follower(2, "t", 0, 2, 1000, 1).hw_news
        assert not manager.read_for_follower(2, "t", 0, 2, 1000, 1).hw_news  # told once
        logs.close()

    asyncio.run(scenario())
