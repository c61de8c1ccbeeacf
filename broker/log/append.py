"""Checks and rewrites of an append before it reaches a segment (the parts of Kafka's
LogValidator and UnifiedLog.analyzeAndValidateRecords the protocol layer does not do).

Pure functions over the batch bytes and the topic's LogConfig.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from broker.log.config import LONG_MAX, LogConfig
from broker.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from broker.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    decode_records,
    read_batch_header,
    recompress,
    scan_valid_prefix,
)

__all__ = [
    "LogAppendInfo",
    "check_keys",
    "check_timestamps",
    "follower_batches",
    "maybe_recompress",
    "producer_batches",
]


class LogAppendInfo(NamedTuple):
    """What an append did (or, with ``duplicate``, what the original append did)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime (or duplicate)
    log_start_offset: int
    record_count: int
    duplicate: bool = False


def check_timestamps(records, headers: Sequence[BatchHeader], config: LogConfig, now: int) -> None:
    """message.timestamp.before/after.max.ms for CreateTime topics, per record as in
    Kafka's LogValidator. Records are decoded only when a bound is configured (and for
    an "after" bound alone, only when the batch max timestamp breaks it)."""
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    if before == LONG_MAX and after == LONG_MAX:
        return
    for h in headers:
        if before == LONG_MAX and h.max_timestamp - now <= after:
            continue
        for record in decode_records(memoryview(records)[h.position : h.position + h.size]):
            ts = record.timestamp
            if ts != -1 and (now - ts > before or ts - now > after):
                raise KafkaError(
                    ErrorCode.invalid_timestamp,
                    f"Timestamp {ts} of message with offset {record.offset} is out of range. "
                    f"The timestamp should be within [{now - before}, {now + after}]",
                )


def check_keys(records, headers: Sequence[BatchHeader], topic_partition: str) -> None:
    """A compacted topic takes only records with a key (Kafka's LogValidator.validateKey):
    the cleaner keeps the latest record per key, so a keyless one would be dropped after
    it was acknowledged. Every keyless record is named (its index in its batch); the
    append fails whole with INVALID_RECORD. Control batches (transaction markers) are
    written by the broker and always keyed."""
    errors = []
    for h in headers:
        if h.is_control:
            continue
        batch = memoryview(records)[h.position : h.position + h.size]
        for index, record in enumerate(decode_records(batch)):
            if record.key is None:
                errors.append(
                    (
                        index,
                        "Compacted topic cannot accept message without key in topic "
                        f"partition {topic_partition}.",
                    )
                )
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise RecordValidationError(
            ErrorCode.invalid_record,
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]",
            errors,
        )


def producer_batches(headers: Sequence[BatchHeader], first_offset: int, append_time: int | None):
    """(producer id, epoch, base sequence, last offset delta, first offset, timestamp,
    transactional) per batch, with the offsets the batches are about to get."""
    out = []
    offset = first_offset
    for h in headers:
        ts = h.max_timestamp if append_time is None else append_time
        out.append(
            (
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.last_offset_delta,
                offset,
                ts,
                h.is_transactional,
            )
        )
        offset += h.last_offset_delta + 1
    return out


def maybe_recompress(records, headers: Sequence[BatchHeader], config: LogConfig):
    """(records, headers) stored under compression.type: unchanged for ``producer`` or
    when the codec already matches, else the single batch recompressed (Kafka rejects
    several batches in one compressed append, and re-checks max.message.bytes)."""
    target = config.target_codec
    if target is None or all(h.compression == target for h in headers):
        return records, headers
    if len(headers) != 1:
        raise KafkaError(
            ErrorCode.invalid_record, "Compressed outer record has more than one batch"
        )
    out = bytearray(recompress(records, headers[0], target, config.compression_level))
    header = read_batch_header(out, 0)
    if header.size > config.max_message_bytes:
        raise KafkaError(
            ErrorCode.message_too_large,
            f"Message batch size is {header.size} bytes after recompression, which exceeds "
            f"the maximum configured size of {config.max_message_bytes}.",
        )
    return out, [header]


def start_inside_first_batch(records, log_start_offset: int, log_end_offset: int) -> int | None:
    """The base offset an empty follower log must start at to take ``records``: when the
    leader's log start fell inside their first batch (DeleteRecords), the follower asked
    from that start and got the whole batch. Kafka's Partition handles this case the same
    way (appendRecordsToFollowerOrFutureReplica). None in every other case."""
    if log_end_offset != log_start_offset or len(records) < BATCH_HEADER_SIZE:
        return None
    first = read_batch_header(records, 0)
    if first.base_offset < log_end_offset <= first.last_offset:
        return first.base_offset
    return None


def follower_batches(records, log_end_offset: int) -> tuple[int, list[BatchHeader]]:
    """(valid bytes, headers) of a replicated chunk. A torn last batch is trimmed, as
    Kafka trims the partial batch at the end of a fetch; a whole batch with a bad CRC
    raises CORRUPT_MESSAGE; offsets must grow and start at or after the log end."""
    valid, headers = scan_valid_prefix(records)
    rest = len(records) - valid
    if rest >= BATCH_HEADER_SIZE and read_batch_header(records, valid).size <= rest:
        raise KafkaError(ErrorCode.corrupt_message, f"Record batch at byte {valid} is corrupt.")
    if headers and headers[0].base_offset < log_end_offset:
        raise KafkaError(
            ErrorCode.unknown_server_error,
            f"Unexpected offset in append: first offset {headers[0].base_offset} is less than "
            f"the next offset {log_end_offset}.",
        )
    for prev, h in zip(headers, headers[1:], strict=False):
        if h.last_offset <= prev.last_offset:
            raise KafkaError(
                ErrorCode.unknown_server_error, "Out of order offsets in follower append."
            )
    return valid, headers
