"""A partition's log: segments, offsets, appends, reads, roll, retention, truncation
(Kafka's UnifiedLog + LocalLog, without remote storage); markers, the last stable
offset and the aborted transaction index are in transactions.py and txn_index.py.

One ``Log`` per ``<topic>-<partition>`` directory. Not thread-safe: the server calls
it from its event loop. Times are milliseconds; methods that need "now" take
``now_ms`` (default: the wall clock) so tests can drive time.
"""

from __future__ import annotations

import bisect
import os
import random
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from broker.log.append import (
    LogAppendInfo,
    check_keys,
    check_timestamps,
    follower_batches,
    maybe_recompress,
    producer_batches,
    start_inside_first_batch,
)
from broker.log.checkpoint import fsync_dir
from broker.log.config import LogConfig
from broker.log.dir_failure import LogDirFailureChannel, storage_error, write_failure
from broker.log.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from broker.log.loader import list_files, load_segments, rebuild_producer_state
from broker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager
from broker.log.segment import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    DeletionQueue,
    FetchSlice,
    LogSegment,
    TimestampAndOffset,
)
from broker.log.segment import (
    now_ms as wall_clock_ms,
)
from broker.log.transactions import LogTransactions
from broker.log.txn_index import TransactionIndex
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.records import (
    BatchHeader,
    assign_offsets,
    decode_records,
    validate_produce,
)

__all__ = ["Log", "LogAppendInfo", "parse_topic_partition"]

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


_DELETE_DIR = re.compile(r"^(\S+-\d+)\.[0-9a-fA-F]+-delete$")


def is_delete_dir(name: str) -> bool:
    """A ``<topic>-<n>.<uuid>-delete`` directory (a deleted log awaiting removal)."""
    return _DELETE_DIR.match(name) is not None


def parse_topic_partition(name: str) -> tuple[str, int]:
    """``my-topic-3`` -> ("my-topic", 3); also ``my-topic-3.<uuid>-delete``."""
    doomed = _DELETE_DIR.match(name)
    if doomed:
        name = doomed.group(1)
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"Found directory {name!r}, which is not in the form topic-partition")
    return topic, int(partition)


