"""The partition side of transactions, on a Log alone: transactional batches open a
transaction, markers close it, the last stable offset, the aborted transaction index
(Kafka's .txnindex bytes), fencing of stale markers, and state across reopen and
replication."""

from __future__ import annotations

import struct

import pytest

from broker.log.log import Log
from broker.log.txn_index import ABORT, parse_control_key
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.records import build_batch, decode_records, read_batch_header

from .log_helpers import config, read_all

PID, OTHER = 7001, 7002


def txn_batch(count: int, pid: int, epoch: int = 0, seq: int = 0) -> bytearray:
    records = [(b"k", b"v%d" % i, [], 1_000 + i) for i in range(count)]
    return bytearray(
        build_batch(
            records,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=True,
        )
    )


def _all_visible(log: Log) -> None:
    log.high_watermark = log.log_end_offset


def test_open_transaction_bounds_the_last_stable_offset(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(txn_batch(3, PID), now_ms=1)  # offsets 0-2
    log.append_as_leader(txn_batch(2, OTHER), now_ms=1)  # 3-4
    _all_visible(log)
    assert log.high_watermark == 5 and log.last_stable_offset == 0
    log.append_marker(PID, 0, 5, commit=True, now_ms=2_000)  # offset 5
    _all_visible(log)
    assert log.last_stable_offset == 3  # OTHER's transaction is still open
    log.append_marker(OTHER, 0, 5, commit=True, now_ms=2_000)  # 6
    _all_visible(log)
    assert log.last_stable_offset == 7 == log.log_end_offset
    assert log.collect_aborted(0, 7) == []


def test_marker_is_a_control_batch_in_kafkas_format(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(txn_batch(1, PID, epoch=3), now_ms=1)
    info = log.append_marker(PID, 3, coordinator_epoch=9, commit=False, now_ms=2_000)
    batches = read_all(log)
    raw = log.read_bytes(info.first_offset, 1 << 20)
    header = read_batch_header(raw, 0)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (PID, 3)
    (record,) = decode_records(raw[: header.size])
    assert record.key == struct.pack(">hh", 0, ABORT) and parse_control_key(record.key) == ABORT
    assert record.value == struct.pack(">hi", 0, 9)
    assert len(batches) >= 2


def test_abort_writes_the_txnindex_in_kafkas_format(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(txn_batch(2, OTHER), now_ms=1)  # 0-1, stays open
    log.append_as_leader(txn_batch(3, PID), now_ms=1)  # 2-4
    log.append_marker(PID, 0, 1, commit=False, now_ms=2_000)  # 5
    entry = struct.pack(">hqqqq", 0, PID, 2, 5, 0)
    assert (tmp_path / "t-0" / f"{0:020d}.txnindex").read_bytes() == entry
    assert [tuple(a) for a in log.collect_aborted(0, 6)] == [(PID, 2, 5, 0)]
    assert log.collect_aborted(6, 10) == []  # the range after the marker
    assert [a.producer_id for a in log.collect_aborted(3, 4)] == [PID]


def test_stale_marker_epoch_is_refused(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(txn_batch(1, PID, epoch=4), now_ms=1)
    with pytest.raises(KafkaError) as err:
        log.append_marker(PID, 3, 0, commit=True, now_ms=2_000)
    assert err.value.code == ErrorCode.invalid_producer_epoch
    assert log.log_end_offset == 1


def test_zombie_after_a_fencing_marker_is_refused(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(txn_batch(1, PID, epoch=0), now_ms=1)
    log.append_marker(PID, 1, 0, commit=False, now_ms=2_000)  # the coordinator bumped the epoch
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(txn_batch(1, PID, epoch=0, seq=1), now_ms=1)
    assert err.value.code == ErrorCode.invalid_producer_epoch


def test_open_transaction_and_aborts_survive_reopen(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(txn_batch(2, PID), now_ms=1)
    log.append_marker(PID, 0, 0, commit=False, now_ms=2_000)  # 2
    log.append_as_leader(txn_batch(2, OTHER), now_ms=1)  # 3-4 open
    log.close()
    for clean in (True, False):
        again = Log(tmp_path / "t-0", config(), had_clean_shutdown=clean)
        again.high_watermark = again.log_end_offset
        assert again.last_stable_offset == 3
        assert [a.producer_id for a in again.collect_aborted(0, 5)] == [PID]
        again.close()


def test_follower_replays_markers_and_indexes_aborts(tmp_path) -> None:
    leader = Log(tmp_path / "t-0", config())
    leader.append_as_leader(txn_batch(3, PID), now_ms=1)
    leader.append_marker(PID, 0, 0, commit=False, now_ms=2_000)
    leader.append_as_leader(txn_batch(1, OTHER), now_ms=1)
    follower = Log(tmp_path / "f" / "t-0", config())
    follower.append_as_follower(leader.read_bytes(0, 1 << 20))
    follower.high_watermark = follower.log_end_offset
    assert follower.last_stable_offset == 4
    assert [tuple(a) for a in follower.collect_aborted(0, 5)] == [(PID, 0, 3, 3)]
    follower.truncate_to(3)  # the marker goes: so does its index entry
    assert follower.collect_aborted(0, 5) == []


def test_cleaner_stops_at_the_first_open_transaction(tmp_path) -> None:
    from broker.log.cleaner import cleanable_offsets

    log = Log(tmp_path / "t-0", config(**{"cleanup.policy": "compact", "segment.bytes": "200"}))
    for _ in range(3):
        log.append_as_leader(batch_of(2), now_ms=1)
    log.append_as_leader(txn_batch(1, PID), now_ms=1)  # open at offset 6
    for _ in range(3):
        log.append_as_leader(batch_of(2), now_ms=1)
    log.high_watermark = log.log_end_offset
    assert len(log.segments) > 3
    _first, uncleanable = cleanable_offsets(log, None, 10)
    assert uncleanable <= 6
    log.append_marker(PID, 0, 0, commit=True, now_ms=2_000)
    log.high_watermark = log.log_end_offset
    assert cleanable_offsets(log, None, 10)[1] > 6


def batch_of(count: int) -> bytearray:
    return bytearray(build_batch([(b"k", b"v" * 40, [], 1_000) for _ in range(count)]))


def test_cleaner_drops_aborted_records_and_keeps_the_committed_value(tmp_path) -> None:
    """An aborted write of a key must not make the cleaner drop the committed value
    before it (Kafka's cleaner ignores aborted transactions' records)."""
    from broker.log.cleaner import LogCleaner

    now = 10_000_000
    lg = Log(tmp_path / "topic-0", config(cleanup_policy="compact", segment_bytes=400), now_ms=now)

    def plain(key: bytes, value: bytes) -> None:
        lg.append_as_leader(bytearray(build_batch([(key, value, [], now)])), now_ms=now)

    plain(b"offset", b"committed")
    records = [(b"offset", b"aborted", [], now)]
    txn = build_batch(
        records, producer_id=PID, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    lg.append_as_leader(bytearray(txn), now_ms=now)
    lg.append_marker(PID, 0, 0, commit=False, now_ms=now)
    for i in range(12):
        plain(b"filler-%d" % i, b"x" * 20)
    lg.high_watermark = lg.log_end_offset
    assert LogCleaner([tmp_path], backoff_ms=0).maybe_clean({("topic", 0): lg}, now)
    values = {(r.key, r.value) for r in read_all(lg)}
    assert (b"offset", b"committed") in values
    assert (b"offset", b"aborted") not in values
