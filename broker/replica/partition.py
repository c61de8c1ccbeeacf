"""Partition: one topic-partition replica on this broker, leader or follower.

As leader it tracks every follower's log end offset (from the offsets its fetches
ask for), keeps HW = min LEO over the ISR, takes a follower into the ISR once it has
reached the HW, and proposes dropping one that has not caught up for
``replica.lag.time.max.ms``. ISR changes go to ZooKeeper with a conditional write;
the partition only believes a new ISR once ZooKeeper accepted it (Kafka's
"maximal ISR" rule: HW uses the larger of the proposed and current ISR meanwhile).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..aio import AnswerFuture
from ..log.log import Log
from ..protocol.errors import ErrorCode, KafkaError
from .expiry import ExpiryBuckets
from .selector import ReplicaView

_TIE = itertools.count()  # orders delayed produces waiting on the same offset


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ParkedFetches:
    """The futures of the fetches parked on something (a partition, or a follower's
    fetch session): ``wake`` resolves them all."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: set[asyncio.Future] = set()

    def add(self, fut: asyncio.Future) -> None:
        self._futures.add(fut)

    def discard(self, fut: asyncio.Future) -> None:
        self._futures.discard(fut)

    def wake(self) -> None:
        futures, self._futures = self._futures, set()
        for fut in futures:
            if not fut.done():
                fut.set_result(None)


def _both(first, second, flags):
    return second(first(flags))


class DelayedProduce:
    """One acks=all produce waiting on its partitions (Kafka's DelayedProduce): a
    future of one flag per partition slot, set when every slot is settled or at the
    timeout (unsettled slots: False); with ``finish``, of ``finish(flags)`` instead,
    computed on completion (one future and one loop turn fewer than chaining it). Its
    timeout is kept in ``expiry`` (shared timers, see ``expiry.py``).
    Plain slots, no closures: nothing here forms a reference cycle once it is done, so
    the garbage collector has no work with it."""

    __slots__ = ("future", "flags", "pending", "finish", "expiry", "tick")

    def __init__(
        self, slots: int, timeout_s: float, finish=None, expiry: ExpiryBuckets | None = None
    ) -> None:
        self.future = AnswerFuture(loop=asyncio.get_running_loop())
        self.flags = [False] * slots
        self.pending = slots
        self.finish = finish
        self.expiry = expiry if expiry is not None else ExpiryBuckets()
        self.tick: int | None = None
        if slots == 0:
            self._complete()
        else:
            self.tick = self.expiry.add(self, timeout_s)

    def then(self, fn) -> asyncio.Future:
        """The future, now of ``fn`` applied to what it would have held: computed in
        the same call that completes it, so whoever awaits it wakes one loop turn
        sooner than through a chained future (``network.then``)."""
        if self.future.done():
            raise RuntimeError("DelayedProduce.then after completion")
        finish = self.finish
        self.finish = fn if finish is None else partial(_both, finish, fn)
        return self.future

    def settle(self, slot: int, ok: bool, completed: list | None = None) -> None:
        """``completed``: the caller completes several and collects their futures, to
        run their ``at_once`` after the last (a connection's answers then leave in one
        write); else they run now."""
        if self.tick is None:
            return  # done already (timed out)
        self.flags[slot] = ok
        self.pending -= 1
        if self.pending == 0:
            self.expiry.discard(self, self.tick)
            self.expire(completed)

    def expire(self, completed: list | None = None) -> None:
        if self.tick is None:
            return
        self.tick = None
        if not self.future.done():
            self._complete(completed)

    def _complete(self, completed: list | None = None) -> None:
        finish, self.finish = self.finish, None
        if finish is None:
            self.future.set_result(self.flags)
        else:
            try:
                self.future.set_result(finish(self.flags))
            except Exception as exc:  # noqa: BLE001 - handed to whoever awaits the future
                self.future.set_exception(exc)
        if completed is None:
            self.future.run_at_once()  # the answer's connection sends it now
        else:
            completed.append(self.future)


@dataclass
class PartitionState:
    """What the controller decided for a partition (LeaderAndIsr in Kafka's words)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    controller_epoch: int = 0
    zk_version: int = -1


@dataclass
class FollowerState:
    """The leader's view of one follower."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1
    log_start_offset: int = -1  # as its fetches say (Fetch v5+); -1: not told
    last_sent_hw: int = -1  # the HW our last answer to it carried (Kafka's lastSentHighWatermark)


