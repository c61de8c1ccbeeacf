"""The leader's ISR lag check (replica.lag.time.max.ms) with many idle partitions.

ReplicaManager looks at a led partition only when one of its in-sync followers could
first have fallen behind (a heap of deadlines), not at every partition on every tick;
a follower's idle partitions rest in its fetch session, not visited by its rounds.
These tests drive a real ReplicaManager, Partition and LogManager in one process on
a clock given to them (the follower fetches come through the same calls the leader's
Fetch handler makes), so what they assert does not depend on the machine's speed.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS

from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.replica.fetcher import ReplicaFetcherManager
from broker.replica.manager import ReplicaManager
from broker.replica.partition import PartitionState
from broker.server.fetch_session import REST_REFRESH_MS, FetchSession

from .log_helpers import batch

MAX_LAG_MS = 10_250
PARTITIONS = 300


def _leader_of_idle_partitions(tmp_path, proposals: list) -> tuple[ReplicaManager, LogManager]:
    logs = LogManager([tmp_path / "logs"], LogConfig())

    async def isr_writer(part, new_isr, _state) -> bool:  # stands for ZooKeeper's conditional write
        proposals.append((part.topic, part.index, sorted(new_isr)))
        return True

    fetchers = ReplicaFetcherManager(1, {}, lambda _broker: None)
    manager = ReplicaManager(1, logs, lambda _topic: LogConfig(), fetchers, isr_writer)
    for i in range(PARTITIONS):
        manager.apply_state("idle", i, PartitionState(1, 1, [1, 2, 3], [1, 2, 3]))
        for follower in (2, 3):  # both followers fetched once, at the log end (0)
            assert manager.read_for_follower(follower, "idle", i, 0, 1000, 1).error == 0
    return manager, logs


def _last_caught_up(manager: ReplicaManager, follower: int) -> int:
    """The latest time ``follower`` was caught up on any idle partition: their first
    fetches ran on the wall clock, so on a loaded machine the last partition's can be
    seconds after the first's; the stall counts from the latest."""
    return max(
        manager.partitions[("idle", i)].followers[follower].last_caught_up_ms
        for i in range(PARTITIONS)
    )


def _idle_fetch(manager: ReplicaManager, follower: int, index: int, now: int, epoch=1) -> None:
    """A follower's incremental fetch passing over partition ``index`` (nothing new);
    after a new leader epoch, one real fetch first (the leader's view starts empty)."""
    if manager.partitions[("idle", index)].followers[follower].log_end_offset != 0:
        assert manager.read_for_follower(follower, "idle", index, 0, 1000, epoch).error == 0
    sp = NS(
        partition=index,
        fetch_offset=0,
        current_leader_epoch=epoch,
        high_watermark=0,
        log_start_offset=0,
    )
    assert manager.follower_idle(follower, "idle", sp, now)


def test_follower_that_stops_fetching_one_partition_leaves_only_that_isr(tmp_path) -> None:
    async def scenario() -> None:
        proposals: list = []
        manager, logs = _leader_of_idle_partitions(tmp_path, proposals)
        base = manager.partitions[("idle", 7)].followers[2].last_caught_up_ms
        shrunk_at = None
        for k in range(0, 31):  # a fetch round every 500 ms for 15 s
            now = base + 500 * k
            for i in range(PARTITIONS):
                for follower in (2, 3):
                    if (i, follower) != (7, 2):  # broker 2 no longer fetches idle-7
                        _idle_fetch(manager, follower, i, now)
            manager.shrink_lagging_isrs(MAX_LAG_MS, now)
            await asyncio.sleep(0)  # the ISR write runs
            if proposals and shrunk_at is None:
                shrunk_at = k
        # dropped at the first check past replica.lag.time.max.ms, and nothing else
        assert proposals == [("idle", 7, [1, 3])]
        assert shrunk_at == 21  # 10,500 ms > 10,250 ms; 10,000 ms was not yet
        logs.close()

    asyncio.run(scenario())


