"""Kafka's text checkpoint files.

Format (Kafka's CheckpointFile): a version line, a count line, then one entry per
line. Written to ``<name>.tmp``, fsynced, renamed over the old file, and the directory
fsynced, so a crash leaves either the old or the new file.

- OffsetCheckpointFile (version 0, ``topic partition offset``): the per-log-dir
  ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (high watermarks) and ``cleaner-offset-checkpoint``.
- The ``leader-epoch-checkpoint`` (version 0, ``epoch startOffset``) uses the same
  CheckpointFile; see leader_epoch.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import compress, count
from operator import ne
from pathlib import Path
from typing import Generic, TypeVar

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CheckpointError",
    "CheckpointFile",
    "LOG_START_OFFSET_CHECKPOINT",
    "OffsetCheckpointFile",
    "OffsetCheckpointRows",
    "OffsetCheckpointText",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "fsync_dir",
    "write_atomically",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

T = TypeVar("T")


class CheckpointError(OSError):
    """A checkpoint file that cannot be parsed."""


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or new file in it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via ``path.tmp``: fsync, rename, fsync the directory."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


class CheckpointFile(Generic[T]):
    """Version line, count line, one formatted entry per line."""

    def __init__(
        self,
        path: Path | str,
        version: int,
        to_line: Callable[[T], str],
        from_line: Callable[[list[str]], T],
    ) -> None:
        self.path = Path(path)
        self.version = version
        self._to_line = to_line
        self._from_line = from_line

    def write(self, entries: Iterable[T]) -> None:
        items = list(entries)
        lines = [str(self.version), str(len(items))] + [self._to_line(e) for e in items]
        write_atomically(self.path, ("\n".join(lines) + "\n").encode())

    def read(self) -> list[T]:
        """The entries; [] if the file does not exist or is empty. Raises
        CheckpointError on a malformed file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except UnicodeDecodeError as exc:  # garbage on the disk, as a torn write leaves
            raise CheckpointError(f"Checkpoint file [{self.path}] is not text: {exc}") from None
        lines = text.splitlines()
        if not lines:
            return []
        if self._int(lines[0]) != self.version:
            raise CheckpointError(
                f"Unrecognised version:{lines[0]}, expected version: {self.version} in "
                f"checkpoint file at: {self.path}"
            )
        if len(lines) < 2:
            return []
        expected = self._int(lines[1])
        entries = []
        for line in lines[2:]:
            try:
                entries.append(self._from_line(line.split(" ")))
            except (ValueError, IndexError):
                raise self._malformed(line) from None
        if len(entries) != expected:
            raise CheckpointError(
                f"Expected [{expected}] entries in checkpoint file [{self.path}], but found "
                f"only [{len(entries)}]"
            )
        return entries

    def _int(self, line: str) -> int:
        try:
            return int(line)
        except ValueError:
            raise self._malformed(line) from None

    def _malformed(self, line: str) -> CheckpointError:
        return CheckpointError(f"Malformed line in checkpoint file [{self.path}]: {line}")


class OffsetCheckpointRows(Generic[T]):
    """The partitions of one log dir in an OffsetCheckpointFile's order, each line's
    ``topic partition `` prefix formatted once. ``source``: the mapping they were made
    from; the rows stand for it until the caller has a new one."""

    def __init__(self, source: Mapping[tuple[str, int], T]) -> None:
        self.source = source
        keys = sorted(source)
        self.items: list[T] = [source[k] for k in keys]
        self.prefixes = [f"{topic} {partition} " for topic, partition in keys]
        self.header = f"{OffsetCheckpointFile.VERSION}\n{len(keys)}\n"


class OffsetCheckpointText:
    """One OffsetCheckpointFile's lines as last written, so that the next version
    re-formats only the lines whose offset moved. A broker with 10,000 partitions writes
    its high-watermark file every 5 s; formatting all of it each time held the GIL for
    15-25 ms against the event loop (docs/benchmarks.md, fifth session)."""

    def __init__(self, rows: OffsetCheckpointRows) -> None:
        self.rows = rows
        self.values: list[int] | None = None  # as last written
        self.lines: list[str] = []

    def lines_for(self, values: Sequence[int]) -> list[str] | None:
        """The file's entry lines for ``values`` (one per row), or None when they are
        the ones last written."""
        prefixes = self.rows.prefixes
        if self.values is None:
            return list(map(str.__add__, prefixes, map(str, values)))
        if self.values == values:
            return None
        lines = self.lines.copy()
        for i in compress(count(), map(ne, values, self.values)):
            lines[i] = prefixes[i] + str(values[i])
        return lines

    def render(self, lines: list[str]) -> bytes:
        """The file's bytes, as OffsetCheckpointFile.write gives them."""
        body = "\n".join(lines) + "\n" if lines else ""
        return (self.rows.header + body).encode()

    def written(self, values: list[int], lines: list[str]) -> None:
        self.values = values
        self.lines = lines


def _offset_entry(parts: list[str]) -> tuple[tuple[str, int], int]:
    if len(parts) != 3:
        raise ValueError(parts)
    return (parts[0], int(parts[1])), int(parts[2])


class OffsetCheckpointFile:
    """``topic partition offset`` lines (Kafka's OffsetCheckpointFile, version 0)."""

    VERSION = 0

    def __init__(self, path: Path | str) -> None:
        self._file: CheckpointFile[tuple[tuple[str, int], int]] = CheckpointFile(
            path,
            self.VERSION,
            lambda e: f"{e[0][0]} {e[0][1]} {e[1]}",
            _offset_entry,
        )

    @property
    def path(self) -> Path:
        return self._file.path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self._file.write(sorted(offsets.items()))

    def read(self) -> dict[tuple[str, int], int]:
        return dict(self._file.read())
