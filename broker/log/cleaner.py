"""The log cleaner: compaction of ``cleanup.policy=compact`` logs (Kafka's LogCleaner
and LogCleanerManager), for every compacted topic, ``__consumer_offsets`` included.

Each log has a *clean* head (already compacted, up to the offset kept per log dir in
``cleaner-offset-checkpoint``) and a *dirty* tail. A pass picks the log with the highest
dirty ratio above ``min.cleanable.dirty.ratio`` (or one whose oldest dirty record is
older than ``max.compaction.lag.ms``), maps each key of the dirty section to its last
offset, then recopies the segments from the log start, keeping a record only if it is
the latest for its key. Never cleaned: the active segment, anything at or past the high
watermark, and segments younger than ``min.compaction.lag.ms``.

Tombstones (null values) survive the first pass that sees them, which stamps their
batch with a delete horizon of now + ``delete.retention.ms`` (KIP-534, batch attribute
bit 6, the horizon stored as the batch's base timestamp); a later pass after the
horizon drops them. Batches keep their offsets (the base offset and the last offset of
each batch survive, so producer sequences stay intact), and the last batch of each
active idempotent producer is kept even when all its records go.

Cleaned segments are written as ``*.cleaned``, renamed ``*.swap``, swapped in, and
renamed to their final names; recovery completes or discards an interrupted swap.

Like the rest of the storage layer this is synchronous: ``LogManager.tick`` calls
``maybe_clean`` (one log per call, ``log.cleaner.backoff.ms`` between idle checks), and
``clean_now`` cleans one log on request whatever its dirty ratio (the broker's
``/admin/compact/<topic>`` requests, ``broker.server.compaction``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.checkpoint import CheckpointError, OffsetCheckpointFile
from broker.log.log import Log
from broker.log.segment import CLEANED_SUFFIX, LogSegment, segment_file_name
from broker.protocol import records as rec

__all__ = ["CLEANER_CHECKPOINT", "CleanerStats", "LogCleaner", "OffsetMap"]

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
ENTRY_BYTES = 24  # Kafka's SkimpyOffsetMap: a 16-byte hash and an 8-byte offset per key
LOAD_FACTOR = 0.9
TopicPartition = tuple[str, int]


class OffsetMap:
    """Key -> last offset for the dirty section, bounded like Kafka's dedupe buffer."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(1, max_entries)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset

    def get(self, key: bytes) -> int:
        return self._map.get(key, -1)

    def room_for(self, count: int) -> bool:
        return len(self._map) + count <= self.max_entries


@dataclass
class CleanerStats:
    messages_read: int = 0
    bytes_read: int = 0
    messages_written: int = 0
    bytes_written: int = 0
    invalid_messages: int = 0
    tombstones_written: int = 0


@dataclass
class LogToClean:
    tp: TopicPartition
    log: Log
    first_dirty: int
    first_uncleanable: int  # aligned to a segment's base offset
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int = 0  # past max.compaction.lag.ms (Kafka's maxCompactionDelayMs)

    @property
    def need_compaction_now(self) -> bool:
        return self.compaction_delay_ms > 0

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


