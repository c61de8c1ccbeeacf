"""ReplicaManager: the partitions this broker hosts, and appends and reads on them.

It applies the controller's partition states (become leader / follower / stop), and
serves the Produce and Fetch paths: validate, append, and read slices of the log for
the socket layer to send with sendfile.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..aio import Deadlines
from ..log.config import LogConfig
from ..log.manager import LogManager
from ..protocol import records as rec
from ..protocol.errors import ErrorCode, KafkaError, RecordValidationError
from ..protocol.legacy_records import legacy_magic, up_convert
from .counts import Counts, PartitionCounts
from .expiry import ExpiryBuckets
from .fetcher import ReplicaFetcherManager
from .partition import DelayedProduce, Partition, PartitionState, now_ms
from .selector import Selector
from .throttle import ReplicationQuota, is_throttled

log = logging.getLogger(__name__)
ZSTD = 4
MANY_NEW_LOGS = 16  # new partitions in one LeaderAndIsr worth creating on threads
_TIE = itertools.count()  # orders ISR checks due at the same millisecond


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str]] | None = None  # (batch index, message): INVALID_RECORD


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    region: object = None  # a FetchSlice from the log (fd, position, size) or None
    size: int = 0
    aborted: list | None = None  # (producer id, first offset): read_committed only
    preferred_read_replica: int = -1  # KIP-392: read there instead (no records here)
    hw_news: bool = False  # a follower's fetch brings it a HW it has not heard: answer now


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        topic_config: Callable[[str], LogConfig],
        fetchers: ReplicaFetcherManager,
        isr_writer: Callable[[Partition, list[int], PartitionState], Awaitable[bool]],
        in_metadata: Callable[[str, int], bool] = lambda topic, index: False,
    ) -> None:
        self.broker_id = broker_id
        self.logs = log_manager
        self.topic_config = topic_config
        self.fetchers = fetchers
        self.isr_writer = isr_writer
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.leader_quota = ReplicationQuota()
        self.follower_quota = ReplicationQuota()
        fetchers.quota = self.follower_quota
        fetchers.is_throttled = self.follower_throttled
        self._leadership_listeners: list[Callable[[str, int, bool, int | None], None]] = []
        self.isr_changes = [0, 0]  # ISR [shrinks, expands] written to ZooKeeper
        self.in_metadata = in_metadata  # does the cluster's metadata know this partition?
        self._counts = PartitionCounts(self)
        self.produce_expiry = ExpiryBuckets()  # timeouts of waiting acks=all produces
        self._parked_deadlines = Deadlines()  # max wait of parked fetches, on one timer
        #: told when a partition comes (False) or goes (True): the heap is frozen again
        self.on_partitions_changed: Callable[[bool], None] = lambda removed: None
        #: held by LeaderAndIsr and StopReplica: the logs create_logs makes on threads
        #: must not be made again (or stopped) by the next request meanwhile
        self.state_change_lock = asyncio.Lock()
        #: the ISR lag check's deadlines, (due ms, tie, partition key): a led partition is
        #: looked at when one of its in-sync followers could first have fallen behind
        #: replica.lag.time.max.ms, not on every tick (Partition.isr_check_due: the live one)
        self._isr_checks: list[tuple[int, int, tuple[str, int]]] = []
        self._max_lag_ms: int | None = None
        #: replica.selector.class (KIP-392); None: consumers read from the leader
        self.replica_selector: Selector | None = None
        #: a live broker's registration (with its ``rack``), None when it is not alive
        self.live_broker: Callable[[int], object | None] = lambda broker_id: None

    # -- leadership listeners (the group coordinator) ---------------------------------
    def on_leadership_change(self, callback: Callable[[str, int, bool, int | None], None]) -> None:
        """``callback(topic, partition, is_leader, leader_epoch)`` after this broker becomes
        leader of a partition, or stops leading it (the epoch is None when the replica is
        stopped). A new epoch of a partition it leads already (the controller only took a
        replica out of the ISR) is no news to them, as in Kafka's ReplicaManager.makeLeaders:
        a coordinator keeps the epoch it was elected at."""
        self._leadership_listeners.append(callback)

    def _notify_leadership(self, part: Partition, was_leader: bool) -> None:
        if part.is_leader and not was_leader:
            epoch = part.leader_epoch
        elif was_leader and not part.is_leader:
            epoch = part.leader_epoch if part.state is not None else None
        else:
            return
        for callback in self._leadership_listeners:
            try:
                callback(part.topic, part.index, part.is_leader, epoch)
            except Exception:
                log.exception("leadership listener failed for %s-%d", part.topic, part.index)

    # -- partition state from the controller ------------------------------------------
    def apply_state(self, topic: str, index: int, state: PartitionState) -> None:
        """Apply a partition state from the controller (LeaderAndIsr)."""
        self._counts.changed()
        key = (topic, index)
        part = self.partitions.get(key)
        if self.broker_id not in state.replicas:
            if part is not None:  # reassigned away from this broker: its copy goes
                log.info("%s-%d: no longer a replica here; deleting the local log", topic, index)
                self.stop_replica(topic, index, delete=True)
            return
        if part is None:
            part = Partition(topic, index, self.broker_id)
            self.partitions[key] = part
            self.on_partitions_changed(False)
        part.followers_hear_hw = self.replica_selector is not None
        if part.log is None:
            part.log = self.logs.get_or_create_log(topic, index, self.topic_config(topic))
        if part.log.offline:  # Kafka answers KAFKA_STORAGE_ERROR: no leading, no following
            part.state = state
            return
        was_leader = part.is_leader
        old = part.state
        new_epoch = (
            part.fenced  # the controller speaks to our new registration: start afresh
            or old is None
            or old.leader_epoch != state.leader_epoch
            or old.leader != state.leader
        )
        part.fenced = False
        if state.leader == self.broker_id:
            self._schedule_isr_check(part, 0)  # the next tick computes its deadline
            if new_epoch:
                self.fetchers.remove_partition(key)
                part.become_leader(state, keep_followers=was_leader)
                log.info(
                    "%s-%d: leader at epoch %d (ISR %s), log end offset %d",
                    topic,
                    index,
                    state.leader_epoch,
                    state.isr,
                    part.log.log_end_offset,
                )
            elif 0 <= state.zk_version < old.zk_version:
                # older than the ISR we wrote since (a request built before our write):
                # taking it would shrink our ISR below ZooKeeper's, and the HW would then
                # move without a replica the controller may elect
                log.info(
                    "%s-%d: ignoring a state at zk version %d; ours is %d (ISR %s)",
                    topic, index, state.zk_version, old.zk_version, old.isr,
                )  # fmt: skip
            else:
                part.state = state  # an ISR change of ours (or the controller's) came back
                for gone in [b for b in part.followers if b not in state.replicas]:
                    del part.followers[gone]  # not a replica any more: its fetches are refused
                if part.pending_isr is not None and sorted(state.isr) == sorted(part.pending_isr):
                    part.pending_isr = None
                part.maybe_advance_high_watermark()
        else:
            part.state = state
            part.pending_isr = None
            part.followers.clear()
            if new_epoch:
                self.fetchers.add_partition(key, part, state.leader)
        part.wake_waiters()
        part.complete_delayed_produces()  # a follower now: every waiting produce fails
        self._notify_leadership(part, was_leader)

    def fence_leaders(self) -> int:
        """This broker lost its ZooKeeper session (its registration is gone, and the
        controller may have moved its leaderships already): stop acting as leader
        everywhere. Produce and follower fetches get NOT_LEADER_OR_FOLLOWER, waiting
        acks=all produces fail, the coordinators unload; a partition leads again once
        the controller's LeaderAndIsr (to the new registration) says so. Returns how
        many were led."""
        fenced = 0
        for part in list(self.partitions.values()):
            if not part.is_leader:
                continue
            fenced += 1
            part.fenced = True
            part.pending_isr = None
            part.wake_waiters()
            part.complete_delayed_produces()
            self._notify_leadership(part, True)
        if fenced:
            self._counts.changed()
        return fenced

    async def create_logs(self, states: dict[tuple[str, int], PartitionState]) -> None:
        """Before a LeaderAndIsr is applied: create the logs of its new partitions here
        on threads (NEW_LOG_THREADS), so that the thousands of a new topic neither take
        minutes one after the other nor hold the event loop meanwhile. apply_state then
        finds them made (and makes, alone, any this could not)."""
        new = {
            key: state
            for key, state in states.items()
            if self.broker_id in state.replicas and self.logs.get_log(*key) is None
        }
        if len(new) < MANY_NEW_LOGS:
            return
        configs = {}
        for topic in {topic for topic, _ in new}:
            try:
                configs[topic] = self.topic_config(topic)
            except KafkaError:  # apply_state reports it, partition by partition
                new = {k: s for k, s in new.items() if k[0] != topic}
        placed = self.logs.place_new_logs(list(new), configs)
        epochs = {k: s.leader_epoch for k, s in new.items() if s.leader == self.broker_id}
        opened = await asyncio.to_thread(self.logs.open_new_logs, placed, epochs)
        self.logs.add_new_logs(opened)

    def on_log_dir_offline(self, log_dir) -> list[tuple[str, int]]:
        """Stop following the partitions of a dir that went offline; returns them."""
        self._counts.changed()
        gone = [
            key
            for key, part in self.partitions.items()
            if part.log is not None and part.log.dir.parent == log_dir
        ]
        for key in gone:
            self.fetchers.remove_partition(key)
            self.partitions[key].wake_waiters()
        return gone

    def stop_replica(self, topic: str, index: int, *, delete: bool) -> None:
        self._counts.changed()
        self.fetchers.remove_partition((topic, index))
        part = self.partitions.pop((topic, index), None)
        if part is not None:
            self.on_partitions_changed(True)
            was_leader = part.is_leader
            part.state = None
            part.wake_waiters()
            part.complete_delayed_produces()
            self._notify_leadership(part, was_leader)
        if delete:
            self.logs.delete_log(topic, index)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        self._counts.changed()  # min.insync.replicas may have moved
        self.logs.update_config(topic, config)

    def get_partition(self, topic: str, index: int) -> Partition:
        part = self.partitions.get((topic, index))
        if part is None or part.state is None:
            if self.in_metadata(topic, index):  # as Kafka: a replica here may be on its way
                raise KafkaError(
                    ErrorCode.not_leader_or_follower,
                    f"broker {self.broker_id} has no state for {topic}-{index} yet",
                )
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                f"this broker does not host {topic}-{index}",
            )
        return part

    def partition_counts(self) -> Counts:
        """The ReplicaManager gauges (partition, leader, under-replicated ... counts)."""
        return self._counts.get()

    # -- produce ---------------------------------------------------------------------
    def append(
        self,
        topic: str,
        index: int,
        records: bytes | None,
        *,
        acks: int = 1,
        zstd_allowed: bool = True,
        legacy_allowed: bool = False,
        coordinator: bool = False,
    ) -> ProduceResult:
        """``legacy_allowed``: Produce v0-v2, whose message sets of magic 0/1 are
        converted up to one v2 batch first (Kafka's LogValidator)."""
        try:
            part = self.get_partition(topic, index)
            log_ = part.require_leader()
            min_isr = log_.config.min_insync_replicas
            if acks == -1 and len(part.state.isr) < min_isr:
                raise KafkaError(
                    ErrorCode.not_enough_replicas,
                    f"{topic}-{index} has {len(part.state.isr)} in-sync replicas, "
                    f"min.insync.replicas is {min_isr}",
                )
            if not records:
                raise KafkaError(ErrorCode.invalid_record, "empty record set")
            max_bytes = log_.config.max_message_bytes
            if legacy_allowed and legacy_magic(records) is not None:
                records = up_convert(records, max_message_bytes=max_bytes)
            headers = rec.validate_produce(records, max_message_bytes=max_bytes)
            if not zstd_allowed and any(h.compression == ZSTD for h in headers):
                raise KafkaError(
                    ErrorCode.unsupported_compression_type,
                    "zstd batches need Produce v7 or later",
                )
            info = part.append_as_leader(bytearray(records), headers, not coordinator)
        except KafkaError as exc:
            if exc.code not in (ErrorCode.not_leader_or_follower,):
                log.info("produce to %s-%d refused: %s", topic, index, exc.message)
            return ProduceResult(
                exc.code,
                exc.message,
                record_errors=exc.record_errors if isinstance(exc, RecordValidationError) else None,
            )
        return ProduceResult(
            base_offset=info.first_offset,
            last_offset=info.last_offset,
            log_append_time=info.log_append_time,
            log_start_offset=info.log_start_offset,
        )

    # -- fetch -------------------------------------------------------------------------
    def read(
        self,
        topic: str,
        index: int,
        offset: int,
        max_bytes: int,
        *,
        current_leader_epoch: int = -1,
        isolation_committed: bool = False,
        min_one_message: bool = True,
        client_rack: str | None = None,
    ) -> FetchResult:
        """A consumer's read, up to the HW (or the last stable offset). ``client_rack``:
        the Fetch request's rack_id from v11 on ("" when unset), None before; with it
        a follower serves the read too, up to its own HW (KIP-392), and a leader with
        a replica selector may answer with a preferred read replica instead of records."""
        try:
            part = self.get_partition(topic, index)
            log_ = part.require_leader() if client_rack is None else part.require_replica()
            part.check_leader_epoch(current_leader_epoch)
            hw = log_.high_watermark
            lso = log_.last_stable_offset
            if client_rack is not None and part.is_leader:
                preferred = self.preferred_read_replica(part, client_rack, offset)
                if preferred >= 0:  # as Kafka: no read, the offsets only
                    return FetchResult(
                        high_watermark=hw,
                        last_stable_offset=lso,
                        log_start_offset=log_.log_start_offset,
                        preferred_read_replica=preferred,
                    )
            upper = lso if isolation_committed else hw
            if offset < log_.log_start_offset or offset > log_.log_end_offset:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {offset} is outside [{log_.log_start_offset}, {log_.log_end_offset}]",
                )
            region = None
            aborted = [] if isolation_committed else None
            if max_bytes > 0 and offset < upper:
                region = log_.read(
                    offset, max_bytes, max_offset=upper, min_one_message=min_one_message
                )
            if region is not None and isolation_committed:
                found = log_.collect_aborted(offset, upper)
                aborted = [(a.producer_id, a.first_offset) for a in found]
        except KafkaError as exc:
            part = self.partitions.get((topic, index))
            lso = part.log.log_start_offset if part and part.log else -1
            hw = part.high_watermark if part and part.log else -1
            return FetchResult(exc.code, high_watermark=hw, log_start_offset=lso)
        return FetchResult(
            high_watermark=hw,
            last_stable_offset=lso,
            log_start_offset=log_.log_start_offset,
            region=region,
            size=region.size if region is not None else 0,
            aborted=aborted,
        )

    def preferred_read_replica(self, part: Partition, client_rack: str, offset: int) -> int:
        """Kafka's findPreferredReadReplica: the replica the selector picks among the
        leader and the in-sync, alive followers that hold ``offset``; -1 for the
        leader itself (or without a selector)."""
        selector = self.replica_selector
        if selector is None:
            return -1
        leader, views = part.replica_views(offset, self.live_broker, now_ms())
        chosen = selector(client_rack, leader, views)
        return -1 if chosen.broker_id == self.broker_id else chosen.broker_id

    def append_marker(
        self, topic: str, index: int, pid: int, epoch: int, coordinator_epoch: int, commit: bool
    ) -> ProduceResult:
        """WriteTxnMarkers for one partition this broker leads."""
        try:
            part = self.get_partition(topic, index)
            log_ = part.require_leader()
            info = log_.append_marker(pid, epoch, coordinator_epoch, commit, part.leader_epoch)
            part.maybe_advance_high_watermark()
            part.wake_waiters()
        except KafkaError as exc:
            log.info("marker on %s-%d refused: %s", topic, index, exc.message)
            return ProduceResult(exc.code, exc.message)
        return ProduceResult(base_offset=info.first_offset, last_offset=info.last_offset)

    def read_for_follower(
        self,
        replica_id: int,
        topic: str,
        index: int,
        offset: int,
        max_bytes: int,
        epoch: int,
        log_start_offset: int = -1,
        now: int | None = None,
    ) -> FetchResult:
        """A follower's fetch: its fetch offset is its LEO; read up to our LEO, not HW.
        ``log_start_offset``: the follower's (Fetch v5+), for the replica selector.
        With a replica selector, a fetch that brings the follower a HW it has not
        heard is answered at once (Kafka's followerNeedsHwUpdate): its consumers
        read up to that HW."""
        try:
            # every follower fetch, every partition: the usual case (we lead, the epoch
            # is ours) in attribute reads; anything else through the checks that raise
            part = self.partitions.get((topic, index))
            state = None if part is None else part.state
            log_ = None if state is None else part.log
            if log_ is None or state.leader != self.broker_id or part.fenced:
                part = self.get_partition(topic, index)
                log_ = part.require_leader()
                state = part.state
            if epoch >= 0 and epoch != state.leader_epoch:
                part.check_leader_epoch(epoch)
            start, leo = log_.log_start_offset, log_.log_end_offset
            if offset < start or offset > leo:
                # with our log start: a follower whose log ends before it starts over
                # there (Kafka's follower asks for it with ListOffsets) instead of
                # truncating and fetching from its own end again, for ever
                return FetchResult(
                    ErrorCode.offset_out_of_range,
                    high_watermark=log_.high_watermark,
                    log_start_offset=start,
                )
            if part.update_follower(replica_id, offset, log_start_offset, now):
                self._propose_isr(part, sorted(set(part.isr) | {replica_id}), "expand")
            hw_news = part.hw_sent_to(replica_id) and self.replica_selector is not None
            throttled = replica_id not in part.state.isr and is_throttled(
                log_.config.leader_replication_throttled_replicas, index, self.broker_id
            )
            if throttled and self.leader_quota.exceeded():
                max_bytes = 0  # over leader.replication.throttled.rate: send nothing this time
            region = log_.read(offset, max_bytes) if max_bytes > 0 else None
            if throttled and region is not None:
                self.leader_quota.record(region.size)
        except KafkaError as exc:
            return FetchResult(exc.code)
        hw = log_.high_watermark
        return FetchResult(
            high_watermark=hw,
            last_stable_offset=hw,
            log_start_offset=log_.log_start_offset,
            region=region,
            size=region.size if region is not None else 0,
            hw_news=hw_news,
        )

    def follower_idle(self, replica_id: int, topic: str, sp, now: int, session=None) -> bool:
        """Partition.follower_idle for a fetch session's partition ``sp`` (its fetch
        offset, leader epoch and what the follower last heard); when idle, it rests in
        the follower's ``session`` (FetchSession.resting) until the partition changes."""
        part = self.partitions.get((topic, sp.partition))
        if part is None or not part.follower_idle(
            replica_id,
            sp.fetch_offset,
            sp.current_leader_epoch,
            sp.high_watermark,
            sp.log_start_offset,
            now,
        ):
            return False
        if session is not None:
            part.rest(replica_id, session)
        return True

    def follower_throttled(self, topic: str, index: int) -> bool:
        part = self.partitions.get((topic, index))
        if part is None or part.log is None or self.broker_id in part.isr:
            return False
        return is_throttled(
            part.log.config.follower_replication_throttled_replicas, index, self.broker_id
        )

    def _propose_isr(self, part: Partition, new_isr: list[int], why: str) -> None:
        if part.pending_isr is not None or sorted(new_isr) == sorted(part.isr):
            return
        if part.stale_zk_version == part.state.zk_version:
            return  # our state is stale: wait for the controller's (Kafka's skip)
        part.pending_isr = new_isr
        log.info(
            "%s-%d: ISR %s %s -> %s (HW %d, LEO %d)",
            part.topic,
            part.index,
            why,
            part.isr,
            new_isr,
            part.log.high_watermark,
            part.log.log_end_offset,
        )
        asyncio.ensure_future(self._write_isr(part, new_isr, part.state))

    async def _write_isr(self, part: Partition, new_isr: list[int], state: PartitionState) -> None:
        """The ISR writer's conditional write of ``new_isr`` on the zk version of
        ``state``, the state it was computed from: a new state from the controller may
        replace it before this runs, and the proposal must not be written on that one
        (an ISR grown with a replica the controller had just taken away). Lost (ZooKeeper
        holds a newer state: the controller moved the leadership or changed the ISR), our
        state is stale: as Kafka's Partition.updateIsr, no ISR change is proposed again
        until a new state comes, so the HW keeps counting every replica of the ISR we
        know and nothing more is acknowledged on it meanwhile."""
        grows = len(new_isr) > len(state.isr)
        version = state.zk_version
        try:
            ok = await self.isr_writer(part, new_isr, state)
        except Exception:  # noqa: BLE001 - ZooKeeper trouble: retry on the next check
            log.exception("writing the ISR of %s-%d failed", part.topic, part.index)
            ok = None
        if ok:  # Kafka's IsrExpandsPerSec / IsrShrinksPerSec
            self.isr_changes[grows] += 1
            self._counts.changed()
        elif ok is False and part.state is not None and part.state.zk_version == version:
            part.stale_zk_version = version
        if not ok and part.pending_isr == new_isr:
            part.pending_isr = None
        part.maybe_advance_high_watermark()

    def shrink_lagging_isrs(self, max_lag_ms: int, now: int | None = None) -> None:
        """replica.lag.time.max.ms: drop followers that have not caught up in time. Only
        the partitions whose deadline came are looked at (a follower's last caught-up
        time only grows, so none can fall behind before it): O(due), not O(partitions)."""
        now = now_ms() if now is None else now
        if max_lag_ms != self._max_lag_ms:  # first call, or the config changed: all again
            self._max_lag_ms = max_lag_ms
            self._isr_checks = []
            for part in self.partitions.values():
                part.isr_check_due = None
                if part.is_leader:
                    self._schedule_isr_check(part, now)
        checks = self._isr_checks
        due = []
        while checks and checks[0][0] <= now:
            when, _tie, key = heapq.heappop(checks)
            part = self.partitions.get(key)
            if part is not None and part.isr_check_due == when:
                part.isr_check_due = None
                due.append(part)
        for part in due:
            self._check_isr(part, max_lag_ms, now)

    def _check_isr(self, part: Partition, max_lag_ms: int, now: int) -> None:
        if not part.is_leader:
            return  # becoming leader again schedules it
        if part.pending_isr is not None:  # look again once ZooKeeper has answered
            self._schedule_isr_check(part, now + 1)
            return
        lagging = part.lagging_followers(max_lag_ms, now)
        if lagging:
            self._propose_isr(part, [b for b in part.isr if b not in lagging], "shrink")
            self._schedule_isr_check(part, now + 1)
            return
        oldest = part.oldest_caught_up_ms()
        self._schedule_isr_check(
            part, now + max_lag_ms if oldest is None else oldest + max_lag_ms + 1
        )

    def _schedule_isr_check(self, part: Partition, due: int) -> None:
        """Look at ``part``'s ISR at ``due`` (ms) at the latest."""
        if part.isr_check_due is not None and part.isr_check_due <= due:
            return
        part.isr_check_due = due
        heapq.heappush(self._isr_checks, (due, next(_TIE), (part.topic, part.index)))

    async def wait_committed(self, topic: str, index: int, offset: int, timeout_s: float) -> bool:
        """Wait until ``offset`` is below the high watermark (acks=all); False on timeout
        or when this broker stops leading the partition."""
        return (await self.delayed_produce([(topic, index, offset)], timeout_s).future)[0]

    def delayed_produce(
        self, waits: list[tuple[str, int, int]], timeout_s: float, finish=None
    ) -> DelayedProduce:
        """Kafka's DelayedProduce: a future of one flag per ``(topic, partition, last
        offset)``, True once that offset is below the partition's high watermark, False
        when this broker stops leading it or ``timeout_s`` passes first (of
        ``finish(flags)`` when given). Each partition keeps its waiting produces ordered
        by offset, so moving a HW completes exactly the satisfied ones; no task, no
        polling."""
        op = DelayedProduce(len(waits), timeout_s, finish, self.produce_expiry)
        for i, (topic, index, offset) in enumerate(waits):
            part = self.partitions.get((topic, index))
            if part is None:
                op.settle(i, False)
            else:
                part.add_delayed_produce(offset, op, i)
        return op

    async def wait_for_data(
        self, keys: list[tuple[str, int]], timeout_s: float, session=None, follower=False
    ) -> None:
        """Park a fetch until any of its partitions has more for it, or the timeout:
        for a consumer, its HW moved; for a ``follower``, data was appended (or, with
        its fetch ``session``, one of its resting partitions changed). A HW move alone
        does not wake a follower, as in Kafka's DelayedFetch: its fetch would find no
        bytes and park again."""
        if timeout_s <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        waits = []
        partitions = self.partitions
        for key in keys:
            part = partitions.get(key)
            if part is not None:
                waits.append(part.parked_followers if follower else part.parked)
        if session is not None:
            waits.append(session.parked)
        for parked in waits:
            parked.add(fut)
        try:
            await self._parked_deadlines.wait(fut, timeout_s, quiet=True)
        finally:
            for parked in waits:
                parked.discard(fut)
