"""Follower fetchers: one task per leader broker, copying its partitions' logs here.

A follower first truncates its log where it may diverge from the new leader (Kafka's
OffsetForLeaderEpoch: the leader's end offset for the follower's latest epoch), then
fetches from its log end offset with the Fetch API (replica id set), appends as
follower, and takes the leader's high watermark (capped at its own LEO).

A fetch parks at the leader up to replica.fetch.wait.max.ms and names only the
partitions fetchable when it left. So a partition added meanwhile (a LeaderAndIsr)
does not wait for it: the parked fetch is dropped (with its connection, the leader's
only way to let go of it) and the next one names the partition at once. A partition
sitting out a backoff or awaiting truncation bounds the wait the fetch asks for.

With thousands of partitions a round costs what changed: each fetchable partition's
request fields are kept and updated when its log changes here (an append, a
truncation, a backoff), and the fetch session is told which ones changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..client.connection import BrokerConnection, follower_fetch_answer
from ..client.security import ClientSecurity
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.fetch_response import FollowerFetchAnswer
from .fetch_session_handler import FetchSessionHandler
from .rounds import share_due
from .throttle import UNTHROTTLED

if TYPE_CHECKING:
    from .partition import Partition

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]
FETCH_BACKOFF_S = 1.0  # Kafka's replica.fetch.backoff.ms default: a failing partition waits
#: every fetchable partition's request fields are checked against its log within this
#: long, to catch what moved without this fetcher (the log start offset, by retention)
FIELDS_REFRESH_S = 5.0
RETRY_ERRORS = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
}


@dataclass
class FetchState:
    partition: Partition
    needs_truncation: bool = True
    delayed_until: float = 0.0


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int = 0) -> None:
        self.manager = manager
        self.leader_id = leader_id
        #: Kafka's thread name, the clientId of its FetcherStats
        self.name = f"ReplicaFetcherThread-{fetcher_id}-{leader_id}"
        self.requests = 0  # Fetch requests sent (FetcherStats RequestsPerSec)
        self.partitions: dict[TopicPartition, FetchState] = {}
        #: the request fields of every fetchable partition, kept as they change (an
        #: append, a truncation, a new leader epoch), not rebuilt each round
        self.wanted: dict[TopicPartition, dict] = {}
        self.dirty: set[TopicPartition] = set()  # wanted entries changed since the last Fetch
        #: partitions awaiting truncation or sitting out a backoff (not in ``wanted``)
        self.unready: set[TopicPartition] = set()
        self.full_diff = False  # the last Fetch left throttled partitions out: compare all
        self.last_refresh = 0.0  # loop time of the last _refresh_share
        self.refresh_credit = 0.0  # wanted entries owed a check, fractional
        self.refresh_queue: list[TopicPartition] = []  # this pass's entries still to check
        self.wakeup = asyncio.Event()
        self.conn: BrokerConnection | None = None
        self.session = FetchSessionHandler()  # KIP-227: incremental fetches to this leader
        self.fetching = False  # a Fetch is out (parked at the leader, maybe)
        self.interrupted = False  # ... and a partition came meanwhile: it is being dropped
        self._closing: asyncio.Future | None = None
        self._chain: asyncio.Future | None = None  # rounds chained from the read callback
        self.task = asyncio.ensure_future(self._run())

    # -- the partition set, and each partition's request fields ----------------------------
    def add(self, key: TopicPartition, part: Partition) -> None:
        """Follow ``key`` from this leader: truncation first, then fetching."""
        self.partitions[key] = FetchState(part)
        self._set_unready(key)
        self.dirty.add(key)
        self.partition_added()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)
        self.unready.discard(key)
        self.wanted.pop(key, None)
        self.dirty.add(key)  # the session forgets it

    def clear(self) -> None:
        self.partitions.clear()
        self.wanted.clear()
        self.unready.clear()
        self.dirty.clear()

    def _fields(self, key: TopicPartition, st: FetchState) -> dict:
        """``key``'s partition in the next Fetch request."""
        log_ = st.partition.log
        epoch = log_.latest_epoch
        return {
            "partition": key[1],
            "current_leader_epoch": st.partition.leader_epoch,
            "fetch_offset": log_.log_end_offset,
            "last_fetched_epoch": -1 if epoch is None else epoch,
            "log_start_offset": log_.log_start_offset,
            "partition_max_bytes": self.manager.config["replica.fetch.max.bytes"],
        }

    def _set_ready(self, key: TopicPartition) -> None:
        self.unready.discard(key)
        self.wanted[key] = self._fields(key, self.partitions[key])
        self.dirty.add(key)

    def _set_unready(self, key: TopicPartition) -> None:
        """Truncation or a backoff first: out of the fetches (and the session) meanwhile."""
        self.unready.add(key)
        if self.wanted.pop(key, None) is not None:
            self.dirty.add(key)

    def _refresh(self, key: TopicPartition) -> None:
        """After ``key``'s log changed here (an append, a truncation, a new start)."""
        old = self.wanted.get(key)
        if old is not None:
            fields = self._fields(key, self.partitions[key])
            if fields != old:
                self.wanted[key] = fields
                self.dirty.add(key)

    def _refresh_share(self, now: float) -> None:
        """Check a share of the fetchable partitions' fields against their logs, so that
        each is looked at within FIELDS_REFRESH_S. A share each round, in turn: checking
        all of them every 5 s held the loop for up to 26 ms with the ~3,300 partitions a
        broker follows from each leader at 10,000 per broker."""
        wanted = self.wanted
        count, self.refresh_credit = share_due(
            self.refresh_credit, len(wanted), now - self.last_refresh, FIELDS_REFRESH_S
        )
        self.last_refresh = now
        queue, partitions = self.refresh_queue, self.partitions
        for _ in range(count):
            if not queue:
                queue.extend(wanted)
            key = queue.pop()
            fields = wanted.get(key)
            if fields is None:  # gone, or unready since the pass began
                continue
            log_ = partitions[key].partition.log
            if (
                fields["fetch_offset"] != log_.log_end_offset
                or fields["log_start_offset"] != log_.log_start_offset
            ):
                self._refresh(key)

    async def _connect(self) -> BrokerConnection | None:
        endpoint = self.manager.broker_endpoint(self.leader_id)
        if endpoint is None:
            return None
        conn = BrokerConnection(
            *endpoint,
            client_id=f"broker-{self.manager.broker_id}-fetcher",
            security=self.manager.security,
        )
        await conn.connect()
        return conn

    async def _run(self) -> None:
        while self.partitions:
            try:
                if self.conn is None or not self.conn.connected:
                    await self._drop_connection()
                    self.conn = await self._connect()
                    if self.conn is None:
                        await asyncio.sleep(0.2)
                        continue
                if self.unready:  # else nothing awaits truncation: no coroutine to run
                    await self._truncate_if_needed()
                if not await self._fetch_once():  # nothing to fetch, or errors: back off
                    self.wakeup.clear()
                    try:
                        await asyncio.wait_for(self.wakeup.wait(), 0.1)
                    except TimeoutError:
                        pass
            except asyncio.CancelledError:
                break
            except (ConnectionError, OSError, TimeoutError) as exc:
                if self.interrupted:  # we dropped it ourselves: fetch again at once
                    await self._drop_connection()
                    continue
                log.info("fetcher for leader %d: %s; reconnecting", self.leader_id, exc)
                await self._drop_connection()
                await asyncio.sleep(0.5)
            except Exception:
                log.exception("fetcher for leader %d failed; retrying", self.leader_id)
                await self._drop_connection()
                await asyncio.sleep(0.5)
        await self._drop_connection()

    def partition_added(self) -> None:
        """A partition joined this fetcher: fetch it now, not after the fetch parked at
        the leader returns (up to replica.fetch.wait.max.ms, while acks=all produces on
        the new partition wait for this follower)."""
        self.wakeup.set()
        if self.fetching and not self.interrupted and self.conn is not None:
            self.interrupted = True  # the request fails, and _run reconnects
            self._closing = asyncio.ensure_future(self.conn.close())

    async def _drop_connection(self) -> None:
        self.interrupted = False
        self.session.reset()  # the leader may or may not have seen the last request
        if self.conn is not None:
            await self.conn.close()
            self.conn = None

    async def _truncate_if_needed(self) -> None:
        now = asyncio.get_running_loop().time()
        todo = {}
        for key in self.unready:
            st = self.partitions[key]
            if st.needs_truncation and st.delayed_until <= now:
                todo[key] = st
        if not todo:
            return
        topics: dict[str, list[dict]] = {}
        for (topic, index), st in todo.items():
            epoch = st.partition.log.latest_epoch
            topics.setdefault(topic, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": st.partition.leader_epoch,
                    "leader_epoch": -1 if epoch is None else epoch,
                }
            )
        resp = await self.conn.request(
            23,
            4,
            {
                "replica_id": self.manager.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        for t in resp.topics:
            for p in t.partitions:
                st = self.partitions.get((t.topic, p.partition))
                if st is None:
                    continue
                if p.error_code != ErrorCode.none:
                    if p.error_code not in RETRY_ERRORS:
                        log.warning(
                            "%s-%d: OffsetForLeaderEpoch failed: %s",
                            t.topic,
                            p.partition,
                            p.error_code.name,
                        )
                    st.delayed_until = now + FETCH_BACKOFF_S  # retried after the backoff
                    continue
                self._truncate(st.partition, p.end_offset)
                st.needs_truncation = False
                self._set_ready((t.topic, p.partition))

    def _truncate(self, part: Partition, leader_end_offset: int) -> None:
        log_ = part.log
        target = log_.high_watermark if leader_end_offset < 0 else leader_end_offset
        if target < log_.log_end_offset:
            log.info(
                "%s-%d: truncating from %d to %d to match leader %d",
                part.topic,
                part.index,
                log_.log_end_offset,
                target,
                self.leader_id,
            )
            log_.truncate_to(target)

    async def _fetch_once(self) -> bool:
        """One Fetch round trip in this leader's fetch session (the leader parks it up
        to replica.fetch.wait.max.ms and answers as soon as it appends), then, while
        nothing needs this task (no truncation, no backoff, no new partition), the rounds
        after it from the read callback that brings each answer (``_chain``). True when
        the next one should go at once: any partition answered without error, or none
        had news; False when nothing is fetchable or every answer failed (then back off)."""
        fetch = self._next_fetch()
        if fetch is None:
            return False
        self.fetching = True
        self.requests += 1
        try:
            resp = await self.conn.request(
                1, 12, fetch[0], timeout_s=fetch[1], decode=follower_fetch_answer
            )
        finally:
            self.fetching = False
        healthy = self._take_answer(resp)
        if not healthy or not self._steady():
            return healthy
        loop = asyncio.get_running_loop()
        self._chain = chain = loop.create_future()
        try:
            if not self._send_chained():
                return True
            return await chain
        finally:
            self._chain = None
            self.fetching = False

    def _steady(self) -> bool:
        """Whether the next round may go from the read callback: nothing awaits
        truncation or sits out a backoff, no partition was added meanwhile, and the
        connection can send at once."""
        conn = self.conn
        return (
            not self.unready
            and bool(self.partitions)
            and not self.interrupted
            and conn is not None
            and conn.can_send_now()
        )

    def _send_chained(self) -> bool:
        fetch = self._next_fetch()
        if fetch is None:
            return False
        self.fetching = True
        self.requests += 1
        self.conn.send_now(
            1, 12, fetch[0], fetch[1], follower_fetch_answer, self._chained, self._chain_failed
        )
        return True

    def _chained(self, resp: FollowerFetchAnswer) -> None:
        """A chained round's answer, in the read callback: apply it, and send the next
        round at once while steady; else hand back to ``_run``."""
        self.fetching = False
        chain = self._chain
        if chain is None or chain.done():  # the task was cancelled meanwhile (shutdown)
            return
        try:
            healthy = self._take_answer(resp)
            if healthy and self._steady() and self._send_chained():
                return
        except Exception as exc:  # noqa: BLE001 - _run logs it and reconnects, as before
            chain.set_exception(exc)
            return
        chain.set_result(healthy)

    def _chain_failed(self, exc: BaseException) -> None:
        self.fetching = False
        chain = self._chain
        if chain is not None and not chain.done():
            chain.set_exception(exc)

    def _next_fetch(self) -> tuple[dict, float] | None:
        """The next Fetch request's body and timeout, its session fields built (the
        session expects it sent); None when nothing is fetchable."""
        now = asyncio.get_running_loop().time()
        soonest = None  # when a partition left out of this fetch becomes fetchable
        back = []  # their backoff is over
        for key in self.unready:
            st = self.partitions[key]
            if st.delayed_until > now:
                soonest = st.delayed_until if soonest is None else min(soonest, st.delayed_until)
            elif st.needs_truncation:
                soonest = now
            else:
                back.append(key)
        for key in back:
            self._set_ready(key)
        if (  # a share is due (share_due's sum, without the call while none is)
            self.refresh_credit + len(self.wanted) * (now - self.last_refresh) / FIELDS_REFRESH_S
            >= 1
        ):
            self._refresh_share(now)
        wanted: dict[TopicPartition, dict] = self.wanted
        changed: set[TopicPartition] | None = None if self.full_diff else self.dirty
        quota = self.manager.quota
        # no follower.replication.throttled.rate (the usual case): nothing to ask it
        throttled = quota is not None and quota.rate < UNTHROTTLED and quota.exceeded()
        if throttled:  # rare (a replication throttle is set): compare the whole set
            wanted = {k: f for k, f in wanted.items() if not self.manager.is_throttled(*k)}
            changed = None
        if not wanted:
            return None
        cfg = self.manager.config
        max_wait_ms = cfg["replica.fetch.wait.max.ms"]
        if soonest is not None:  # do not park past the moment it can join
            max_wait_ms = min(max_wait_ms, max(0, int((soonest - now) * 1000) + 1))
        session_fields = self.session.build(wanted, changed)
        self.dirty = set()
        self.full_diff = throttled  # the session holds the filtered set: compare all next
        body = {
            "replica_id": self.manager.broker_id,
            "max_wait": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": cfg["replica.fetch.response.max.bytes"],
            "isolation_level": 0,
            **session_fields,
            "rack_id": "",
        }
        return body, max_wait_ms / 1000.0 + 30

    def _take_answer(self, resp: FollowerFetchAnswer) -> bool:
        """Apply a Fetch answer: True when the next round should go at once."""
        if not self.session.handle_response(resp):
            log.info(
                "fetch session with leader %d refused (%s); starting a new one",
                self.leader_id,
                ErrorCode(resp.error_code).name,
            )
            return True  # the next fetch is a full one
        answered = healthy = False
        partitions = self.partitions
        for topic, index, error, hw, log_start, records in resp.partitions:
            key = (topic, index)
            st = partitions.get(key)
            if st is None:
                continue
            answered = True
            if self._apply(st, error, hw, log_start, records):
                healthy = True
                if not st.needs_truncation:
                    self._refresh(key)
                    continue
            if st.needs_truncation or (  # never delayed (0.0, the usual case): no clock read
                st.delayed_until and st.delayed_until > asyncio.get_running_loop().time()
            ):
                self._set_unready(key)
            else:
                self._refresh(key)
        return healthy or not answered  # nothing new within the max wait: fetch again

    def _apply(
        self, st: FetchState, error: ErrorCode, hw: int, log_start: int, records: bytes | None
    ) -> bool:
        """Apply one partition's answer; True when it came without error."""
        part = st.partition
        log_ = part.log
        if error == ErrorCode.offset_out_of_range:
            if log_.log_end_offset < log_start:
                log_.truncate_fully_and_start_at(log_start)
            else:
                st.needs_truncation = True
            return False
        if error != ErrorCode.none:
            if error not in RETRY_ERRORS:
                log.warning(
                    "%s-%d: fetch from leader %d failed: %s",
                    part.topic,
                    part.index,
                    self.leader_id,
                    error.name,
                )
            # as Kafka: this partition sits out for the backoff, the others fetch on
            st.delayed_until = asyncio.get_running_loop().time() + FETCH_BACKOFF_S
            return False
        if records:
            try:
                log_.append_as_follower(records)
                quota = self.manager.quota  # it records nothing without a rate
                if (
                    quota is not None
                    and quota.rate < UNTHROTTLED
                    and self.manager.is_throttled(part.topic, part.index)
                ):
                    quota.record(len(records))
            except KafkaError as exc:
                log.error("%s-%d: follower append failed: %s", part.topic, part.index, exc.message)
                st.needs_truncation = True
                return False
        hw = min(hw, log_.log_end_offset)
        if hw > log_.high_watermark:
            log_.high_watermark = hw
            part.parked.wake()  # consumers reading from this follower (KIP-392)
        if log_start > log_.log_start_offset and log_start <= log_.high_watermark:
            log_.maybe_increment_log_start_offset(log_start)
        return True


def _java_hash(text: str) -> int:
    """Java's String.hashCode (topic names are ASCII), as a signed 32-bit int."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId: Utils.abs(31 * topic.hashCode +
    partition) % num.replica.fetchers."""
    h = (31 * _java_hash(topic) + partition) & 0xFFFFFFFF
    h = h - 2**32 if h >= 2**31 else h
    return (0 if h == -(2**31) else abs(h)) % num_fetchers


class ReplicaFetcherManager:
    """``num.replica.fetchers`` fetchers (each its own connection and fetch session)
    per leader, the partitions hashed across them as Kafka's AbstractFetcherManager
    does; ``resize`` moves the partitions to a new pool at run time."""

    def __init__(
        self,
        broker_id: int,
        config,
        broker_endpoint: Callable[[int], tuple[str, int] | None],
        security: ClientSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.broker_endpoint = broker_endpoint
        self.security = security  # how to reach the leaders' inter-broker listener
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}  # (leader, fetcher id)
        self.owner: dict[TopicPartition, tuple[int, int]] = {}
        self.parts: dict[TopicPartition, Partition] = {}
        self.num_fetchers = 1
        self.closed = False  # set at shutdown: a stopping broker follows nobody
        self.quota = None  # follower.replication.throttled.rate, set by the ReplicaManager
        self.is_throttled: Callable[[str, int], bool] = lambda _t, _p: False

    def add_partition(self, key: TopicPartition, part: Partition, leader_id: int) -> None:
        self.remove_partition(key)
        if self.closed or leader_id < 0 or leader_id == self.broker_id:
            return
        slot = (leader_id, fetcher_id(key[0], key[1], self.num_fetchers))
        fetcher = self.fetchers.get(slot)
        if fetcher is None or fetcher.task.done():
            fetcher = self.fetchers[slot] = ReplicaFetcher(self, leader_id, slot[1])
        fetcher.add(key, part)
        self.owner[key] = slot
        self.parts[key] = part

    def remove_partition(self, key: TopicPartition) -> None:
        slot = self.owner.pop(key, None)
        self.parts.pop(key, None)
        if slot is None:
            return
        fetcher = self.fetchers.get(slot)
        if fetcher is not None:
            fetcher.remove(key)
            if not fetcher.partitions:
                fetcher.task.cancel()
                del self.fetchers[slot]

    def resize(self, num_fetchers: int) -> None:
        """Kafka's resizeThreadPool: every partition moves to its fetcher in the new
        pool (a partition whose fetcher id is unchanged stays where it is)."""
        if num_fetchers == self.num_fetchers:
            return
        self.num_fetchers = num_fetchers
        for key, slot in list(self.owner.items()):
            if slot[1] != fetcher_id(key[0], key[1], num_fetchers):
                self.add_partition(key, self.parts[key], slot[0])

    async def shutdown(self) -> None:
        """Stop every fetcher. Their partition sets are emptied first, so a fetcher whose
        cancellation is swallowed (asyncio.wait_for can do that) still ends its loop."""
        self.closed = True
        self.owner.clear()
        tasks = []
        for fetcher in self.fetchers.values():
            fetcher.clear()
            fetcher.task.cancel()
            tasks.append(fetcher.task)
        self.fetchers.clear()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
