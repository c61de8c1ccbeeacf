"""The leader epoch cache and its ``leader-epoch-checkpoint`` file (Kafka's
LeaderEpochFileCache + LeaderEpochCheckpointFile).

Each entry says "leader epoch E started writing at offset S". The file is Kafka's
checkpoint text format: ``0`` (version), the entry count, then ``epoch startOffset``
lines. It is rewritten (atomically) whenever the cache changes; changes are rare
(leader elections, truncation, log start offset moves).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from broker.log.checkpoint import CheckpointFile

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochFileCache",
]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def _entry(parts: list[str]) -> EpochEntry:
    if len(parts) != 2:
        raise ValueError(parts)
    return EpochEntry(int(parts[0]), int(parts[1]))


class LeaderEpochFileCache:
    """Epoch -> start offset, kept sorted by epoch (and so by offset)."""

    def __init__(self, path: Path | str) -> None:
        self._file: CheckpointFile[EpochEntry] = CheckpointFile(
            path, 0, lambda e: f"{e.epoch} {e.start_offset}", _entry
        )
        self._entries: list[EpochEntry] = []
        for entry in self._file.read():
            self._assign(entry)

    @property
    def path(self) -> Path:
        return self._file.path

    # --- queries -------------------------------------------------------------------------

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset`` (None if before the first entry)."""
        previous = None
        for entry in self._entries:
            if entry.start_offset == offset:
                return entry.epoch
            if entry.start_offset > offset:
                return previous
            previous = entry.epoch
        return previous

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, the start offset of the
        first epoch after it), or (LEO) for the latest epoch; (-1, -1) if unknown."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        floor = None
        for entry in self._entries:
            if entry.epoch > requested_epoch:
                if floor is None:
                    return requested_epoch, entry.start_offset
                return floor.epoch, entry.start_offset
            floor = entry
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

    # --- updates -------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if already known).
        Entries with a larger-or-equal epoch or start offset are dropped first."""
        latest = self._entries[-1] if self._entries else None
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return  # the common case on every append: nothing to do
        if self._assign(EpochEntry(epoch, start_offset)):
            self._write()

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry {entry}")
        latest = self.latest_entry
        if (
            latest is not None
            and entry.epoch == latest.epoch
            and (entry.start_offset >= latest.start_offset)
        ):
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: entries wholly before it go, and the
        epoch covering it is moved up to start there."""
        removed = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            removed = self._entries.pop(0)
        if removed is not None:
            self._entries.insert(0, EpochEntry(removed.epoch, start_offset))
            self._write()

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self._write()

    def update_parent_dir(self, directory: Path) -> None:
        self._file.path = Path(directory) / self._file.path.name

    def _write(self) -> None:
        if self.path.parent.exists():
            self._file.write(self._entries)
