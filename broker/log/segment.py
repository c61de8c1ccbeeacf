"""One log segment: ``%020d.log`` plus its ``.index`` and ``.timeindex`` (Kafka's
LogSegment).

The ``.log`` is a plain concatenation of record batches (v2). Appends are one
``os.write`` on an ``O_APPEND`` descriptor; reads never copy data: ``read`` returns a
``FetchSlice`` (descriptor, position, size) for the server to ``os.sendfile``. Batch
headers are located with ``pread`` plus the sparse offset index, as Kafka does.

Deleted segments keep their descriptor open until ``close_handles`` (called by the
DeletionQueue after ``file.delete.delay.ms``), so a slice handed out just before a
delete still reads the right bytes.
"""

from __future__ import annotations

import heapq
import mmap
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from broker.log.index import (
    NO_TIMESTAMP,
    CorruptIndexError,
    OffsetIndex,
    TimeIndex,
    TimestampOffset,
)
from broker.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    decode_records,
    read_batch_header,
    scan_valid_prefix,
)

__all__ = [
    "DELETED_SUFFIX",
    "DeletionQueue",
    "FetchSlice",
    "LogSegment",
    "TimestampAndOffset",
    "segment_file_name",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SCAN_CHUNK = 64 * 1024
_APPEND_STARTS_KEPT = 16  # positions of the latest appends, active segment only
_RECOVER_WINDOW = 16 * 1024 * 1024


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class FetchSlice(NamedTuple):
    """A byte range of a segment file, ready for ``os.sendfile(sock, fd, position, size)``.

    ``offset`` is the fetch offset asked for; the first batch in the range may start
    before it (batch granularity, as in Kafka).
    """

    fd: int
    position: int
    size: int
    offset: int
    segment_base_offset: int

    def read_bytes(self) -> bytes:
        """The bytes of the slice (for tools, tests and replication)."""
        return os.pread(self.fd, self.size, self.position)


class TimestampAndOffset(NamedTuple):
    """ListOffsets answer: the record offset, its timestamp and leader epoch."""

    offset: int
    timestamp: int
    leader_epoch: int | None


class LogSegment:
    """Files of one segment; ``base_offset`` is the first offset it may hold."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        suffix: str = "",
        created_ms: int | None = None,
        roll_jitter_ms: int = 0,
    ) -> None:
        self.dir = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = self.dir / segment_file_name(base_offset, LOG_SUFFIX + suffix)
        self.offset_index = OffsetIndex(
            self.dir / segment_file_name(base_offset, INDEX_SUFFIX + suffix),
            base_offset,
            max_index_size,
        )
        self.time_index = TimeIndex(
            self.dir / segment_file_name(base_offset, TIME_INDEX_SUFFIX + suffix),
            base_offset,
            max_index_size,
        )
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self.fd).st_size
        self.created_ms = now_ms() if created_ms is None else created_ms
        self._bytes_since_last_index_entry = 0
        self._max_ts: TimestampOffset | None = None  # lazily from the time index
        self._rolling_ts: int | None = None  # max timestamp of the first batch
        self._next_offset: int | None = None  # cached end offset
        self.deleted = False
        self.roll_jitter_ms = roll_jitter_ms
        self._indexes_checked = False
        # first offset -> file position of the latest appends: followers and consumers
        # at the end of the log fetch from exactly such an offset, found without a scan
        self._append_starts: dict[int, int] = {}

    @classmethod
    def open(cls, directory: Path, base_offset: int, config, **kwargs) -> LogSegment:
        """A segment with the index settings of ``config`` (a LogConfig)."""
        return cls(
            directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            **kwargs,
        )

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self._size})"

    @property
    def size(self) -> int:
        return self._size

    # --- appends -------------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
    ) -> None:
        """Append whole batches (offsets assigned). One write; at most one index entry."""
        size = len(records)
        if size == 0:
            return
        self._check_indexes()
        if not self.offset_index.can_append_offset(largest_offset):
            raise ValueError(
                f"Offset {largest_offset} cannot be stored in segment {self.base_offset}"
            )
        position = self._size
        before = (self._rolling_ts, self._next_offset, self._max_ts)
        before_index = self._bytes_since_last_index_entry
        index_entries = None  # counted only when this append writes index entries
        if position == 0:
            self._rolling_ts = largest_timestamp
        try:
            _write_all(self.fd, records)
            self._size += size
            self._next_offset = largest_offset + 1
            max_ts = self._read_max_ts()
            if largest_timestamp > max_ts.timestamp:
                max_ts = self._max_ts = TimestampOffset(largest_timestamp, offset_of_max_timestamp)
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                index_entries = (self.offset_index.entries, self.time_index.entries)
                self.offset_index.append(largest_offset, position)
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                self._bytes_since_last_index_entry = 0
        except OSError:
            # A full disk or an I/O error part-way: cut the log and its indexes back to
            # where they were, so no half-written batch is ever read or acknowledged.
            os.ftruncate(self.fd, position)
            self._size = position
            self._rolling_ts, self._next_offset, self._max_ts = before
            self._bytes_since_last_index_entry = before_index
            if index_entries is not None:
                self.offset_index.truncate_to_entries(index_entries[0])
                self.time_index.truncate_to_entries(index_entries[1])
            raise
        self._bytes_since_last_index_entry += size
        starts = self._append_starts
        if len(starts) >= _APPEND_STARTS_KEPT:
            del starts[next(iter(starts))]  # the oldest
        starts[int.from_bytes(records[:8], "big")] = position

    def _check_indexes(self) -> None:
        """First use of the indexes: sanity check them, rebuild from the log if bad."""
        if not self._indexes_checked:
            self._indexes_checked = True
            self.load_indexes()

    def _read_max_ts(self) -> TimestampOffset:
        if self._max_ts is None:
            self._check_indexes()
            self._max_ts = self.time_index.last_entry
        return self._max_ts

    @property
    def max_timestamp_so_far(self) -> int:
        return self._read_max_ts().timestamp

    def _max_ts_offset(self) -> int:
        return self._read_max_ts().offset

    @property
    def max_timestamp_and_offset(self) -> TimestampOffset:
        return self._read_max_ts()

    def should_roll(
        self, messages_size: int, max_timestamp: int, max_offset: int, now: int, config
    ) -> bool:
        """Kafka's shouldRoll: segment.bytes, segment.ms (by first batch timestamp), a
        full index, or an offset that no longer fits a 32-bit relative offset."""
        self._check_indexes()
        waited = self.time_waited_for_roll(now, max_timestamp)
        reached_roll_ms = waited > config.max_segment_ms - self.roll_jitter_ms
        return (
            self._size > config.segment_bytes - messages_size
            or (self._size > 0 and reached_roll_ms)
            or self.offset_index.is_full
            or self.time_index.is_full
            or not self.offset_index.can_append_offset(max_offset)
        )

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        ts = self.first_batch_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self.created_ms

    def first_batch_timestamp(self) -> int | None:
        if self._rolling_ts is None and self._size >= BATCH_HEADER_SIZE:
            self._rolling_ts = read_batch_header(
                os.pread(self.fd, BATCH_HEADER_SIZE, 0)
            ).max_timestamp
        return self._rolling_ts

    # --- scanning ------------------------------------------------------------------------

    def batches_from(self, position: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the whole batches in [position, end), ``.position`` = file position."""
        end = self._size if end is None else min(end, self._size)
        buf = b""
        buf_start = position
        while end - position >= BATCH_HEADER_SIZE:
            rel = position - buf_start
            if len(buf) - rel < BATCH_HEADER_SIZE:
                buf = os.pread(self.fd, min(_SCAN_CHUNK, end - position), position)
                buf_start, rel = position, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            header = read_batch_header(buf, rel)
            if header.batch_length < BATCH_HEADER_SIZE - 12 or position + header.size > end:
                return
            yield header._replace(position=position)
            position += header.size

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchHeader | None:
        """The first batch whose last offset >= ``offset`` (Kafka's
        searchForOffsetWithSize from the index entry), or None past the end."""
        self._check_indexes()
        position = self._append_starts.get(offset)
        if position is not None and position >= starting_position:
            header = self._header_at(position)
            if header is not None and header.base_offset == offset:
                return header
        mapping = self.offset_index.lookup(offset)
        for header in self.batches_from(max(mapping.position, starting_position)):
            if header.last_offset >= offset:
                return header
        return None

    def _header_at(self, position: int) -> BatchHeader | None:
        """The header of the whole batch starting at ``position``, if one does."""
        if self._size - position < BATCH_HEADER_SIZE:
            return None
        header = read_batch_header(os.pread(self.fd, BATCH_HEADER_SIZE, position))
        if header.batch_length < BATCH_HEADER_SIZE - 12 or position + header.size > self._size:
            return None
        return header._replace(position=position)

    def read_next_offset(self) -> int:
        """The offset after the last batch (base_offset if empty)."""
        if self._next_offset is None and self._size == 0:
            self._next_offset = self.base_offset  # no batch: its indexes wait for first use
        if self._next_offset is None:
            self._check_indexes()
            last = None
            start = self.offset_index.lookup(self.offset_index.last_offset).position
            for last in self.batches_from(start):  # noqa: B007
                pass
            self._next_offset = last.next_offset if last is not None else self.base_offset
        return self._next_offset

    # --- reads ---------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FetchSlice | None:
        """Bytes from the batch holding ``start_offset``: at most ``max_size`` (or the
        whole first batch with ``min_one_message``), never past ``max_position``.
        None if ``start_offset`` is past the end of the segment."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read")
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        adjusted = max(max_size, first.size) if min_one_message else max_size
        limit = self._size if max_position is None else max_position
        size = max(0, min(limit - first.position, adjusted))
        return FetchSlice(self.fd, first.position, size, start_offset, self.base_offset)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= ``timestamp`` and offset >=
        ``starting_offset`` (Kafka's findOffsetByTimestamp: time index, then offset
        index, then the batches, decoding the first batch whose max timestamp is big
        enough)."""
        self._check_indexes()
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for header in self.batches_from(position):
            if header.max_timestamp < timestamp:
                continue
            for record in decode_records(os.pread(self.fd, header.size, header.position)):
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    epoch = header.partition_leader_epoch
                    return TimestampAndOffset(record.offset, record.timestamp, _epoch(epoch))
        return None

    def largest_timestamp_after(self, position: int) -> TimestampOffset:
        max_ts, offset = NO_TIMESTAMP, -1
        for header in self.batches_from(position):
            if header.max_timestamp > max_ts:
                max_ts, offset = header.max_timestamp, header.last_offset
        return TimestampOffset(max_ts, offset)

    @property
    def largest_timestamp(self) -> int:
        """The max record timestamp, or the file's mtime if none (retention.ms)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    # --- recovery and truncation ---------------------------------------------------------

    def sanity_check(self) -> None:
        """Load both indexes and check them; raises CorruptIndexError (or
        FileNotFoundError if the offset index is missing)."""
        if not self.offset_index.path.exists():
            raise FileNotFoundError(f"Offset index file {self.offset_index.path} does not exist")
        self.offset_index.sanity_check(self._size)
        if self.offset_index.entries:
            last = self.offset_index.entry(self.offset_index.entries - 1)
            raw = os.pread(self.fd, BATCH_HEADER_SIZE, last.position)
            header = read_batch_header(raw) if len(raw) == BATCH_HEADER_SIZE else None
            if (
                header is None
                or header.magic != 2
                or not (self.base_offset <= header.base_offset <= last.offset)
            ):
                raise CorruptIndexError(
                    f"Index {self.offset_index.path}: entry {last} is not at a batch boundary"
                )
        self.time_index.sanity_check(self.read_next_offset())

    def recover(self, on_batch=None) -> int:
        """Re-validate every batch (CRC and framing), rebuild both indexes, truncate at
        the first bad batch. ``on_batch(header)`` is called for each valid batch (leader
        epoch cache, producer state). Returns the number of bytes truncated."""
        self._indexes_checked = True
        self._append_starts.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self._max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        valid = 0
        last_index_entry = 0
        expected_offset = self.base_offset
        for header in self._scan_valid():
            bad_offsets = header.base_offset < expected_offset or not (
                self.offset_index.can_append_offset(header.last_offset)
            )
            if bad_offsets:
                break
            if header.max_timestamp > self._max_ts.timestamp:
                self._max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
            if valid - last_index_entry > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, valid)
                self.time_index.maybe_append(*self._max_ts)
                last_index_entry = valid
            valid += header.size
            expected_offset = header.next_offset
            if on_batch is not None:
                on_batch(header)
        truncated = self._size - valid
        if truncated > 0:
            os.ftruncate(self.fd, valid)
            self._size = valid
        self._next_offset = expected_offset
        self._rolling_ts = None
        self._bytes_since_last_index_entry = valid - last_index_entry
        self.time_index.maybe_append(*self._max_ts, skip_full_check=True)
        return truncated

    def _scan_valid(self) -> Iterator[BatchHeader]:
        """Valid batches from the start of the file (mmap, windowed to bound memory)."""
        if self._size == 0:
            return
        with mmap.mmap(self.fd, self._size, access=mmap.ACCESS_READ) as mm:
            view = memoryview(mm)
            try:
                pos = 0
                window_end = min(self._size, _RECOVER_WINDOW)
                while True:
                    end, headers = scan_valid_prefix(view[:window_end], pos)
                    yield from headers
                    del headers
                    if end >= self._size or window_end >= self._size:
                        return
                    need = _straddling_batch_end(view, end, window_end, self._size)
                    if need is None:
                        return
                    pos = end
                    window_end = min(self._size, max(need, pos + _RECOVER_WINDOW))
            finally:
                view.release()

    def truncate_to(self, offset: int) -> int:
        """Remove everything from ``offset`` on; returns the bytes removed."""
        mapping = self.translate_offset(offset)
        self._append_starts.clear()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        removed = 0
        if mapping is not None:
            removed = self._size - mapping.position
            os.ftruncate(self.fd, mapping.position)
            self._size = mapping.position
            self._next_offset = None
        if self._size == 0:
            self.created_ms = now_ms()
            self._rolling_ts = None
            self._next_offset = self.base_offset
        self._bytes_since_last_index_entry = 0
        self._max_ts = self._read_largest_timestamp()
        return removed

    def _read_largest_timestamp(self) -> TimestampOffset:
        last = self.time_index.last_entry
        position = self.offset_index.lookup(last.offset).position
        after = self.largest_timestamp_after(position)
        return after if after.timestamp > last.timestamp else last

    def rebuild_indexes(self) -> None:
        """Rebuild both index files from the batch headers (no CRC checks)."""
        self._indexes_checked = True
        self._append_starts.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self._max_ts = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        last_entry = 0
        last = None
        for header in self.batches_from(0):
            if header.max_timestamp > self._max_ts.timestamp:
                self._max_ts = TimestampOffset(header.max_timestamp, header.last_offset)
            if header.position - last_entry > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, header.position)
                self.time_index.maybe_append(*self._max_ts)
                last_entry = header.position
            last = header
        self.time_index.maybe_append(*self._max_ts, skip_full_check=True)
        self._next_offset = last.next_offset if last is not None else self.base_offset
        self._bytes_since_last_index_entry = self._size - last_entry

    def load_indexes(self) -> None:
        """Check the indexes; rebuild them from the log if missing or corrupt."""
        self._indexes_checked = True
        try:
            self.sanity_check()
        except (CorruptIndexError, FileNotFoundError):
            self.rebuild_indexes()

    # --- lifecycle -----------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """After a roll: record the final max timestamp in the time index."""
        self._append_starts.clear()  # only reads at the log end use it
        self._check_indexes()
        self.time_index.maybe_append(*self._read_max_ts(), skip_full_check=True)

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def close(self) -> None:
        if self.deleted:
            return
        if self._max_ts is not None:
            self.time_index.maybe_append(*self._max_ts, skip_full_check=True)
        self.close_handles()

    def close_handles(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def change_file_suffixes(self, old: str, new: str) -> None:
        for attr in ("offset_index", "time_index"):
            index = getattr(self, attr)
            index.rename(_replace_suffix(index.path, old, new))
        new_log = _replace_suffix(self.log_path, old, new)
        if self.log_path.exists():
            os.replace(self.log_path, new_log)
        self.log_path = new_log

    def update_parent_dir(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.log_path = self.dir / self.log_path.name
        for index in (self.offset_index, self.time_index):
            index.path = self.dir / index.path.name

    def rename_for_delete(self) -> None:
        """Rename the files to ``*.deleted``; the descriptor stays open for readers."""
        self.deleted = True
        self.offset_index.close()
        self.time_index.close()
        self.change_file_suffixes("", DELETED_SUFFIX)

    def delete_files(self) -> None:
        """Unlink the files (whatever their current suffix) and close the descriptor."""
        self.deleted = True
        self.close_handles()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)


def _replace_suffix(path: Path, old: str, new: str) -> Path:
    name = path.name
    if old and not name.endswith(old):
        raise ValueError(f"{name} does not end with {old}")
    return path.with_name((name[: -len(old)] if old else name) + new)


def _write_all(fd: int, data) -> None:
    written = os.write(fd, data)
    if written != len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def _epoch(epoch: int) -> int | None:
    return epoch if epoch >= 0 else None


def _straddling_batch_end(view: memoryview, end: int, window_end: int, size: int) -> int | None:
    """If the scan of a window stopped at ``end`` only because the next batch runs past
    the window, the file position where that batch ends; None if it is really bad."""
    if size - end < BATCH_HEADER_SIZE:
        return None
    header = read_batch_header(view, end)
    need = end + header.size
    if header.batch_length < BATCH_HEADER_SIZE - 12 or header.magic != 2:
        return None
    if need > window_end and need <= size:
        return need
    return None


class DeletionQueue:
    """Segments renamed to ``.deleted`` wait here ``file.delete.delay.ms`` before their
    files are unlinked and descriptors closed (Kafka's asynchronous delete)."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, LogSegment]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, segment: LogSegment, due_ms: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due_ms, self._seq, segment))

    def run(self, now: int) -> int:
        """Delete every segment that is due; returns how many."""
        done = 0
        while self._heap and self._heap[0][0] <= now:
            _, _, segment = heapq.heappop(self._heap)
            segment.delete_files()
            done += 1
        return done

    def run_all(self) -> int:
        return self.run(1 << 62)
