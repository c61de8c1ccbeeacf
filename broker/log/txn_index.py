"""The aborted transaction index (Kafka's TransactionIndex) and control records.

One ``<base offset>.txnindex`` file per segment that saw an ABORT marker, entries of
34 bytes in Kafka's format::

    version i16 (=0) | producerId i64 | firstOffset i64 | lastOffset i64 |
    lastStableOffset i64

``lastOffset`` is the marker's offset. A read_committed Fetch gets the aborted
transactions that overlap the fetched range, so the consumer can drop their records.

Control records (the markers) are Kafka's: key ``version i16 (=0) | type i16`` (0 ABORT,
1 COMMIT), value ``version i16 (=0) | coordinatorEpoch i32``.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "ABORT",
    "COMMIT",
    "AbortedTxn",
    "TransactionIndex",
    "control_key",
    "control_value",
    "parse_control_key",
]

TXN_INDEX_SUFFIX = ".txnindex"
ABORT, COMMIT = 0, 1
_ENTRY = struct.Struct(">hqqqq")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def control_key(commit: bool) -> bytes:
    return _CONTROL_KEY.pack(0, COMMIT if commit else ABORT)


def control_value(coordinator_epoch: int) -> bytes:
    return _CONTROL_VALUE.pack(0, coordinator_epoch)


def parse_control_key(key: bytes | None) -> int | None:
    """ABORT or COMMIT, None for an unknown control record."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    _version, kind = _CONTROL_KEY.unpack_from(key, 0)
    return kind if kind in (ABORT, COMMIT) else None


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(0, *self)


class TransactionIndex:
    """Every aborted transaction of a log, in memory by last offset, on disk per segment."""

    def __init__(self, log_dir: Path, file_names: Iterable[str] | None = None) -> None:
        self.dir = Path(log_dir)
        self.entries: list[AbortedTxn] = []
        self._files: dict[int, Path] = {}
        self.load(file_names)

    def load(self, file_names: Iterable[str] | None = None) -> None:
        """Read every ``.txnindex`` file; ``file_names``: the dir's files, if listed already."""
        self.entries.clear()
        self._files.clear()
        if file_names is None:
            if not self.dir.is_dir():
                return
            file_names = [p.name for p in self.dir.glob(f"*{TXN_INDEX_SUFFIX}")]
        for name in sorted(n for n in file_names if n.endswith(TXN_INDEX_SUFFIX)):
            path = self.dir / name
            try:
                base = int(path.name[: -len(TXN_INDEX_SUFFIX)])
            except ValueError:
                continue
            self._files[base] = path
            data = path.read_bytes()
            usable = len(data) - len(data) % _ENTRY.size
            for version, *fields in _ENTRY.iter_unpack(data[:usable]):
                if version == 0:
                    self.entries.append(AbortedTxn(*fields))
        self.entries.sort(key=lambda e: e.last_offset)

    def append(self, segment_base: int, entry: AbortedTxn) -> None:
        path = self._files.setdefault(
            segment_base, self.dir / f"{segment_base:020d}{TXN_INDEX_SUFFIX}"
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.encode())
        finally:
            os.close(fd)
        self.entries.append(entry)

    def collect(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper): Kafka's collectAbortedTxns."""
        keys = [e.last_offset for e in self.entries]
        i = bisect.bisect_left(keys, start)
        return [e for e in self.entries[i:] if e.first_offset < upper]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past ``offset``; rewrite their files."""
        if not any(e.last_offset >= offset for e in self.entries):
            return
        self.entries = [e for e in self.entries if e.last_offset < offset]
        self._rewrite()

    def drop_before(self, log_start: int, segment_bases: list[int]) -> None:
        """After segments are deleted: forget entries and files below the log start."""
        self.entries = [e for e in self.entries if e.last_offset >= log_start]
        first = segment_bases[0] if segment_bases else log_start
        for base in [b for b in self._files if b < first]:
            self._files.pop(base).unlink(missing_ok=True)

    def delete_all(self) -> None:
        for path in self._files.values():
            path.unlink(missing_ok=True)
        self._files.clear()
        self.entries.clear()

    def _rewrite(self) -> None:
        bases = sorted(self._files)
        by_base: dict[int, list[AbortedTxn]] = {b: [] for b in bases}
        for e in self.entries:
            i = bisect.bisect_right(bases, e.last_offset) - 1
            by_base[bases[max(i, 0)]].append(e)
        for base, items in by_base.items():
            path = self._files[base]
            if items:
                path.write_bytes(b"".join(x.encode() for x in items))
            else:
                path.unlink(missing_ok=True)
                del self._files[base]
