"""Sparse segment indexes: OffsetIndex (``.index``) and TimeIndex (``.timeindex``).

File formats are Kafka's, big endian:

- ``.index``: 8-byte entries ``relativeOffset i32 | position i32``; an entry maps the
  last offset of an appended chunk to the file position where that chunk starts.
- ``.timeindex``: 12-byte entries ``timestamp i64 | relativeOffset i32``; an entry
  says "every record before this offset has timestamp <= this timestamp".

Entries live in memory (``array``) for binary search and are appended to the file
with one ``os.write`` each. An index is loaded from its file lazily, on first use, and
sanity checked then; a bad file raises ``CorruptIndexError`` so the segment can
rebuild it from the ``.log``. Unlike Kafka we do not preallocate index files (no
mmap), so a file's size is always its number of entries times the entry size.

An index needs its file only for the occasional append (one entry per
``index.interval.bytes`` of log), so at most ``MAX_OPEN_INDEX_FILES`` index files are
held open per process, least recently used closed first: like Kafka, whose indexes
are mmapped without a descriptor, a broker then needs about one descriptor per
segment (its ``.log``), not three, and 10,000 partitions fit a 20,000 ulimit.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "CorruptIndexError",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
]

NO_TIMESTAMP = -1
_INT32_MAX = (1 << 31) - 1
_BIG_ENDIAN = sys.byteorder == "big"
MAX_OPEN_INDEX_FILES = 512


class CorruptIndexError(Exception):
    """An index file that fails its sanity check; rebuild it from the log."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


def _be(typecode: str, data: bytes) -> array:
    arr = array(typecode)
    arr.frombytes(data)
    if not _BIG_ENDIAN:
        arr.byteswap()
    return arr


def _to_be(arr: array) -> bytes:
    if _BIG_ENDIAN:
        return arr.tobytes()
    out = array(arr.typecode, arr)
    out.byteswap()
    return out.tobytes()


