"""Idempotent producer state per partition (Kafka's ProducerStateManager).

For each producer id the broker remembers its epoch and the metadata of its last 5
batches (first/last sequence, first/last offset, timestamp), which is enough to:

- answer a retried batch with the offsets it got the first time (``duplicate``),
- refuse a sequence gap (OUT_OF_ORDER_SEQUENCE_NUMBER),
- refuse a zombie with an older epoch (INVALID_PRODUCER_EPOCH).

Snapshots: ``<offset:020d>.snapshot`` in the partition directory, written on segment
roll and on close; the state is rebuilt on open from the latest snapshot plus the
batch headers after it (see loader.py), so it survives clean and unclean stops.
The file is Kafka's ProducerSnapshot v1, byte for byte::

    version i16 (=1) | crc u32 (CRC-32C of everything after it) | count i32 |
    count x (producerId i64 | epoch i16 | lastSequence i32 | lastOffset i64 |
             offsetDelta i32 | timestamp i64 | coordinatorEpoch i32 |
             currentTxnFirstOffset i64)

Like Kafka, a snapshot keeps only each producer's last batch; batches replayed from
the log after the snapshot refill the rest of the five.

Transactions (KIP-98): a transactional batch opens the producer's transaction at its
first offset (``current_txn_first_offset``) until a COMMIT or ABORT control batch (a
marker) from the same producer closes it; the smallest open first offset is the first
unstable offset, which bounds the last stable offset a read_committed consumer sees.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import crc32c

from broker.log.checkpoint import fsync_dir
from broker.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BatchMetadata",
    "NUM_BATCHES_TO_RETAIN",
    "ProducerStateEntry",
    "ProducerStateManager",
    "snapshot_path",
]

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = (1 << 31) - 1
SNAPSHOT_SUFFIX = ".snapshot"
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86400000  # producer.id.expiration.ms

_SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


def snapshot_path(log_dir: Path, offset: int) -> Path:
    return Path(log_dir) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence (wraps at Int.MAX)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add_batch(self, epoch: int, meta: BatchMetadata) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(meta)
        self.last_timestamp = meta.timestamp

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
        )


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition, plus its snapshots."""

    def __init__(
        self,
        log_dir: Path | str,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        file_names: Iterable[str] | None = None,
    ) -> None:
        """``file_names``: the files of ``log_dir``, when the caller listed them already."""
        self.log_dir = Path(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        #: the state reflects every batch below this offset
        self.map_end_offset = 0
        self.last_snap_offset = 0
        self._snapshots: dict[int, Path] = self._list_snapshots(file_names)

    # --- client appends ------------------------------------------------------------------

    def check_append(
        self,
        batches: Iterable[tuple[int, int, int, int, int, int, int]],
        check_sequence: bool = True,
    ) -> tuple[dict[int, ProducerStateEntry], BatchMetadata | None]:
        """Validate a client append before it is written.

        ``batches``: (producer_id, epoch, base_sequence, last_offset_delta,
        first_offset, max_timestamp, is_transactional) per batch, offsets as they
        will be assigned. Returns (updated entries to ``apply`` after the write,
        None) or ({}, the original batch) when one of them is a retried duplicate.
        Raises KafkaError for fenced epochs and sequence gaps; ``check_sequence``
        False is Kafka's AppendOrigin.COORDINATOR (the group coordinator's
        transactional offset commits): the epoch is checked, sequences are not.
        """
        updated: dict[int, ProducerStateEntry] = {}
        for pid, epoch, first_seq, delta, first_offset, max_ts, txn in batches:
            if pid == NO_PRODUCER_ID:
                continue
            current = self.producers.get(pid)
            last_seq = increment_sequence(first_seq, delta)
            if current is not None and check_sequence:
                duplicate = current.find_duplicate(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return {}, duplicate
            entry = updated.get(pid)
            if entry is None:
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                updated[pid] = entry
            if check_sequence:
                _check_epoch_and_sequence(pid, entry, epoch, first_seq, first_offset)
            elif epoch < entry.producer_epoch:
                _check_epoch_and_sequence(pid, entry, epoch, first_seq, first_offset)
            entry.add_batch(epoch, BatchMetadata(last_seq, first_offset + delta, delta, max_ts))
            if txn and entry.current_txn_first_offset is None:
                entry.current_txn_first_offset = first_offset
        return updated, None

    def apply(self, updated: dict[int, ProducerStateEntry], end_offset: int) -> None:
        """Install the entries from check_append once the records are in the log."""
        if updated:
            self.producers.update(updated)
        self.map_end_offset = end_offset

    # --- replication / recovery ----------------------------------------------------------

    def replay_batch(self, header) -> None:
        """Apply a batch already in the log (recovery, follower appends): no checks,
        like Kafka's AppendOrigin.REPLICATION. ``header``: a records.BatchHeader."""
        pid, epoch, base_seq = header.producer_id, header.producer_epoch, header.base_sequence
        base_offset, delta, max_ts = (
            header.base_offset,
            header.last_offset_delta,
            header.max_timestamp,
        )
        if pid != NO_PRODUCER_ID:
            entry = self.producers.get(pid)
            if entry is None:
                entry = self.producers[pid] = ProducerStateEntry(pid)
            if header.is_control:
                if epoch > entry.producer_epoch:
                    entry.batches.clear()
                    entry.producer_epoch = epoch
                entry.current_txn_first_offset = None
                entry.last_timestamp = max_ts
            else:
                last_seq = increment_sequence(base_seq, delta)
                entry.add_batch(epoch, BatchMetadata(last_seq, base_offset + delta, delta, max_ts))
                if header.is_transactional and entry.current_txn_first_offset is None:
                    entry.current_txn_first_offset = base_offset
        self.map_end_offset = base_offset + delta + 1

    # --- transactions --------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None if there is none."""
        firsts = [
            e.current_txn_first_offset
            for e in self.producers.values()
            if e.current_txn_first_offset is not None
        ]
        return min(firsts) if firsts else None

    def check_marker(self, pid: int, epoch: int) -> ProducerStateEntry:
        """Kafka's appendEndTxnMarker epoch check: a marker from an older epoch is a
        zombie coordinator's and is refused."""
        entry = self.producers.get(pid)
        if entry is not None and epoch < entry.producer_epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {pid} in the transaction marker is {epoch}, which is "
                f"smaller than the last seen epoch {entry.producer_epoch}",
            )
        return entry if entry is not None else ProducerStateEntry(pid)

    def complete_txn(self, pid: int, epoch: int, coordinator_epoch: int, ts: int) -> int | None:
        """Close ``pid``'s transaction (a marker was written); its first offset, if any."""
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        if epoch > entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = epoch
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = ts
        return first

    def remove_expired_producers(self, now_ms: int) -> None:
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is None
            and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]

    # --- snapshots -----------------------------------------------------------------------

    def _list_snapshots(self, file_names: Iterable[str] | None) -> dict[int, Path]:
        if file_names is None:
            if not self.log_dir.is_dir():
                return {}
            file_names = [p.name for p in self.log_dir.iterdir() if p.is_file()]
        found: dict[int, Path] = {}
        for name in file_names:
            if name.endswith(SNAPSHOT_SUFFIX):
                try:
                    found[int(name[: -len(SNAPSHOT_SUFFIX)])] = self.log_dir / name
                except ValueError:
                    continue
        return dict(sorted(found.items()))

    @property
    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """Write a snapshot at map_end_offset if the state moved since the last one."""
        if self.map_end_offset <= self.last_snap_offset:
            return None
        path = snapshot_path(self.log_dir, self.map_end_offset)
        data = self.serialize()
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if sync:
            fsync_dir(self.log_dir)
        self._snapshots[self.map_end_offset] = path
        self.last_snap_offset = self.map_end_offset
        return path

    def serialize(self) -> bytes:
        body = bytearray(len(self.producers).to_bytes(4, "big"))
        for pid, e in self.producers.items():
            last = e.batches[-1] if e.batches else None
            body += _ENTRY.pack(
                pid,
                e.producer_epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                last.offset_delta if last else 0,
                e.last_timestamp,
                e.coordinator_epoch,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
            )
        crc = crc32c.crc32c(bytes(body))
        return _SNAPSHOT_VERSION.to_bytes(2, "big") + crc.to_bytes(4, "big") + bytes(body)

    @staticmethod
    def read_snapshot(path: Path) -> list[ProducerStateEntry]:
        """Parse a snapshot file; raises ValueError if it is corrupt."""
        data = Path(path).read_bytes()
        if len(data) < _HEADER.size:
            raise ValueError(f"Snapshot {path} is truncated")
        version, crc, count = _HEADER.unpack_from(data, 0)
        if version != _SNAPSHOT_VERSION:
            raise ValueError(f"Snapshot {path} contained an unknown file version {version}")
        if crc32c.crc32c(data[6:]) != crc:
            raise ValueError(f"Snapshot {path} is corrupt (CRC is no longer valid)")
        if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
            raise ValueError(f"Snapshot {path} has a bad entry count {count}")
        entries = []
        for pid, epoch, last_seq, last_off, delta, ts, coord, txn in _ENTRY.iter_unpack(
            data[_HEADER.size :]
        ):
            entry = ProducerStateEntry(pid, epoch, coord, ts, txn if txn >= 0 else None)
            if last_off >= 0:
                entry.batches.append(BatchMetadata(last_seq, last_off, delta, ts))
            entries.append(entry)
        return entries

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drop snapshots outside (log_start, log_end] and, unless the state already
        ends at log_end_offset, reload from the latest remaining snapshot."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._delete_snapshot(offset)
        if log_end_offset != self.map_end_offset:
            self.producers.clear()
            self._load_latest_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def _load_latest_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self._snapshots:
            offset = max(self._snapshots)
            try:
                entries = self.read_snapshot(self._snapshots[offset])
            except (OSError, ValueError):
                self._delete_snapshot(offset)
                continue
            for entry in entries:
                expired = now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
                if entry.current_txn_first_offset is not None or not expired:
                    self.producers[entry.producer_id] = entry
            self.last_snap_offset = self.map_end_offset = offset
            return
        self.last_snap_offset = self.map_end_offset = log_start_offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset
        latest = self.latest_snapshot_offset
        self.last_snap_offset = latest if latest is not None else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        for snap in list(self._snapshots):
            self._delete_snapshot(snap)
        self.last_snap_offset = 0
        self.map_end_offset = offset

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [o for o in self._snapshots if o < offset]:
            self._delete_snapshot(snap)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots that match no segment, except the newest stray one if it is
        past the last segment's base offset (Kafka's removeStraySnapshots)."""
        bases = set(segment_base_offsets)
        strays = [o for o in sorted(self._snapshots) if o not in bases]
        keep = strays[-1] if strays and bases and strays[-1] > max(bases) else None
        for offset in strays:
            if offset != keep:
                self._delete_snapshot(offset)

    def update_parent_dir(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)
        self._snapshots = {o: self.log_dir / p.name for o, p in self._snapshots.items()}

    def _delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)


def _check_epoch_and_sequence(
    pid: int, entry: ProducerStateEntry, epoch: int, first_seq: int, offset: int
) -> None:
    """Kafka's ProducerAppendInfo checkProducerEpoch + checkSequence (client origin)."""
    if epoch < entry.producer_epoch:
        raise KafkaError(
            ErrorCode.invalid_producer_epoch,
            f"Epoch of producer {pid} at offset {offset} is {epoch}, which is smaller than "
            f"the last seen epoch {entry.producer_epoch}",
        )
    if epoch != entry.producer_epoch:
        if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"Invalid sequence number for new epoch of producer {pid} at offset {offset}: "
                f"{epoch} (request epoch), {first_seq} (seq. number), "
                f"{entry.producer_epoch} (current producer epoch)",
            )
        return
    last_seq = entry.last_seq
    if entry.producer_epoch == NO_PRODUCER_EPOCH:
        return
    if not (first_seq == last_seq + 1 or (first_seq == 0 and last_seq == INT32_MAX)):
        raise KafkaError(
            ErrorCode.out_of_order_sequence_number,
            f"Out of order sequence number for producer {pid} at offset {offset}: "
            f"{first_seq} (incoming seq. number), {last_seq} (current end sequence number)",
        )