def test_a_stalled_follower_is_dropped_from_every_isr_and_a_new_leader_is_checked(
    tmp_path,
) -> None:
    async def scenario() -> None:
        proposals: list = []
        manager, logs = _leader_of_idle_partitions(tmp_path, proposals)
        base = _last_caught_up(manager, 3)
        manager.shrink_lagging_isrs(MAX_LAG_MS, base)
        for k in range(1, 25):  # broker 3 stalls entirely; broker 2 keeps fetching
            now = base + 500 * k
            for i in range(PARTITIONS):
                _idle_fetch(manager, 2, i, now)
            manager.shrink_lagging_isrs(MAX_LAG_MS, now)
            await asyncio.sleep(0)
        assert sorted(proposals) == [("idle", i, [1, 2]) for i in range(PARTITIONS)]
        # the controller's answer comes back: ISR [1, 2]; a new epoch later, [1, 2, 3] again
        for i in range(PARTITIONS):
            manager.apply_state("idle", i, PartitionState(1, 1, [1, 2], [1, 2, 3]))
            manager.apply_state("idle", i, PartitionState(1, 2, [1, 2, 3], [1, 2, 3]))
        proposals.clear()
        restart = _last_caught_up(manager, 2)
        for k in range(1, 25):  # now broker 2 stalls
            now = restart + 500 * k
            for i in range(PARTITIONS):
                _idle_fetch(manager, 3, i, now, epoch=2)
            manager.shrink_lagging_isrs(MAX_LAG_MS, now)
            await asyncio.sleep(0)
        assert sorted(proposals) == [("idle", i, [1, 3]) for i in range(PARTITIONS)]
        logs.close()

    asyncio.run(scenario())


def _follower_session(manager: ReplicaManager) -> FetchSession:
    """A follower's fetch session at the leader holding every idle partition, as its
    full fetch opened it and the leader's answer (HW 0, log start 0) left it."""
    session = FetchSession(1, 1)
    fields = dict(fetch_offset=0, partition_max_bytes=1000, current_leader_epoch=1)
    parts = [NS(partition=i, **fields) for i in range(PARTITIONS)]
    session.update(NS(topics=[NS(topic="idle", partitions=parts)], forgotten_topics_data=[]))
    for sp in session.partitions.values():
        sp.heard(NS(high_watermark=0, last_stable_offset=0, log_start_offset=0))
    return session


def _session_round(manager: ReplicaManager, follower: int, session: FetchSession, now: int) -> int:
    """What the leader's Fetch handler does for a follower's incremental fetch naming
    nothing: the partitions not resting are visited (and rest once found idle).
    Returns how many were visited."""
    session.follower_round(follower, now)
    visited = 0
    for topic, sps in session.by_topic():
        for sp in sps:
            visited += 1
            assert manager.follower_idle(follower, topic, sp, now, session)
    return visited


def test_resting_partitions_cost_nothing_per_round_and_still_shrink(tmp_path) -> None:
    """A follower's idle partitions rest in its fetch session: a round visits none of
    them, they keep the follower in their ISR, and one the follower stops fetching (it
    leaves the session) drops it from that ISR after replica.lag.time.max.ms; an append
    wakes a resting partition (it is visited again, and a parked fetch wakes)."""

    async def scenario() -> None:
        proposals: list = []
        manager, logs = _leader_of_idle_partitions(tmp_path, proposals)
        sessions = {b: _follower_session(manager) for b in (2, 3)}
        base = manager.partitions[("idle", 7)].followers[2].last_caught_up_ms
        visits = []
        shrunk_at = None
        for k in range(0, 31):
            now = base + 500 * k
            if k == 4:  # broker 2 forgets idle-7 (an incremental fetch's forgotten topics)
                forget = NS(topics=[], forgotten_topics_data=[NS(topic="idle", partitions=[7])])
                sessions[2].update(forget)
            for b, session in sessions.items():
                visits.append(_session_round(manager, b, session, now))
            manager.shrink_lagging_isrs(MAX_LAG_MS, now)
            await asyncio.sleep(0)
            if proposals and shrunk_at is None:
                shrunk_at = k
        # the first rounds visit everything; later ones only the share of the resting
        # partitions due a look (each once per REST_REFRESH_MS, oldest first), never all
        assert visits[:2] == [PARTITIONS, PARTITIONS]
        share = PARTITIONS * 500 // REST_REFRESH_MS
        assert visits[3::2] == [share] * 30  # broker 3: every round the same share
        assert all(share - 1 <= v <= share + 1 for v in visits[2::2])  # broker 2: one fewer
        # broker 2 last counted as caught up on idle-7 at round 3 (1,500 ms): dropped
        # at the first check past 1,500 + 10,250 ms, and from no other ISR
        assert proposals == [("idle", 7, [1, 3])]
        assert shrunk_at == 24  # 12,000 ms > 11,750 ms; 11,500 ms was not yet
        # an append to a resting partition: it is read again, the parked fetch wakes
        session = sessions[3]
        assert ("idle", 12) in session.resting
        parked = asyncio.ensure_future(manager.wait_for_data([], 30.0, session))
        await asyncio.sleep(0)
        assert manager.append("idle", 12, bytes(batch(1))).error == 0
        await asyncio.wait_for(parked, 5.0)
        assert ("idle", 12) not in session.resting
        assert [sp.partition for _t, sps in session.by_topic() for sp in sps] == [12]
        logs.close()

    asyncio.run(scenario())