class Log(LogTransactions):
    """The log of one partition directory."""

    def __init__(
        self,
        directory: Path | str,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        deleter: DeletionQueue | None = None,
        now_ms: int | None = None,
    ) -> None:
        self.dir = Path(directory)
        #: the log dir it is in (Kafka's parentDir); the LogManager swaps in its own Path
        #: object for that dir, so that grouping 10,000 logs by dir costs no Path work
        self.parent_dir: Path = self.dir.parent
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self.config = config
        self._owns_deleter = deleter is None
        self.deleter = deleter if deleter is not None else DeletionQueue()
        now = wall_clock_ms() if now_ms is None else now_ms
        self.dir.mkdir(parents=True, exist_ok=True)
        names = list_files(self.dir)  # one listing serves every loading step
        self.leader_epoch_cache = LeaderEpochFileCache(self.dir / LEADER_EPOCH_CHECKPOINT)
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms, names)
        loaded = load_segments(
            self.dir,
            config,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            epoch_cache=self.leader_epoch_cache,
            producer_state=self.producer_state,
            now_ms=now,
            file_names=names,
        )
        self.segments: list[LogSegment] = loaded.segments
        self._bases = [s.base_offset for s in self.segments]
        for seg in self.segments:
            seg.roll_jitter_ms = self._roll_jitter()
        # plain attributes, written only by this class: read on every fetch and append,
        # where the two properties were ~30 of the ~335 calls a record cost follower fetches
        self.log_start_offset: int = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        self.log_end_offset: int = loaded.next_offset
        self._hw = self.log_start_offset
        self._hw_position: tuple[int, int] | None = None  # (segment base, position) of HW
        self.high_watermark = self.log_start_offset if high_watermark is None else high_watermark
        self.last_flush_ms = now
        self._pending_flush_offset: int | None = None
        self.txn_index = TransactionIndex(self.dir, loaded.file_names)
        self.txn_index.truncate_to(self.log_end_offset)
        self.closed = False

    #: set by LogManager: a failed write or fsync takes this log's dir offline through it
    failure_channel: LogDirFailureChannel | None = None
    #: set by LogManager: told of every roll, so its periodic flush visits only these logs
    roll_listener: Callable[[Log], None] | None = None

    @property
    def offline(self) -> bool:
        # checked on every append and read: while no dir is offline (the usual case) it
        # costs no Path (dir.parent and its hash were 6 % of an acks=all broker's time)
        channel = self.failure_channel
        return channel is not None and bool(channel.offline) and channel.is_offline(self.parent_dir)

    def _check_online(self) -> None:
        if self.offline:
            raise storage_error(
                f"{self.topic}-{self.partition} is in offline log dir {self.parent_dir}"
            )

    def _io_failure(self, exc: OSError, what: str) -> KafkaError:
        where = f"{self.topic}-{self.partition} in log dir {self.parent_dir}"
        return write_failure(self.failure_channel, self.parent_dir, where, exc, what)

    def __repr__(self) -> str:
        return f"Log({self.dir}, start={self.log_start_offset}, end={self.log_end_offset})"

    # --- offsets -------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Clamped to [log_start_offset, log_end_offset], as Kafka's updateHighWatermark."""
        new = min(max(offset, self.log_start_offset), self.log_end_offset)
        if new != self._hw:
            self._hw = new
            self._hw_position = None

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """OffsetForLeaderEpoch: (epoch, end offset), or None if unknown."""
        found_epoch, offset = self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)
        return None if offset < 0 else (found_epoch, offset)

    def _roll_jitter(self) -> int:
        jitter = self.config.segment_jitter_ms
        return random.randrange(min(jitter, self.config.segment_ms)) if jitter > 0 else 0

    # --- appends -------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytearray | memoryview,
        headers: Sequence[BatchHeader] | None = None,
        leader_epoch: int = 0,
        now_ms: int | None = None,
        check_sequence: bool = True,
    ) -> LogAppendInfo:
        """Append a client's batches. ``records`` is rewritten in place (offsets, leader
        epoch); ``headers`` are validate_produce's (validated here if None). Checks
        timestamps and idempotent-producer state, recompresses if compression.type
        says so, rolls if needed, writes. A retried batch returns its original offsets
        with ``duplicate=True`` and writes nothing."""
        self._check_online()
        config = self.config
        if memoryview(records).readonly:  # offsets are written in place: copy (same positions)
            records = bytearray(records)
        if headers is None:
            headers = validate_produce(records, max_message_bytes=config.max_message_bytes)
        now = wall_clock_ms() if now_ms is None else now_ms
        append_time = now if config.log_append_time else None
        if append_time is None:
            check_timestamps(records, headers, config, now)
        if config.compact:  # the config of this append: a topic altered to compact checks now
            check_keys(records, headers, f"{self.topic}-{self.partition}")
        pending, duplicate = self.producer_state.check_append(
            producer_batches(headers, self.log_end_offset, append_time), check_sequence
        )
        if duplicate is not None:
            return LogAppendInfo(
                duplicate.first_offset,
                duplicate.last_offset,
                duplicate.timestamp,
                duplicate.last_offset,
                duplicate.timestamp,
                self.log_start_offset,
                duplicate.offset_delta + 1,
                duplicate=True,
            )
        records, headers = maybe_recompress(records, headers, config)
        self._check_fits_segment(len(records))
        info = assign_offsets(
            records, headers, self.log_end_offset, leader_epoch, log_append_time_ms=append_time
        )
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, info.first_offset)
        first, last = info.first_offset, info.last_offset
        self._append(records, first, last, info.max_timestamp, info.offset_of_max_timestamp, now)
        self.producer_state.apply(pending, self.log_end_offset)
        return LogAppendInfo(
            first,
            last,
            info.max_timestamp,
            info.offset_of_max_timestamp,
            info.log_append_time,
            self.log_start_offset,
            last - first + 1,
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, now_ms: int | None = None
    ) -> LogAppendInfo | None:
        """Append batches that already carry offsets (replication); see
        append.follower_batches for what is refused. None if nothing was appended."""
        self._check_online()
        start = start_inside_first_batch(records, self.log_start_offset, self.log_end_offset)
        if start is not None:  # an empty log, the leader's start inside this first batch
            self.truncate_fully_and_start_at(start)
        valid, headers = follower_batches(records, self.log_end_offset)
        if not headers:
            return None
        self._check_fits_segment(valid)
        max_ts, offset_of_max = -1, -1
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
            if h.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        first, last = headers[0].base_offset, headers[-1].last_offset
        now = wall_clock_ms() if now_ms is None else now_ms
        self._append(memoryview(records)[:valid], first, last, max_ts, offset_of_max, now)
        for h in headers:
            if h.is_control and h.producer_id >= 0:
                self._replay_control(records, h)
                self.producer_state.map_end_offset = h.last_offset + 1
            else:
                self.producer_state.replay_batch(h)
        count = sum(h.records_count for h in headers)
        return LogAppendInfo(first, last, max_ts, offset_of_max, -1, self.log_start_offset, count)

    def _check_fits_segment(self, size: int) -> None:
        if size > self.config.segment_bytes:
            raise KafkaError(
                ErrorCode.record_list_too_large,
                f"Message batch size is {size} bytes in append to partition "
                f"{self.topic}-{self.partition}, which exceeds the maximum configured segment "
                f"size of {self.config.segment_bytes}.",
            )

    def _append(
        self, records, first: int, last: int, max_ts: int, offset_of_max: int, now: int
    ) -> None:
        try:
            segment = self.active_segment
            if segment.should_roll(len(records), max_ts, last, now, self.config):
                segment = self.roll(first, now_ms=now)
            segment.append(last, max_ts, offset_of_max, records)
        except OSError as exc:
            raise self._io_failure(exc, "append") from None
        self.log_end_offset = last + 1
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    # --- segments ------------------------------------------------------------------------

    def _floor_index(self, offset: int) -> int:
        return bisect.bisect_right(self._bases, offset) - 1

    def roll(
        self, expected_next_offset: int | None = None, now_ms: int | None = None
    ) -> LogSegment:
        """Start a new active segment at max(expected, LEO); snapshot producer state."""
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            if active.size != 0:
                raise RuntimeError(f"Trying to roll a new segment at {new_base}, which exists")
            return active  # an empty active segment already starts here
        active.on_become_inactive()
        for suffix in (".log", ".index", ".timeindex"):
            (self.dir / f"{new_base:020d}{suffix}").unlink(missing_ok=True)
        segment = LogSegment.open(
            self.dir, new_base, self.config, created_ms=now_ms, roll_jitter_ms=self._roll_jitter()
        )
        self.segments.append(segment)
        self._bases.append(new_base)
        self.producer_state.map_end_offset = new_base
        self.producer_state.take_snapshot(sync=False)
        # Kafka flushes the rolled segment asynchronously; the manager's periodic flush does it
        self._pending_flush_offset = new_base
        if self.roll_listener is not None:
            self.roll_listener(self)
        return segment

    def _remove_segments(self, doomed: list[LogSegment], now_ms: int | None) -> None:
        """Rename to .deleted now, unlink after file.delete.delay.ms."""
        due = (wall_clock_ms() if now_ms is None else now_ms) + self.config.file_delete_delay_ms
        gone = {id(s) for s in doomed}
        self.segments = [s for s in self.segments if id(s) not in gone]
        self._bases = [s.base_offset for s in self.segments]
        for seg in doomed:
            seg.rename_for_delete()
            self.deleter.schedule(seg, due)
        self._hw_position = None

    def replace_segments(self, new: LogSegment, old: list[LogSegment], now_ms=None) -> None:
        """The cleaner's swap (Kafka's replaceSegments): ``new``, written with files
        ending ``.cleaned``, takes the place of the contiguous ``old`` segments. The
        ``.swap`` stage lets recovery finish a swap a crash interrupted."""
        new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        self._remove_segments(old, now_ms)
        index = bisect.bisect_left(self._bases, new.base_offset)
        self.segments.insert(index, new)
        self._bases.insert(index, new.base_offset)
        new.change_file_suffixes(SWAP_SUFFIX, "")

    # --- reads ---------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchSlice | None:
        """A slice of one segment starting at the batch holding ``fetch_offset``, not
        past ``max_offset`` (exclusive; the HW for consumers). None when there is
        nothing to return. Raises OFFSET_OUT_OF_RANGE outside [log start, LEO]."""
        channel = self.failure_channel  # no dir offline (the usual case): no call
        if channel is not None and channel.offline:
            self._check_online()
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"Received request for offset {fetch_offset} for partition {self.topic}-"
                f"{self.partition}, but we only have log segments in the range "
                f"{self.log_start_offset} to {self.log_end_offset}.",
            )
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if fetch_offset >= limit:
            return None
        limit_seg, limit_pos = self._position_of(limit)
        i = max(self._floor_index(fetch_offset), 0)
        while i < len(self.segments):
            seg = self.segments[i]
            if seg.base_offset > limit_seg:
                return None
            max_position = limit_pos if seg.base_offset == limit_seg else seg.size
            data = seg.read(fetch_offset, max_bytes, max_position, min_one_message)
            if data is not None:
                return data if data.size > 0 else None
            i += 1
        return None

    def _position_of(self, offset: int) -> tuple[int, int]:
        """(segment base, file position) where the batch holding ``offset`` starts (the
        end of the log for the LEO); cached for the high watermark."""
        if offset == self._hw and self._hw_position is not None:
            return self._hw_position
        if offset >= self.log_end_offset:
            result = (self.active_segment.base_offset, self.active_segment.size)
        else:
            seg = self.segments[max(self._floor_index(offset), 0)]
            header = seg.translate_offset(offset)
            result = (seg.base_offset, header.position if header is not None else seg.size)
        if offset == self._hw and offset < self.log_end_offset:
            self._hw_position = result
        return result

    def read_bytes(self, fetch_offset: int, max_bytes: int, **kwargs) -> bytes:
        data = self.read(fetch_offset, max_bytes, **kwargs)
        return data.read_bytes() if data is not None else b""

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first record with timestamp >= ``timestamp``; -2 earliest,
        -1 latest (LEO), -3 max timestamp. None if no record is that recent."""
        cache = self.leader_epoch_cache
        if timestamp == EARLIEST_TIMESTAMP:
            first = cache.earliest_entry
            epoch = first.epoch if first and first.start_offset <= self.log_start_offset else None
            return TimestampAndOffset(self.log_start_offset, -1, epoch)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(self.log_end_offset, -1, cache.latest_epoch)
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        for seg in self.segments:
            if seg.largest_timestamp >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
        return None

    def _max_timestamp_offset(self) -> TimestampAndOffset | None:
        seg = max(self.segments, key=lambda s: s.max_timestamp_so_far)
        ts, offset = seg.max_timestamp_and_offset
        if ts < 0:
            return None
        position = seg.offset_index.lookup(offset).position
        for h in seg.batches_from(position):
            if h.max_timestamp == ts:
                # Kafka's offsetOfMaxTimestamp: the first record holding the max timestamp
                batch = os.pread(seg.fd, h.size, h.position)
                offset = next((r.offset for r in decode_records(batch) if r.timestamp == ts), None)
                if offset is None:
                    return None
                epoch = h.partition_leader_epoch
                return TimestampAndOffset(offset, ts, epoch if epoch >= 0 else None)
        return None

    # --- deletion ------------------------------------------------------------------------

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        if new_start > self._hw:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"Cannot increment the log start offset to {new_start} of partition "
                f"{self.topic}-{self.partition} since it is larger than the high watermark {self._hw}",
            )
        if new_start <= self.log_start_offset:
            return False
        self.log_start_offset = new_start
        self.leader_epoch_cache.truncate_from_start(new_start)
        self.producer_state.on_log_start_offset_incremented(new_start)
        if self.recovery_point < new_start:
            self.recovery_point = new_start
        return True

    def delete_records_before(self, offset: int, now_ms: int | None = None) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1 means the HW;
        above the HW or negative: OFFSET_OUT_OF_RANGE) and delete the segments wholly
        below it. Returns the new log start offset (the low watermark)."""
        if offset == -1:
            offset = self._hw
        if offset < 0:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"Cannot delete records of {self.topic}-{self.partition} before offset {offset}",
            )
        self.maybe_increment_log_start_offset(offset)
        self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset, now_ms
        )
        return self.log_start_offset

    def delete_retention_segments(self, now_ms: int | None = None) -> int:
        """Delete old segments per retention.bytes and retention.ms (by each segment's
        largest timestamp) when cleanup.policy has delete, and those below the log
        start offset; never the active segment. Returns the number deleted."""
        now = wall_clock_ms() if now_ms is None else now_ms
        deleted = self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset, now
        )
        if not self.config.delete:
            return deleted
        retention_bytes = self.config.retention_bytes
        size = self.size_bytes
        if retention_bytes >= 0 and size >= retention_bytes:
            excess = [size - retention_bytes]

            def over_size(seg: LogSegment, _nxt) -> bool:
                if excess[0] - seg.size >= 0:
                    excess[0] -= seg.size
                    return True
                return False

            deleted += self._delete_old_segments(over_size, now)
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_old_segments(
                lambda seg, _nxt: now - seg.largest_timestamp > retention_ms, now
            )
        return deleted

    def _delete_old_segments(self, predicate, now_ms: int | None) -> int:
        doomed = []
        for i, seg in enumerate(self.segments[:-1]):  # never the active segment
            nxt = self.segments[i + 1]
            if self._hw < nxt.base_offset or not predicate(seg, nxt):
                break
            doomed.append(seg)
        if not doomed:
            return 0
        new_start = self.segments[len(doomed)].base_offset
        if new_start > self.log_start_offset:
            self.maybe_increment_log_start_offset(new_start)
        self._remove_segments(doomed, now_ms)
        self.producer_state.delete_snapshots_before(self.segments[0].base_offset)
        self.txn_index.drop_before(self.log_start_offset, self._bases)
        return len(doomed)

    # --- truncation ----------------------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int | None = None) -> bool:
        """Drop everything from ``offset`` on (follower truncation). True if anything
        was removed."""
        if offset < 0:
            raise ValueError(f"Cannot truncate to a negative offset ({offset})")
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if self.segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset, now_ms=now_ms)
            return True
        self._remove_segments([s for s in self.segments if s.base_offset > offset], now_ms)
        self.active_segment.truncate_to(offset)
        self.log_end_offset = offset
        self.leader_epoch_cache.truncate_from_end(offset)
        self.log_start_offset = min(offset, self.log_start_offset)
        self.recovery_point = min(self.recovery_point, offset)
        self.txn_index.truncate_to(offset)
        self._rebuild_producer_state(now_ms)
        self._hw = min(self._hw, self.log_end_offset)
        self._hw_position = None
        return True

    def truncate_fully_and_start_at(
        self, offset: int, *, log_start_offset: int | None = None, now_ms: int | None = None
    ) -> None:
        """Delete all data; the log restarts empty at ``offset``."""
        old = list(self.segments)
        self._remove_segments(old, now_ms)
        segment = LogSegment.open(self.dir, offset, self.config, created_ms=now_ms)
        self.segments, self._bases = [segment], [offset]
        self.log_end_offset = offset
        self.leader_epoch_cache.clear_and_flush()
        self.producer_state.truncate_fully_and_start_at(offset)
        self.txn_index.delete_all()
        self.log_start_offset = offset if log_start_offset is None else log_start_offset
        self.recovery_point = offset
        self._rebuild_producer_state(now_ms)
        self._hw = self.log_end_offset
        self._hw_position = None

    def _rebuild_producer_state(self, now_ms: int | None) -> None:
        now = wall_clock_ms() if now_ms is None else now_ms
        rebuild_producer_state(
            self.producer_state, self.segments, self.log_start_offset, self.log_end_offset, now
        )

    # --- durability and lifecycle --------------------------------------------------------

    def flush(self, up_to: int | None = None, now_ms: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, up_to) (default: all) and
        move the recovery point to ``up_to``."""
        offset = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if offset <= self.recovery_point:
            return
        self.last_flush_ms = wall_clock_ms() if now_ms is None else now_ms
        start = max(self._floor_index(self.recovery_point), 0)
        new_segment = False
        try:
            for seg in self.segments[start:]:
                if seg.base_offset >= offset:
                    break
                seg.flush()
                new_segment |= seg.base_offset >= self.recovery_point
            if new_segment:
                fsync_dir(self.dir)
        except OSError as exc:  # an fsync that failed: what is on disk is in doubt
            raise self._io_failure(exc, "flush") from None
        self.recovery_point = offset
        if self._pending_flush_offset is not None and self._pending_flush_offset <= offset:
            self._pending_flush_offset = None

    def flush_rolled_segments(self, now_ms: int | None = None) -> None:
        """The flush Kafka schedules after a roll: up to the new segment's base."""
        if self._pending_flush_offset is not None:
            self.flush(self._pending_flush_offset, now_ms)

    def close(self) -> None:
        """Snapshot producer state, close every file (no flush: see LogManager.close)."""
        if self.closed:
            return
        self.producer_state.map_end_offset = self.log_end_offset
        self.producer_state.take_snapshot()
        for seg in self.segments:
            seg.close()
        if self._owns_deleter:
            self.deleter.run_all()
        self.closed = True

    def delete(self) -> None:
        """Remove this log's directory and files now."""
        for seg in self.segments:
            seg.delete_files()
        if self._owns_deleter:
            self.deleter.run_all()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.segments, self._bases = [], []
        self.closed = True

    def rename_dir(self, new_dir: Path) -> None:
        """Move the partition directory (LogManager.delete_log); open descriptors stay valid."""
        self.dir.rename(new_dir)
        self.dir = Path(new_dir)
        if self.dir.parent != self.parent_dir:
            self.parent_dir = self.dir.parent
        for seg in self.segments:
            seg.update_parent_dir(self.dir)
        self.producer_state.update_parent_dir(self.dir)
        self.leader_epoch_cache.update_parent_dir(self.dir)
        self.txn_index = TransactionIndex(self.dir)
