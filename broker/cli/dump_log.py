"""quill-dump-log: print the contents of log segment files (Kafka's kafka-dump-log.sh).

Reads files directly, no broker needed::

    quill-dump-log --files /data/t-0/00000000000000000000.log --print-data-log
    Dumping /data/t-0/00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 ... crc: 1234 isvalid: true
    | offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 5 sequence: -1 headerKeys: [] key: k payload: hello

Handles ``.log`` segments, ``.index`` (``offset: N position: P``), ``.timeindex``
(``timestamp: T offset: N``) and producer ``.snapshot`` files, with Kafka's output.
Index entries are checked against the segment beside them, as Kafka does.
"""

from __future__ import annotations

import argparse
import mmap
import struct
import sys
from bisect import bisect_left
from contextlib import contextmanager
from pathlib import Path

from broker.cli.common import ToolParser
from broker.protocol.compression import CODEC_NAMES
from broker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    crc_is_valid,
    decode_records,
    read_batch_header,
)

_FRAMING = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_SNAPSHOT_HEADER = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "QUORUM_REASSIGNMENT", 3: "LEADER_CHANGE"}
INT32_MAX = (1 << 31) - 1


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        examples=__doc__,
        prog="quill-dump-log",
        description="Print the batches and records of log segments, and the entries of "
        "offset/time indexes and producer snapshots (like kafka-dump-log.sh).",
    )
    p.add_argument(
        "--files",
        required=True,
        metavar="FILE[,FILE]",
        help="comma-separated .log, .index, .timeindex or .snapshot files",
    )
    p.add_argument(
        "--print-data-log",
        action="store_true",
        help="print record keys and payloads (implies --deep-iteration)",
    )
    p.add_argument("--deep-iteration", action="store_true", help="print every record of a batch")
    p.add_argument(
        "--skip-record-metadata",
        action="store_true",
        help="with --print-data-log: print only keys and payloads of records",
    )
    p.add_argument(
        "--verify-index-only",
        action="store_true",
        help="for index files: only report mismatches with the log",
    )
    p.add_argument(
        "--max-bytes",
        type=int,
        default=INT32_MAX,
        help="stop after reading this many bytes of a .log file",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    failed = False
    for name in [f for f in args.files.split(",") if f]:
        path = Path(name)
        print(f"Dumping {path}")
        try:
            _dump_file(path, args)
        except OSError as exc:
            print(f"Error: {exc.strerror or exc}: {path}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


def _dump_file(path: Path, args) -> None:
    suffix = path.suffix
    if suffix == ".log":
        dump_log(
            path,
            deep=args.deep_iteration or args.print_data_log,
            print_data=args.print_data_log,
            skip_metadata=args.skip_record_metadata,
            max_bytes=args.max_bytes,
        )
    elif suffix == ".index":
        dump_offset_index(path, verify_only=args.verify_index_only)
    elif suffix == ".timeindex":
        dump_time_index(path, verify_only=args.verify_index_only)
    elif suffix == ".snapshot":
        dump_producer_snapshot(path)
    else:
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(path))
        print(f"Ignoring unknown file {path}", file=sys.stderr)


@contextmanager
def _mapped(path: Path):
    """The file's bytes (mmap for non-empty files)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        return 0


# --------------------------------------------------------------------------- .log


def iter_batches(buf, limit: int | None = None):
    """Yield (header, None) per batch, or (None, reason) where framing stops (Kafka's
    FileLogInputStream: a torn tail ends iteration; a bad length or magic is an error)."""
    end = len(buf) if limit is None else min(len(buf), limit)
    pos = 0
    while end - pos >= _FRAMING.size:
        _, length, _, magic = _FRAMING.unpack_from(buf, pos)
        if length < MIN_BATCH_LENGTH:
            yield (
                None,
                f"Record batch length {length} at position {pos} is less than the minimum of {MIN_BATCH_LENGTH}.",
            )
            return
        if magic != 2:
            yield None, f"Unsupported magic {magic} at position {pos} (only magic 2 is supported)."
            return
        if pos + length + LOG_OVERHEAD > end or end - pos < BATCH_HEADER_SIZE:
            return
        header = read_batch_header(buf, pos)
        yield header, None
        pos += header.size


def dump_log(
    path: Path,
    *,
    deep: bool,
    print_data: bool,
    skip_metadata: bool = False,
    max_bytes: int = INT32_MAX,
) -> None:
    print(f"Log starting offset: {_base_offset(path)}")
    with _mapped(path) as buf, memoryview(buf) as view:
        valid_bytes = 0
        for header, problem in iter_batches(buf, max_bytes):
            if header is None:
                print(f"Error: CORRUPT_MESSAGE: {problem}")
                break
            valid = header.batch_length >= MIN_BATCH_LENGTH and crc_is_valid(view, header)
            print(format_batch(header, valid))
            if deep:
                _print_records(buf, header, print_data, skip_metadata)
            valid_bytes = header.position + header.size
        trailing = len(buf) - valid_bytes
        if trailing > 0 and max_bytes >= len(buf):
            print(f"Found {trailing} invalid bytes at the end of {path.name}")


def format_batch(h: BatchHeader, valid: bool) -> str:
    horizon = f"OptionalLong[{h.first_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
    ts_type = "LogAppendTime" if h.timestamp_type else "CreateTime"
    codec = CODEC_NAMES.get(h.compression, f"unknown({h.compression})")
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
        f"deleteHorizonMs: {horizon} position: {h.position} {ts_type}: {h.max_timestamp} "
        f"size: {h.size} magic: {h.magic} compresscodec: {codec} crc: {h.crc} "
        f"isvalid: {_bool(valid)}"
    )


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _print_records(buf, header: BatchHeader, print_data: bool, skip_metadata: bool) -> None:
    try:
        records = decode_records(buf[header.position : header.position + header.size])
    except Exception as exc:  # a corrupt batch is reported, not fatal
        print(
            f"| Error: cannot decode the records of the batch at position "
            f"{header.position}: {getattr(exc, 'message', exc)}"
        )
        return
    ts_type = "LogAppendTime" if header.timestamp_type else "CreateTime"
    for rec in records:
        parts = []
        if not skip_metadata:
            sequence = _record_sequence(header, rec.offset - header.base_offset)
            keys = ",".join(k for k, _ in rec.headers)
            parts.append(
                f"| offset: {rec.offset} {ts_type}: {rec.timestamp} "
                f"keySize: {_size(rec.key)} valueSize: {_size(rec.value)} "
                f"sequence: {sequence} headerKeys: [{keys}]"
            )
        if header.is_control:
            parts.append(_control_text(rec.key, rec.value))
        elif print_data:
            if rec.key is not None:
                parts.append(f"key: {_text(rec.key)}")
            if rec.value is not None:
                parts.append(f"payload: {_text(rec.value)}")
        print(" ".join(parts))


def _record_sequence(header: BatchHeader, delta: int) -> int:
    if header.base_sequence < 0:
        return -1
    seq = header.base_sequence + delta
    return seq - INT32_MAX - 1 if seq > INT32_MAX else seq


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _control_text(key: bytes | None, value: bytes | None) -> str:
    if key is None or len(key) < 4:
        return "controlType: UNKNOWN(-1)"
    type_id = struct.unpack_from(">h", key, 2)[0]
    name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id in (0, 1) and value is not None and len(value) >= 6:
        epoch = struct.unpack_from(">i", value, 2)[0]
        return f"endTxnMarker: {name} coordinatorEpoch: {epoch}"
    return f"controlType: {name}({type_id})"


# --------------------------------------------------------------------------- indexes


def _entries(path: Path, entry: struct.Struct, base_offset: int, offset_field: int):
    """Index entries until the end or the first zero (preallocated) entry after the first."""
    data = path.read_bytes()
    for i in range(len(data) // entry.size):
        fields = entry.unpack_from(data, i * entry.size)
        if i > 0 and fields[offset_field] == 0:
            return
        yield fields, base_offset + fields[offset_field]


def _segment_batches(index_path: Path) -> list[BatchHeader] | None:
    """Batch headers of the .log beside an index, or None if there is none."""
    log_path = index_path.with_suffix(".log")
    if not log_path.exists():
        return None
    with _mapped(log_path) as buf:
        return [h for h, _ in iter_batches(buf) if h is not None]


def dump_offset_index(path: Path, *, verify_only: bool = False) -> None:
    base = _base_offset(path)
    batches = _segment_batches(path)
    by_position = {h.position: h for h in batches or ()}
    mismatches = []
    for (_, position), offset in _entries(path, _OFFSET_ENTRY, base, 0):
        if batches is not None:
            batch = by_position.get(position)
            # Kafka's check is "offset == last offset of the batch at position"; our log
            # indexes a whole appended chunk (maybe several batches) by its last offset.
            if batch is None or not batch.base_offset <= offset <= batches[-1].last_offset:
                mismatches.append((offset, -1 if batch is None else batch.last_offset))
        if not verify_only:
            print(f"offset: {offset} position: {position}")
    if batches is None:
        print(f"No log file beside {path.name}: index entries were not verified.", file=sys.stderr)
    elif mismatches:
        print(f"Mismatches in :{path.resolve()}")
        for index_offset, log_offset in mismatches:
            print(f"  Index offset: {index_offset}, log offset: {log_offset}")


def dump_time_index(path: Path, *, verify_only: bool = False) -> None:
    base = _base_offset(path)
    batches = _segment_batches(path)
    last_offsets = [h.last_offset for h in batches or ()]
    mismatches, out_of_order = [], []
    previous = -1
    for (timestamp, _), offset in _entries(path, _TIME_ENTRY, base, 1):
        if batches is not None:
            batch = _batch_holding(batches, last_offsets, offset)
            if batch is None or batch.max_timestamp != timestamp:
                mismatches.append((timestamp, -1 if batch is None else batch.max_timestamp))
        if timestamp < previous:
            out_of_order.append((timestamp, previous))
        previous = max(previous, timestamp)
        if not verify_only:
            print(f"timestamp: {timestamp} offset: {offset}")
    if mismatches:
        print(f"Found timestamp mismatch in :{path.resolve()}")
        for index_ts, log_ts in mismatches:
            print(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}")
    if out_of_order:
        print(f"Found out of order timestamp in :{path.resolve()}")
        for index_ts, prev_ts in out_of_order:
            print(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}")


def _batch_holding(batches: list[BatchHeader], last_offsets: list[int], offset: int):
    """The batch whose offset range holds ``offset`` (binary search), or None."""
    i = bisect_left(last_offsets, offset)
    if i < len(batches) and batches[i].base_offset <= offset:
        return batches[i]
    return None


# --------------------------------------------------------------------------- snapshots


def dump_producer_snapshot(path: Path) -> None:
    """Kafka's ProducerSnapshot v1 (see broker/log/producer_state.py)."""
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEADER.size:
        print(f"Error: CORRUPT_MESSAGE: {path.name} is too short to be a producer snapshot.")
        return
    _version, _crc, count = _SNAPSHOT_HEADER.unpack_from(data, 0)
    for i in range(count):
        pos = _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size
        if pos + _SNAPSHOT_ENTRY.size > len(data):
            print(f"Error: CORRUPT_MESSAGE: {path.name} ends inside entry {i}.")
            return
        pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = (
            _SNAPSHOT_ENTRY.unpack_from(data, pos)
        )
        first_seq = last_seq - delta if last_seq - delta >= 0 else last_seq - delta + INT32_MAX + 1
        txn = "OptionalLong.empty" if txn_first < 0 else f"OptionalLong[{txn_first}]"
        print(
            f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord_epoch} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {ts} firstSequence: {first_seq} "
            f"lastSequence: {last_seq} lastOffset: {last_offset} offsetDelta: {delta} "
            f"timestamp: {ts}"
        )


if __name__ == "__main__":
    sys.exit(main())
