"""Fetch sessions (KIP-227): the leader remembers what a fetcher reads.

A fetcher (a follower, or a consumer that asks for it) opens a session with a full
fetch at epoch 0; the response carries the session id. Its later fetches are
incremental: they name only the partitions whose fetch offset (or limits) changed, plus
the ones to forget, and the response names only the partitions with something new
(records, an error, a moved high watermark, last stable or log start offset). With
thousands of idle partitions, a fetch round then costs the wire and the codecs next
to nothing. Epoch -1 is the old sessionless full fetch.

Kafka's rules: an unknown session id is FETCH_SESSION_ID_NOT_FOUND, an epoch other
than the one expected is INVALID_FETCH_SESSION_EPOCH (the fetcher then starts over
with a full fetch); at most ``max.incremental.fetch.session.cache.slots`` (Kafka's
default, 1000) sessions live at once (eviction below).

A follower's session also keeps the partitions that rest: found idle in an earlier
round (the follower in the ISR, at the log end, having heard everything) and untouched
since (the Partition tells the session when it appends, moves its HW or changes state).
A round skips them, and their followers count as caught up at the session's last
fetch; each is looked at again within REST_REFRESH_MS, a share of them every round (a
log start offset moved by retention tells no one).

When the cache is full, a new session makes room as Kafka's FetchSessionCache.tryEvict
decides: first a stale session (unused for more
than 120 s, Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS); otherwise the least
valuable evictable one, ordered (privileged, partition count, id), if the new one is
worth at least as much. Followers' sessions are privileged: a consumer's session never
displaces one, and a follower may displace any consumer's. Sessions younger than 120 s
cannot be displaced by a consumer's. With nothing evictable the new session is refused:
the full fetch is answered with session id 0 (sessionless).
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field
from typing import Any

from ..protocol.errors import ErrorCode
from ..replica.partition import ParkedFetches
from ..replica.rounds import share_due

FINAL_EPOCH = -1  # sessionless (or: close the session named)
INITIAL_EPOCH = 0  # a full fetch that opens a session
MAX_SESSIONS = 1000  # Kafka's max.incremental.fetch.session.cache.slots default
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (a constant there too)
TopicPartition = tuple[str, int]
REST_REFRESH_MS = 5000  # a follower's resting partitions are all looked at again this often


@dataclass(slots=True)
class SessionPartition:
    """What the session holds for one partition: the request's fields, and what the
    fetcher last heard (an incremental response repeats the partition when one moves)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -2  # -2: never answered yet
    last_stable_offset: int = -2
    log_start_offset: int = -2
    fetcher_log_start: int = -1  # the fetcher's own log start offset (Fetch v5+), as it said

    def changed(self, answer: Any) -> bool:
        """``answer`` (a PartitionData) brings something the fetcher has not heard."""
        return (
            answer.records_size > 0
            or answer.error_code != 0
            or answer.high_watermark != self.high_watermark
            or answer.last_stable_offset != self.last_stable_offset
            or answer.log_start_offset != self.log_start_offset
            or answer.preferred_read_replica >= 0  # as Kafka: always sent
        )

    def heard(self, answer: Any) -> None:
        self.high_watermark = answer.high_watermark
        self.last_stable_offset = answer.last_stable_offset
        self.log_start_offset = answer.log_start_offset


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[TopicPartition, SessionPartition] = field(default_factory=dict)
    #: a follower's idle partitions (key -> its Partition, which Partition.rest put here)
    resting: dict[TopicPartition, Any] = field(default_factory=dict)
    #: the others, in the session's order (those that returned records last): a round
    #: reads these, so it costs O(partitions not resting)
    active: dict[TopicPartition, None] = field(default_factory=dict)
    replica_id: int = -1  # the follower's broker id
    last_fetch_ms: int = 0  # the follower's latest fetch in this session
    refresh_credit: float = 0.0  # resting partitions owed a look (REST_REFRESH_MS), fractional
    parked: ParkedFetches = field(default_factory=ParkedFetches)  # its parked fetch
    privileged: bool = False  # a follower's session
    created_ms: float = 0.0
    last_used_ms: float = 0.0
    # as of the last use (Kafka's touch): its EvictableKey, and who may evict it
    key: tuple[bool, int, int] = (False, 0, 0)
    by_privileged: bool = False  # a follower's new session may evict it
    by_all: bool = False  # any new session may evict it

    def by_topic(self) -> list[tuple[str, list[SessionPartition]]]:
        """The session's partitions by topic, in the session's order, but those resting."""
        topics: dict[str, list[SessionPartition]] = {}
        partitions = self.partitions
        for key in self.active:
            topics.setdefault(key[0], []).append(partitions[key])
        return list(topics.items())

    def served(self, key: TopicPartition) -> None:
        """``key`` returned records: it goes last (as Kafka), so the next fetch's byte
        budget goes to the others first."""
        self.partitions[key] = self.partitions.pop(key)
        if key in self.active:
            self.active[key] = self.active.pop(key)

    def rest(self, key: TopicPartition, part: Any) -> None:
        """``key`` was found idle for the follower (Partition.rest): rounds skip it."""
        if key in self.partitions:
            self.resting[key] = part
            self.active.pop(key, None)

    def follower_round(self, replica_id: int, now: int) -> None:
        """Follower ``replica_id``'s incremental fetch arrived at ``now``: its resting
        partitions count as fetched (and caught up) now. Each one is looked at again
        within REST_REFRESH_MS: every round wakes the longest-resting share of them in
        proportion to the time since the last round, so with 10,000 resting partitions
        no single round reads them all (that round stalled the loop for ~100 ms)."""
        self.replica_id = replica_id
        elapsed = now - self.last_fetch_ms
        self.last_fetch_ms = now
        resting = self.resting
        count, self.refresh_credit = share_due(
            self.refresh_credit, len(resting), elapsed, REST_REFRESH_MS
        )
        if count:
            for key in list(itertools.islice(resting, count)):  # rested first, woken first
                self._leave_rest(key)

    def _leave_rest(self, key: TopicPartition) -> None:
        """The follower named or forgot ``key``: it stops resting, its follower state
        keeps the caught-up time the rest implied (the session's last fetch)."""
        part = self.resting.pop(key, None)
        if part is not None:
            part.end_rest(self.replica_id, self.last_fetch_ms)
            if key in self.partitions:
                self.active[key] = None

    def touched(self, key: TopicPartition) -> None:
        """A resting partition changed (an append, a HW move, a new state): it is read
        again, and a parked fetch of this session wakes for it."""
        if self.resting.pop(key, None) is not None and key in self.partitions:
            self.active[key] = None
        self.parked.wake()

    def update(self, req: Any) -> None:
        """Take the request's partitions (added or changed) and forget what it says."""
        for t in req.topics:
            for p in t.partitions:
                self._leave_rest((t.topic, p.partition))
                self.active[(t.topic, p.partition)] = None
                self.partitions[(t.topic, p.partition)] = SessionPartition(
                    p.partition,
                    p.fetch_offset,
                    p.partition_max_bytes,
                    getattr(p, "current_leader_epoch", -1),
                    *self._heard((t.topic, p.partition)),
                    getattr(p, "log_start_offset", -1),
                )
        for t in getattr(req, "forgotten_topics_data", ()):
            for index in t.partitions:
                self.partitions.pop((t.topic, index), None)
                self._leave_rest((t.topic, index))
                self.active.pop((t.topic, index), None)

    def _heard(self, key: TopicPartition) -> tuple[int, int, int]:
        old = self.partitions.get(key)
        if old is None:
            return (-2, -2, -2)
        return (old.high_watermark, old.last_stable_offset, old.log_start_offset)


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class FetchSessionCache:
    """The broker's fetch sessions; when full, Kafka's eviction rules (module docstring)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, eviction_ms: int = EVICTION_MS) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0  # Kafka's IncrementalFetchSessionEvictionsPerSec count

    def begin(
        self, req: Any, now_ms: float | None = None
    ) -> tuple[ErrorCode, FetchSession | None, bool]:
        """Resolve a fetch request against the cache: (error, session or None for a
        sessionless fetch, whether the request is incremental)."""
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        session_id = getattr(req, "session_id", 0)
        epoch = getattr(req, "session_epoch", FINAL_EPOCH)
        if epoch == FINAL_EPOCH:
            if session_id:
                self.sessions.pop(session_id, None)
            return ErrorCode.none, None, False
        if epoch == INITIAL_EPOCH:
            if session_id:
                self.sessions.pop(session_id, None)
            privileged = getattr(req, "replica_id", -1) >= 0
            size = sum(len(t.partitions) for t in req.topics)
            session = self._create(privileged, size, now)
            if session is not None:
                session.update(req)
                self._touch(session, now)
            return ErrorCode.none, session, False
        session = self.sessions.get(session_id)
        if session is None:
            return ErrorCode.fetch_session_id_not_found, None, True
        if epoch != session.epoch:
            return ErrorCode.invalid_fetch_session_epoch, None, True
        session.epoch = _next_epoch(epoch)
        session.update(req)
        self._touch(session, now)
        return ErrorCode.none, session, True

    def _touch(self, session: FetchSession, now: float) -> None:
        """Kafka's touch: the session was used; who may evict it from now on."""
        session.last_used_ms = now
        session.key = (session.privileged, len(session.partitions), session.id)
        old = now - session.created_ms > self.eviction_ms
        session.by_privileged = not session.privileged or old
        session.by_all = old

    def _create(self, privileged: bool, size: int, now: float) -> FetchSession | None:
        if self.max_sessions <= 0:
            return None  # as Kafka with no slots: a full fetch, session id 0
        if len(self.sessions) >= self.max_sessions and not self._try_evict(
            privileged, (privileged, size, 0), now
        ):
            return None  # nothing may make room: refused, the fetch goes sessionless
        session_id = random.randrange(1, 1 << 31)  # as Kafka: random, so not guessable
        while session_id in self.sessions:
            session_id = random.randrange(1, 1 << 31)
        session = FetchSession(session_id, _next_epoch(0), privileged=privileged, created_ms=now)
        self.sessions[session_id] = session
        return session

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: float) -> bool:
        """Kafka's FetchSessionCache.tryEvict: the least recently used session if it is
        stale, else the lowest-keyed session the newcomer may evict, if the newcomer's
        key is not lower."""
        if not self.sessions:
            return False
        lru = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - lru.last_used_ms > self.eviction_ms:
            return self._evict(lru)
        evictable = [
            s for s in self.sessions.values() if (s.by_privileged if privileged else s.by_all)
        ]
        if not evictable:
            return False
        victim = min(evictable, key=lambda s: s.key)
        if key < victim.key:
            return False
        return self._evict(victim)

    def _evict(self, session: FetchSession) -> bool:
        del self.sessions[session.id]
        self.evictions += 1
        return True