@dataclass
class LogCleaner:
    log_dirs: list[Path]
    enabled: bool = True
    backoff_ms: int = 15000
    dedupe_buffer_size: int = 128 * 1024 * 1024
    #: log.cleaner.io.max.bytes.per.second: bytes read plus written per second, on
    #: average; a pass that moved N bytes holds the next one back N / rate seconds
    io_max_bytes_per_second: float = float("inf")
    last_idle_ms: int = field(default=-(1 << 62))
    throttled_until_ms: float = 0
    stats: CleanerStats = field(default_factory=CleanerStats)
    uncleanable: set[TopicPartition] = field(default_factory=set)
    # partitions a "compact now" request holds (rolled, waiting for their high watermark):
    # the periodic pass leaves them to it, as Kafka's cleaner skips partitions in progress
    requested: set[TopicPartition] = field(default_factory=set)
    # what the metrics report (Kafka's LogCleaner and LogCleanerManager gauges)
    dirty_ratios: dict[TopicPartition, float] = field(default_factory=dict)  # last look
    last_cleaned_ms: dict[TopicPartition, int] = field(default_factory=dict)
    last_recopy_ratio: float = 0.0  # bytes written / bytes read by the last pass
    last_clean_secs: float = 0.0
    last_buffer_utilization: float = 0.0  # the last pass's offset map: entries / slots
    last_run_ms: int = field(default_factory=lambda: _now())  # the last look for work
    max_compaction_delay_ms: int = 0  # of the last look, over the compacted logs

    # -- checkpoints --------------------------------------------------------------------
    def _checkpoint(self, log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(Path(log_dir) / CLEANER_CHECKPOINT)

    def checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for d in self.log_dirs:
            try:
                out.update(self._checkpoint(d).read())
            except (CheckpointError, OSError) as exc:
                log.warning("cannot read %s in %s: %s", CLEANER_CHECKPOINT, d, exc)
        return out

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Record (or, for None, forget) the clean offset of one partition."""
        cp = self._checkpoint(log_dir)
        try:
            data = cp.read()
        except (CheckpointError, OSError):
            data = {}
        if offset is None:
            if tp not in data:
                return
            data.pop(tp)
        else:
            data[tp] = offset
        cp.write(data)

    # -- choosing a log --------------------------------------------------------------------
    def due(self, now_ms: int) -> bool:
        """Whether maybe_clean would look at the logs now (enabled, backoff over)."""
        return (
            self.enabled
            and now_ms - self.last_idle_ms >= self.backoff_ms
            and now_ms >= self.throttled_until_ms
        )

    def maybe_clean(self, logs: dict[TopicPartition, Log], now_ms: int | None = None) -> bool:
        """Clean the filthiest log if any is due; True if one was cleaned."""
        now = _now() if now_ms is None else now_ms
        if not self.due(now):
            return False
        cleanable = self.grab_filthiest(logs, now)
        if cleanable is None:
            self.last_idle_ms = now
            return False
        moved = self.stats.bytes_read + self.stats.bytes_written
        try:
            end = self.clean(cleanable, now)
        except Exception:  # as Kafka: mark the partition uncleanable, keep the broker
            log.exception("cleaning %s-%d failed; it is now uncleanable", *cleanable.tp)
            self.uncleanable.add(cleanable.tp)
            return False
        finally:
            moved = self.stats.bytes_read + self.stats.bytes_written - moved
            self.throttled_until_ms = now + moved * 1000 / self.io_max_bytes_per_second
        self.update_checkpoint(cleanable.log.dir.parent, cleanable.tp, end)
        self.last_cleaned_ms[cleanable.tp] = _now()
        return True

    def uncleanable_bytes(self, get_log: Callable[[str, int], Log | None]) -> dict[str, int]:
        """Kafka's LogCleanerManager uncleanable-bytes: per log dir, the cleanable bytes
        of the partitions the cleaner gave up on (0 for every dir when there are none)."""
        out = {str(d): 0 for d in self.log_dirs}
        if not self.uncleanable:
            return out
        checkpoints, now = self.checkpoints(), _now()
        for tp in list(self.uncleanable):
            lg = get_log(*tp)
            if lg is None:
                continue
            first_dirty, uncleanable = cleanable_offsets(lg, checkpoints.get(tp), now)
            size = _log_to_clean(tp, lg, first_dirty, uncleanable, now).cleanable_bytes
            out[str(lg.dir.parent)] = out.get(str(lg.dir.parent), 0) + size
        return out

    def grab_filthiest(self, logs: dict[TopicPartition, Log], now: int) -> LogToClean | None:
        checkpoints = self.checkpoints()
        best = None
        self.dirty_ratios = ratios = {}
        self.last_run_ms = now
        delays = [0]
        for tp, lg in logs.items():
            if not lg.config.compact or lg.closed or tp in self.uncleanable:
                continue
            if tp in self.requested:
                continue
            first_dirty, uncleanable = cleanable_offsets(lg, checkpoints.get(tp), now)
            cleanable = _log_to_clean(tp, lg, first_dirty, uncleanable, now)
            ratios[tp] = cleanable.cleanable_ratio
            delays.append(cleanable.compaction_delay_ms)
            if cleanable.clean_bytes + cleanable.cleanable_bytes == 0:
                continue
            due = (cleanable.need_compaction_now and cleanable.cleanable_bytes > 0) or (
                cleanable.cleanable_ratio > lg.config.min_cleanable_dirty_ratio
            )
            if due and (best is None or cleanable.cleanable_ratio > best.cleanable_ratio):
                best = cleanable
        self.max_compaction_delay_ms = max(delays)
        return best

    # -- on request (Quill's "compact now", /admin/compact/<topic>) ---------------------------
    def status(self, tp: TopicPartition, lg: Log, now_ms: int | None = None) -> dict:
        """The cleaner's standing figures for one log (Kafka's LogCleanerManager metrics,
        per partition): dirty ratio, bytes, clean-up-to offset, last clean, uncleanable."""
        now = _now() if now_ms is None else now_ms
        checkpoint = self.checkpoints().get(tp)
        state = _log_to_clean(tp, lg, *cleanable_offsets(lg, checkpoint, now), now)
        return {
            "dirty_ratio": round(state.cleanable_ratio, 6),
            "bytes": lg.size_bytes,
            "cleaned_up_to": checkpoint if checkpoint is not None else lg.log_start_offset,
            "last_clean_ms": self.last_cleaned_ms.get(tp),
            "uncleanable": tp in self.uncleanable,
        }

    def clean_now(self, tp: TopicPartition, lg: Log, now_ms: int | None = None) -> dict:
        """Clean ``lg`` now, whatever its dirty ratio (min.compaction.lag.ms still holds),
        and say what it did: dirty ratio and bytes before/after, records removed,
        tombstones kept, duration. Raises (and marks the log uncleanable) if cleaning fails."""
        now = _now() if now_ms is None else now_ms
        started = time.monotonic()
        before = self.status(tp, lg, now)
        checkpoint = self.checkpoints().get(tp)
        dirty = _log_to_clean(tp, lg, *cleanable_offsets(lg, checkpoint, now), now)
        read, written = self.stats.messages_read, self.stats.messages_written
        tombstones = self.stats.tombstones_written
        if dirty.cleanable_bytes > 0:
            try:
                checkpoint = self.clean(dirty, now)
            except Exception:
                self.uncleanable.add(tp)
                raise
            self.update_checkpoint(lg.dir.parent, tp, checkpoint)
            self.uncleanable.discard(tp)
            self.last_cleaned_ms[tp] = _now()
        after = self.status(tp, lg, now)
        return {
            "dirty_ratio_before": before["dirty_ratio"],
            "dirty_ratio_after": after["dirty_ratio"],
            "bytes_before": before["bytes"],
            "bytes_after": after["bytes"],
            "records_removed": (self.stats.messages_read - read)
            - (self.stats.messages_written - written),
            "tombstones_kept": self.stats.tombstones_written - tombstones,
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
            "cleaned_up_to": after["cleaned_up_to"],
            "last_clean_ms": after["last_clean_ms"],
            "uncleanable": after["uncleanable"],
        }

    # -- cleaning --------------------------------------------------------------------------
    def clean(self, cleanable: LogToClean, now: int) -> int:
        """One pass over ``cleanable.log``; returns the new first dirty offset."""
        lg = cleanable.log
        started = time.monotonic()
        read_before, written_before = self.stats.bytes_read, self.stats.bytes_written
        max_entries = int(self.dedupe_buffer_size / ENTRY_BYTES * LOAD_FACTOR)
        offset_map = OffsetMap(max_entries)
        build_offset_map(lg, cleanable.first_dirty, cleanable.first_uncleanable, offset_map)
        self.last_buffer_utilization = len(offset_map) / (self.dedupe_buffer_size / ENTRY_BYTES)
        end = offset_map.latest_offset + 1
        segments = [s for s in lg.segments if s.base_offset < end]
        active = {pid: e.last_data_offset for pid, e in lg.producer_state.producers.items()}
        config = lg.config
        groups = group_segments_by_size(
            segments, config.segment_bytes, config.segment_index_bytes, cleanable.first_uncleanable
        )
        for group in groups:
            self._clean_segments(lg, group, offset_map, now, active, cleanable.first_uncleanable)
        read = self.stats.bytes_read - read_before
        self.last_recopy_ratio = (self.stats.bytes_written - written_before) / read if read else 0.0
        self.last_clean_secs = time.monotonic() - started
        self.last_cleaned_ms[cleanable.tp] = now
        log.info(
            "cleaned %s-%d up to offset %d in %.0f ms (%d keys)",
            lg.topic,
            lg.partition,
            end,
            (time.monotonic() - started) * 1000,
            len(offset_map),
        )
        return max(end, cleanable.first_dirty)

    def _clean_segments(self, lg: Log, group, offset_map, now, active, upper_bound) -> None:
        base = group[0].base_offset
        for suffix in (".log", ".index", ".timeindex"):
            (lg.dir / segment_file_name(base, suffix + CLEANED_SUFFIX)).unlink(missing_ok=True)
        cleaned = LogSegment.open(lg.dir, base, lg.config, suffix=CLEANED_SUFFIX)
        aborted = aborted_batches(lg)
        try:
            for seg in group:
                self._clean_into(
                    seg, cleaned, offset_map, now, lg.config, active, upper_bound, aborted
                )
            cleaned.on_become_inactive()
            cleaned.flush()
            modified = group[-1].last_modified_ms
            os.utime(cleaned.log_path, ns=(modified * 1_000_000, modified * 1_000_000))
        except BaseException:
            cleaned.delete_files()
            raise
        lg.replace_segments(cleaned, group)

    def _clean_into(self, seg, dest, offset_map, now, config, active, upper_bound, aborted):
        for header in list(seg.batches_from(0)):
            data = os.pread(seg.fd, header.size, header.position)
            self.stats.bytes_read += header.size
            header = header._replace(position=0)
            out = filter_batch(
                data, header, offset_map, now, config.delete_retention_ms, active, upper_bound,
                self.stats, aborted(header),
            )  # fmt: skip
            if out is None:
                continue
            new_header = rec.read_batch_header(out, 0)
            max_ts = new_header.max_timestamp
            dest.append(new_header.last_offset, max_ts, new_header.last_offset, out)
            self.stats.bytes_written += len(out)


# -- the pieces, as functions over one log --------------------------------------------------


def _now() -> int:
    return time.time_ns() // 1_000_000


def _overlapping(lg: Log, lo: int, hi: int) -> list[LogSegment]:
    """Segments holding offsets in [lo, hi) (Kafka's logSegments(lo, hi))."""
    segs = lg.segments
    return [
        s
        for i, s in enumerate(segs)
        if s.base_offset < hi and (i + 1 == len(segs) or segs[i + 1].base_offset > lo)
    ]


def _segments_from(lg: Log, offset: int) -> list[LogSegment]:
    """Non-active segments from the one holding ``offset`` on."""
    return [s for s in _overlapping(lg, offset, 1 << 63) if s is not lg.active_segment]


def cleanable_offsets(lg: Log, checkpoint: int | None, now: int) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset), Kafka's cleanableOffsets."""
    first_dirty = checkpoint if checkpoint is not None else lg.log_start_offset
    if first_dirty < lg.log_start_offset or first_dirty > lg.log_end_offset:
        first_dirty = lg.log_start_offset
    # the last stable offset, not the HW: an open transaction is not cleaned (Kafka's
    # firstUnstableOffset bound)
    limits = [lg.last_stable_offset, lg.active_segment.base_offset]
    lag = max(lg.config.min_compaction_lag_ms, 0)
    if lag > 0:
        young = next(
            (s for s in _segments_from(lg, first_dirty) if s.largest_timestamp > now - lag), None
        )
        if young is not None:
            limits.append(young.base_offset)
    return first_dirty, max(first_dirty, min(limits))