class _OpenIndexFiles:
    """The index files held open, least recently used first; past the cap the oldest
    is closed (its entries stay in memory; a later append or fsync reopens it)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._open: dict[_Index, None] = {}  # insertion order = recency
        self._lock = threading.Lock()

    def fd(self, index: _Index) -> int:
        with self._lock:
            if index._fd is not None:
                self._open.pop(index, None)
                self._open[index] = None
                return index._fd
            while len(self._open) >= self.cap:
                oldest = next(iter(self._open))
                del self._open[oldest]
                oldest._close_fd()
            index._fd = os.open(index.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            self._open[index] = None
            return index._fd

    def forget(self, index: _Index) -> None:
        with self._lock:
            self._open.pop(index, None)
            index._close_fd()

    def __len__(self) -> int:
        return len(self._open)


class _Index:
    """Shared file handling: lazy load, append, truncate, flush, rename, delete."""

    ENTRY_SIZE = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_entries = max_index_size // self.ENTRY_SIZE
        self._fd: int | None = None
        self._loaded = False
        self._keys: array = array("q")  # relative offsets, or timestamps
        self._dirty = False

    # --- file ----------------------------------------------------------------------------

    def _open(self) -> int:
        return OPEN_INDEX_FILES.fd(self)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        if len(data) % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {len(data)} bytes which is not "
                f"a multiple of {self.ENTRY_SIZE}"
            )
        self._parse(data)
        self._loaded = True

    def _parse(self, data: bytes) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _write_entry(self, raw: bytes) -> None:
        os.write(self._open(), raw)
        self._dirty = True

    def truncate_to_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries (an append that failed part-way goes)."""
        self._truncate_to_entries(entries)

    def _truncate_to_entries(self, entries: int) -> None:
        self._ensure_loaded()
        if entries >= self.entries:
            return
        self._cut(entries)
        os.ftruncate(self._open(), entries * self.ENTRY_SIZE)
        self._dirty = True

    def _cut(self, entries: int) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def entries(self) -> int:
        if not self._loaded:  # checked here, not by a call: read on every append
            self._ensure_loaded()
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        if not self._loaded:
            self._ensure_loaded()
        return len(self._keys) >= self.max_entries

    def size_in_bytes(self) -> int:
        return self.entries * self.ENTRY_SIZE

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._loaded = True
        self._cut(0)
        os.ftruncate(self._open(), 0)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty:  # an fd closed since the write still fsyncs the same file
            if self._fd is not None or self.path.exists():
                os.fsync(self._open())
            self._dirty = False

    def close(self) -> None:
        OPEN_INDEX_FILES.forget(self)

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = Path(new_path)

    def delete_if_exists(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rewrite(self) -> None:
        """Write the in-memory entries as the whole file (after a rebuild)."""
        self._ensure_loaded()
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(self._serialize())
        self.close()
        os.replace(tmp, self.path)
        self._dirty = True

    def _serialize(self) -> bytes:  # pragma: no cover - overridden
        raise NotImplementedError

    def relative(self, offset: int) -> int:
        return offset - self.base_offset

    def can_append_offset(self, offset: int) -> bool:
        rel = offset - self.base_offset
        return 0 <= rel <= _INT32_MAX


class OffsetIndex(_Index):
    """offset -> file position, sparse (Kafka's OffsetIndex)."""

    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._positions: array = array("i")
        self._keys = array("i")

    def _parse(self, data: bytes) -> None:
        both = _be("i", data)
        self._keys = both[0::2]
        self._positions = both[1::2]

    def _serialize(self) -> bytes:
        both = array("i", bytes(8 * len(self._keys)))
        both[0::2] = self._keys
        both[1::2] = self._positions
        return _to_be(both)

    def _cut(self, entries: int) -> None:
        del self._keys[entries:]
        del self._positions[entries:]

    def sanity_check(self, log_size: int) -> None:
        """Entries strictly increasing in offset and position, positions inside the
        log file. Raises CorruptIndexError."""
        self._ensure_loaded()
        keys, pos = self._keys, self._positions
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or pos[i] <= pos[i - 1]:
                raise CorruptIndexError(
                    f"Corrupt index {self.path}: entry {i} ({keys[i]}, {pos[i]}) is not after "
                    f"entry {i - 1} ({keys[i - 1]}, {pos[i - 1]})"
                )
        if keys and (keys[0] < 0 or pos[0] < 0 or pos[-1] >= max(log_size, 1)):
            raise CorruptIndexError(
                f"Corrupt index {self.path}: entries point outside the {log_size}-byte log"
            )

    @property
    def last_offset(self) -> int:
        self._ensure_loaded()
        return self.base_offset + self._keys[-1] if self._keys else self.base_offset

    def entry(self, n: int) -> OffsetPosition:
        self._ensure_loaded()
        return OffsetPosition(self.base_offset + self._keys[n], self._positions[n])

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base_offset, 0)."""
        self._ensure_loaded()
        slot = bisect_right(self._keys, target_offset - self.base_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._keys[slot], self._positions[slot])

    def lookup_position(self, position: int) -> OffsetPosition | None:
        """The entry with the largest position <= ``position`` (None if none)."""
        self._ensure_loaded()
        slot = bisect_right(self._positions, position) - 1
        if slot < 0:
            return None
        return OffsetPosition(self.base_offset + self._keys[slot], self._positions[slot])

    def append(self, offset: int, position: int) -> None:
        self._ensure_loaded()
        if self.is_full:
            raise ValueError(f"Attempt to append to a full index {self.path}")
        rel = offset - self.base_offset
        if self._keys and rel <= self._keys[-1]:
            raise ValueError(
                f"Attempt to append offset {offset} to {self.path}, not larger than the last "
                f"offset {self.last_offset}"
            )
        self._keys.append(rel)
        self._positions.append(position)
        self._write_entry(rel.to_bytes(4, "big") + position.to_bytes(4, "big"))

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._ensure_loaded()
        slot = bisect_right(self._keys, offset - self.base_offset) - 1
        if slot < 0:
            keep = 0
        elif self._keys[slot] == offset - self.base_offset:
            keep = slot
        else:
            keep = slot + 1
        self._truncate_to_entries(keep)

    def truncate_to_position(self, size: int) -> None:
        """Remove entries pointing at or past ``size`` bytes of the log."""
        self._ensure_loaded()
        self._truncate_to_entries(bisect_right(self._positions, size - 1))


class TimeIndex(_Index):
    """timestamp -> offset, sparse (Kafka's TimeIndex)."""

    ENTRY_SIZE = 12

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._keys = array("q")  # timestamps
        self._offsets: array = array("i")

    def _parse(self, data: bytes) -> None:
        if not data:
            self._keys, self._offsets = array("q"), array("i")
            return
        ts, rel = zip(*struct.iter_unpack(">qi", data), strict=True)
        self._keys, self._offsets = array("q", ts), array("i", rel)

    def _serialize(self) -> bytes:
        return b"".join(
            t.to_bytes(8, "big", signed=True) + r.to_bytes(4, "big", signed=True)
            for t, r in zip(self._keys, self._offsets, strict=True)
        )

    def _cut(self, entries: int) -> None:
        del self._keys[entries:]
        del self._offsets[entries:]

    @property
    def is_full(self) -> bool:
        # one slot is kept for the final entry written when the segment becomes inactive
        if not self._loaded:
            self._ensure_loaded()
        return len(self._keys) >= self.max_entries - 1

    def sanity_check(self, next_offset: int) -> None:
        self._ensure_loaded()
        ts, rel = self._keys, self._offsets
        for i in range(1, len(ts)):
            if ts[i] < ts[i - 1] or rel[i] < rel[i - 1]:
                raise CorruptIndexError(
                    f"Corrupt time index {self.path}: entry {i} goes backwards in time or offset"
                )
        if rel and (rel[0] < 0 or self.base_offset + rel[-1] > max(next_offset - 1, 0)):
            raise CorruptIndexError(f"Corrupt time index {self.path}: offsets outside the segment")

    @property
    def last_entry(self) -> TimestampOffset:
        self._ensure_loaded()
        if not self._keys:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._keys[-1], self.base_offset + self._offsets[-1])

    def entry(self, n: int) -> TimestampOffset:
        self._ensure_loaded()
        return TimestampOffset(self._keys[n], self.base_offset + self._offsets[n])

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (NO_TIMESTAMP, base)."""
        self._ensure_loaded()
        slot = bisect_right(self._keys, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._keys[slot], self.base_offset + self._offsets[slot])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append if ``timestamp`` is larger than the last entry's (Kafka's maybeAppend)."""
        self._ensure_loaded()
        if not skip_full_check and self.is_full:
            raise ValueError(f"Attempt to append to a full time index {self.path}")
        last = self.last_entry
        if self._keys and offset < last.offset:
            raise ValueError(
                f"Attempt to append offset {offset} to time index {self.path}, smaller than "
                f"the last offset {last.offset}"
            )
        if timestamp > last.timestamp:
            rel = offset - self.base_offset
            self._keys.append(timestamp)
            self._offsets.append(rel)
            self._write_entry(timestamp.to_bytes(8, "big", signed=True) + rel.to_bytes(4, "big"))

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= ``offset``."""
        self._ensure_loaded()
        self._truncate_to_entries(bisect_left(self._offsets, offset - self.base_offset))


OPEN_INDEX_FILES = _OpenIndexFiles(MAX_OPEN_INDEX_FILES)