@dataclass
class Partition:
    topic: str
    index: int
    broker_id: int
    log: Log | None = None
    state: PartitionState | None = None
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending_isr: list[int] | None = None  # proposed to ZooKeeper, not yet accepted
    isr_check_due: int | None = None  # when the ReplicaManager's ISR lag check looks (ms)
    #: this broker lost its ZooKeeper session: it leads nothing (NOT_LEADER_OR_FOLLOWER)
    #: until the controller's LeaderAndIsr for its new registration says again
    fenced: bool = False
    #: the zk version of the state whose conditional ISR write lost a race: our state is
    #: stale (the controller changed it), so no ISR change is proposed until a new one comes
    stale_zk_version: int | None = None
    #: parked fetches, as Kafka's DelayedFetch completes them: a consumer's reads up to
    #: the HW and wakes when it moves; a follower's reads up to the log end and wakes on
    #: appends, not on HW moves (it hears the HW with its next data, or at its max wait)
    parked: ParkedFetches = field(default_factory=ParkedFetches)
    parked_followers: ParkedFetches = field(default_factory=ParkedFetches)
    #: a replica selector is set (KIP-392): followers serve consumers up to their HW, so
    #: a HW move wakes the parked follower fetches too, to tell them at once
    followers_hear_hw: bool = False
    #: follower id -> its fetch session where this partition rests (FetchSession.resting):
    #: the follower counts as caught up at that session's last fetch until we change
    _resting: dict[int, Any] = field(default_factory=dict)
    # delayed produces (acks=all): (offset that must fall below the HW, tie, op, slot)
    _delayed: list[tuple[int, int, DelayedProduce, int]] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.state is not None and self.state.leader == self.broker_id and not self.fenced

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state else -1

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark if self.log else 0

    @property
    def isr(self) -> list[int]:
        return list(self.state.isr) if self.state else []

    @property
    def maximal_isr(self) -> set[int]:
        isr = set(self.isr)
        if self.pending_isr is not None:
            isr |= set(self.pending_isr)
        return isr

    def require_replica(self) -> Log:
        """A consumer's fetch from v11 on (KIP-392): the leader or a follower serves it."""
        if self.state is None or self.log is None:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"broker {self.broker_id} is not a replica of {self.topic}-{self.index}",
            )
        return self.log

    def require_leader(self) -> Log:
        if not self.is_leader or self.log is None:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"broker {self.broker_id} is not the leader of {self.topic}-{self.index}",
            )
        return self.log

    def check_leader_epoch(self, epoch: int) -> None:
        """A client's current_leader_epoch against ours (KIP-320)."""
        if epoch < 0 or self.state is None:
            return
        if epoch < self.state.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch, "the client's leader epoch is stale")
        if epoch > self.state.leader_epoch:
            raise KafkaError(ErrorCode.unknown_leader_epoch, "the client's leader epoch is newer")

    # -- leadership ---------------------------------------------------------------------
    def become_leader(self, state: PartitionState, keep_followers: bool = False) -> None:
        """Lead at ``state``'s epoch. ``keep_followers``: we led the previous epoch too
        (the controller only changed the ISR), so what we know of the followers' logs
        stays, as in Kafka's Partition.makeLeader for a leader that is not new."""
        now = now_ms()
        self.state = state
        self.pending_isr = None
        kept = self.followers if keep_followers else {}
        self.followers = {
            b: kept.get(b) or FollowerState(last_caught_up_ms=now if b in state.isr else 0)
            for b in state.replicas
            if b != self.broker_id
        }
        self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
        self.maybe_advance_high_watermark()

    def append_as_leader(self, records: bytearray, headers: list, check_sequence=True) -> object:
        log = self.require_leader()
        info = log.append_as_leader(
            records, headers, self.leader_epoch, now_ms(), check_sequence=check_sequence
        )
        self.maybe_advance_high_watermark()  # consumers wake if the HW moved
        self.wake_followers()  # new data at the log end
        return info

    # -- follower tracking (leader side) ---------------------------------------------------
    def update_follower(
        self, replica_id: int, fetch_offset: int, log_start: int = -1, now: int | None = None
    ) -> bool:
        """A follower fetched from ``fetch_offset``: that is its LEO (``log_start``: its
        log start offset, -1 when not told; ``now``: the fetch's time in ms, read once
        for all its partitions). Returns True when the follower should join the ISR."""
        follower = self.followers.get(replica_id)
        if follower is None:
            if self.state is None or replica_id not in self.state.replicas:
                raise KafkaError(
                    ErrorCode.not_leader_or_follower,
                    f"broker {replica_id} is not a replica of {self.topic}-{self.index}",
                )
            follower = self.followers[replica_id] = FollowerState()
        if now is None:
            now = now_ms()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.last_fetch_leader_leo >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        moved = fetch_offset != follower.log_end_offset
        follower.log_end_offset = fetch_offset
        if log_start >= 0:
            follower.log_start_offset = log_start
        follower.last_fetch_ms = now
        follower.last_fetch_leader_leo = leo
        if moved:  # else the HW's inputs are as they were (appends and ISR changes check it)
            self.maybe_advance_high_watermark()
        # every partition of every follower fetch comes here, idle ones too: no set built
        if replica_id in self.state.isr:
            return False
        pending = self.pending_isr
        if pending is not None and replica_id in pending:
            return False
        return fetch_offset >= self.log.high_watermark and self._reached_current_epoch(fetch_offset)

    def hw_sent_to(self, replica_id: int) -> bool:
        """Our answer to follower ``replica_id`` carries our HW: True when it had not
        heard it yet."""
        follower = self.followers.get(replica_id)
        hw = self.log.high_watermark
        if follower is None or follower.last_sent_hw >= hw:
            return False
        follower.last_sent_hw = hw
        return True

    def replica_views(
        self, offset: int, live_broker: Callable[[int], Any], now: int
    ) -> tuple[ReplicaView, list[ReplicaView]]:
        """What a replica selector may choose from for a consumer at ``offset``, as
        Kafka's findPreferredReadReplica offers it: the leader (us), and the followers
        that are in the ISR, alive (``live_broker`` returns their registration) and
        hold the offset. Returns (leader, all of them)."""
        me = live_broker(self.broker_id)
        leader = ReplicaView(self.broker_id, getattr(me, "rack", None), self.log.log_end_offset, 0)
        views = [leader]
        for b in self.state.isr:
            follower = self.followers.get(b)
            if b == self.broker_id or follower is None:
                continue
            info = live_broker(b)
            if info is None or not follower.log_start_offset <= offset <= follower.log_end_offset:
                continue
            since = max(0, now - self.caught_up_ms(b, follower))
            views.append(ReplicaView(b, info.rack, follower.log_end_offset, since))
        return leader, views

    def follower_idle(
        self, replica_id: int, offset: int, epoch: int, heard_hw: int, heard_start: int, now: int
    ) -> bool:
        """An incremental fetch's partition the follower did not name (its offset has
        not moved): True when the follower, in the ISR, is at our log end and has heard
        our HW and log start offset, so the answer would carry nothing; its fetch is
        then recorded as update_follower would (it stays caught up). False: take the
        full path (read_for_follower)."""
        state, log = self.state, self.log
        if (
            state is None
            or log is None
            or state.leader != self.broker_id
            or self.fenced
            or (epoch >= 0 and epoch != state.leader_epoch)
            or replica_id not in state.isr
            or offset != log.log_end_offset
            or heard_hw != log.high_watermark
            or heard_start != log.log_start_offset
            or log.offline
        ):
            return False
        follower = self.followers.get(replica_id)
        if follower is None or follower.log_end_offset != offset:
            return False
        follower.last_caught_up_ms = now
        follower.last_fetch_ms = now
        follower.last_fetch_leader_leo = offset
        return True

    def rest(self, replica_id: int, session: Any) -> None:
        """``replica_id`` was found idle here (follower_idle): the partition rests in its
        fetch ``session`` until it changes (wake_waiters tells the session)."""
        session.rest((self.topic, self.index), self)
        self._resting[replica_id] = session

    def end_rest(self, replica_id: int, last_fetch_ms: int) -> None:
        """The rest of ``replica_id`` ended (we changed, or it named or forgot us): its
        fetches up to ``last_fetch_ms`` found it at our log end, as follower_idle would
        have recorded them."""
        follower = self.followers.get(replica_id)
        if follower is not None:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, last_fetch_ms)
            follower.last_fetch_ms = max(follower.last_fetch_ms, last_fetch_ms)
            follower.last_fetch_leader_leo = follower.log_end_offset

    def caught_up_ms(self, replica_id: int, follower: FollowerState) -> int:
        """The follower's last caught-up time, resting included: a partition resting in
        its session has not changed since it was at our log end, so every fetch of that
        session since (its last_fetch_ms) found it caught up."""
        t = follower.last_caught_up_ms
        session = self._resting.get(replica_id)
        if (
            session is not None
            and session.last_fetch_ms > t
            and session.resting.get((self.topic, self.index)) is self
        ):
            t = session.last_fetch_ms
        return t

    def _wake_resting(self) -> None:
        """We changed: every session where we rest reads us again; the caught-up time
        the rest implied is kept."""
        resting, self._resting = self._resting, {}
        key = (self.topic, self.index)
        for replica_id, session in resting.items():
            if session.resting.get(key) is self:
                self.end_rest(replica_id, session.last_fetch_ms)
                session.touched(key)

    def _reached_current_epoch(self, offset: int) -> bool:
        entry = self.log.leader_epoch_cache.latest_entry
        return entry is None or offset >= entry.start_offset

    def lagging_followers(self, max_lag_ms: int, now: int | None = None) -> list[int]:
        now = now_ms() if now is None else now
        return [
            b
            for b in self.isr
            if b != self.broker_id
            and b in self.followers
            and now - self.caught_up_ms(b, self.followers[b]) > max_lag_ms
        ]

    def oldest_caught_up_ms(self) -> int | None:
        """The earliest last caught-up time of the in-sync followers (None: no follower
        is in the ISR): none of them can lag before it + replica.lag.time.max.ms."""
        followers = self.followers
        oldest = None
        for b in self.state.isr if self.state else ():
            follower = followers.get(b)
            if b != self.broker_id and follower is not None:
                t = self.caught_up_ms(b, follower)
                if oldest is None or t < oldest:
                    oldest = t
        return oldest

    def maybe_advance_high_watermark(self) -> None:
        """HW = min LEO over the (maximal) ISR; it never moves backwards."""
        log, state, me = self.log, self.state, self.broker_id
        if log is None or state is None or state.leader != me or self.fenced:
            return
        # on every append and follower fetch: no set built for the maximal ISR (a
        # broker in both the ISR and the pending one is just looked at twice)
        hw = log.log_end_offset
        followers = self.followers
        pending = self.pending_isr
        for isr in (state.isr, pending) if pending is not None else (state.isr,):
            for b in isr:
                if b != me:
                    follower = followers.get(b)
                    leo = follower.log_end_offset if follower is not None else -1
                    if leo < hw:
                        hw = leo
        if hw > log.high_watermark:
            log.high_watermark = hw
            self.complete_delayed_produces()  # the produce answers go out first
            if self._resting:
                self._wake_resting()  # the follower has not heard this HW: not idle now
            self.parked.wake()  # consumers read up to the HW
            if self.followers_hear_hw:
                self.parked_followers.wake()  # their consumers read up to it (KIP-392)

    # -- delayed operations ------------------------------------------------------------------
    def add_delayed_produce(self, offset: int, op: DelayedProduce, slot: int) -> None:
        """acks=all: settle ``op``'s ``slot`` True once ``offset`` is below the high
        watermark, False if this replica stops leading first; at once when the offset
        is committed already."""
        if not self.is_leader or self.log is None:
            op.settle(slot, False)
        elif offset < self.log.high_watermark:
            op.settle(slot, True)
        else:
            heapq.heappush(self._delayed, (offset, next(_TIE), op, slot))

    def complete_delayed_produces(self) -> None:
        """Complete every delayed produce the high watermark has passed, in one pass:
        O(completed) with the waiting ones ordered by offset. When this replica no longer
        leads, every waiting produce completes as failed."""
        delayed = self._delayed
        if not delayed:
            return
        if not self.is_leader or self.log is None:
            self._delayed = []
            for _o, _t, op, slot in delayed:
                op.settle(slot, False)
            return
        hw = self.log.high_watermark
        completed: list = []
        while delayed and delayed[0][0] < hw:
            _o, _t, op, slot = heapq.heappop(delayed)
            op.settle(slot, True, completed)
        for future in completed:  # after the last: a producer's answers go in one write
            future.run_at_once()

    def wake_followers(self) -> None:
        """New data at our log end: followers' parked fetches wake, and the sessions
        where we rest read us again."""
        if self._resting:
            self._wake_resting()
        self.parked_followers.wake()

    def wake_waiters(self) -> None:
        """Something changed (the state, a transaction marker): every parked fetch
        wakes, and the sessions where we rest read us again."""
        self.wake_followers()
        self.parked.wake()