def _log_to_clean(tp, lg: Log, first_dirty: int, uncleanable: int, now: int) -> LogToClean:
    boundary = next(iter(_segments_from(lg, uncleanable)), lg.active_segment).base_offset
    clean_bytes = sum(s.size for s in lg.segments if s.base_offset < first_dirty)
    dirty = _overlapping(lg, min(first_dirty, boundary), boundary)
    delay = _max_compaction_delay(lg, first_dirty, now)
    return LogToClean(tp, lg, first_dirty, boundary, clean_bytes, sum(s.size for s in dirty), delay)


def _max_compaction_delay(lg: Log, first_dirty: int, now: int) -> int:
    stamps = [
        ts for s in _segments_from(lg, first_dirty) if (ts := s.first_batch_timestamp() or 0) > 0
    ]
    if not stamps:
        return 0
    clean_until = now - max(lg.config.max_compaction_lag_ms, 0)
    return max(clean_until - min(stamps), 0)


def aborted_batches(lg: Log):
    """A predicate: is this batch's data part of an aborted transaction (by the log's
    .txnindex)? Kafka's cleaner neither maps nor keeps such records."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for a in lg.txn_index.entries:
        spans.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))

    def aborted(h) -> bool:
        if not spans or not h.is_transactional or h.is_control or h.producer_id < 0:
            return False
        return any(f <= h.base_offset <= last for f, last in spans.get(h.producer_id, ()))

    return aborted


def build_offset_map(lg: Log, start: int, end: int, offset_map: OffsetMap) -> None:
    """Map each key in [start, end) to its last offset, until the map is full; records
    of aborted transactions are not mapped."""
    aborted = aborted_batches(lg)
    for i, seg in enumerate(lg.segments):
        nxt = lg.segments[i + 1].base_offset if i + 1 < len(lg.segments) else None
        if seg.base_offset >= end or (nxt is not None and nxt <= start):
            continue
        for header in seg.batches_from(0):
            if header.last_offset < start:
                continue
            if header.base_offset >= end:
                return
            if not offset_map.room_for(header.records_count):
                return
            if not header.is_control and not aborted(header):
                batch = os.pread(seg.fd, header.size, header.position)
                for record in rec.decode_records(batch):
                    if record.key is not None and record.offset >= start:
                        offset_map.put(record.key, record.offset)
            offset_map.latest_offset = header.last_offset


def group_segments_by_size(
    segments: list[LogSegment], max_size: int, max_index_size: int, upper_bound: int
):
    """Consecutive segments whose sum fits one segment, and whose offsets fit one
    segment's index (Kafka's groupSegmentsBySize)."""
    groups, current, size, index_size = [], [], 0, 0
    for i, seg in enumerate(segments):
        seg_index = seg.offset_index.size_in_bytes()
        last = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else upper_bound - 1
        if current and (
            size + seg.size > max_size
            or index_size + seg_index > max_index_size
            or (seg.size > 0 and last - current[0].base_offset > rec.INT32_MAX)
        ):
            groups.append(current)
            current, size, index_size = [], 0, 0
        current.append(seg)
        size += seg.size
        index_size += seg_index
    if current:
        groups.append(current)
    return groups


def filter_batch(
    data, header, offset_map, now, delete_retention_ms, active, upper_bound, stats, discard=False
):
    """The batch as the cleaner keeps it: unchanged, rebuilt with fewer records (same
    base and last offset), an empty header, or None to drop it. ``discard``: the batch
    belongs to an aborted transaction, none of its records is kept."""
    if header.is_control:
        return data
    records = rec.decode_records(data)
    stats.messages_read += len(records)
    horizon = header.first_timestamp if header.has_delete_horizon else None
    kept, tombstones = [], False
    for r in [] if discard else records:
        if r.offset <= offset_map.latest_offset:
            if r.key is None:
                stats.invalid_messages += 1
                continue
            if r.offset < offset_map.get(r.key):
                continue
            if r.value is None and horizon is not None and now >= horizon:
                continue
        tombstones |= r.value is None
        kept.append(r)
    stats.messages_written += len(kept)
    stats.tombstones_written += sum(1 for r in kept if r.value is None)
    set_horizon = tombstones and horizon is None
    if len(kept) == len(records) and not set_horizon:
        return data
    keep_empty = (
        header.producer_id >= 0 and active.get(header.producer_id) == header.last_offset
    ) or header.next_offset == upper_bound
    if not kept and not keep_empty:
        return None
    common = dict(
        base_offset=header.base_offset,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        timestamp_type=header.timestamp_type,
        last_offset_delta=header.last_offset_delta,
    )
    if not kept:
        ts = header.max_timestamp
        return rec.build_batch([], first_timestamp=ts, max_timestamp=ts, **common)
    log_append = header.timestamp_type == rec.LOG_APPEND_TIME
    return rec.build_batch(
        kept,
        compression=header.compression,
        max_timestamp=header.max_timestamp if log_append else None,
        delete_horizon_ms=(now + delete_retention_ms) if set_horizon else horizon,
        **common,
    )
