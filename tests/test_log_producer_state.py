"""Idempotent producers: dedup of retries, sequence gaps, fencing, and state that
survives a clean close and an unclean stop."""

from __future__ import annotations

import pytest

from broker.log.log import Log
from broker.log.producer_state import ProducerStateManager
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.records import build_batch, read_batch_header

from .log_helpers import batch, config, read_all

PID = 4242


def test_retry_returns_original_offsets_and_appends_nothing(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    first = log.append_as_leader(batch(3, pid=PID, epoch=0, seq=0), now_ms=1)
    log.append_as_leader(batch(2), now_ms=1)  # someone else writes in between
    second = log.append_as_leader(batch(2, pid=PID, epoch=0, seq=3), now_ms=1)
    size = log.size_bytes
    retry = log.append_as_leader(batch(3, pid=PID, epoch=0, seq=0), now_ms=1)
    assert retry.duplicate
    assert (
        (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset) == (0, 2)
    )
    retry2 = log.append_as_leader(batch(2, pid=PID, epoch=0, seq=3), now_ms=1)
    assert retry2.duplicate and (retry2.first_offset, retry2.last_offset) == (5, 6)
    assert (second.first_offset, second.last_offset) == (5, 6)
    assert log.size_bytes == size and log.log_end_offset == 7
    assert len(read_all(log)) == 7


def test_only_the_last_five_batches_are_remembered(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    for seq in range(6):
        log.append_as_leader(batch(1, pid=PID, epoch=0, seq=seq), now_ms=1)
    assert log.append_as_leader(batch(1, pid=PID, epoch=0, seq=1), now_ms=1).duplicate
    with pytest.raises(KafkaError) as err:  # seq 0 fell out of the window: a gap, not a dup
        log.append_as_leader(batch(1, pid=PID, epoch=0, seq=0), now_ms=1)
    assert err.value.code == ErrorCode.out_of_order_sequence_number


def test_sequence_gap_and_fencing(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(batch(2, pid=PID, epoch=1, seq=0), now_ms=1)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(1, pid=PID, epoch=1, seq=5), now_ms=1)
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(1, pid=PID, epoch=0, seq=2), now_ms=1)
    assert err.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as err:  # a new epoch must start at sequence 0
        log.append_as_leader(batch(1, pid=PID, epoch=2, seq=3), now_ms=1)
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 2  # nothing was written by the refused appends
    ok = log.append_as_leader(batch(1, pid=PID, epoch=2, seq=0), now_ms=1)
    assert ok.first_offset == 2 and not ok.duplicate
    # an unknown producer may start at any sequence (Kafka 2.x+ behaviour)
    assert log.append_as_leader(batch(1, pid=7, epoch=0, seq=17), now_ms=1).first_offset == 3


def _fill(log: Log) -> None:
    log.append_as_leader(batch(3, pid=PID, epoch=0, seq=0), now_ms=1)
    log.append_as_leader(batch(2, pid=PID, epoch=0, seq=3), now_ms=1)
    log.append_as_leader(batch(4, pid=99, epoch=3, seq=0), now_ms=1)


def test_state_survives_clean_close(tmp_path) -> None:
    cfg = config(segment_bytes=300)  # several segments, snapshots on roll
    log = Log(tmp_path / "t-0", cfg)
    _fill(log)
    log.flush()
    log.close()
    assert (tmp_path / "t-0" / "00000000000000000009.snapshot").exists()
    log = Log(tmp_path / "t-0", cfg, recovery_point=9, had_clean_shutdown=True, now_ms=2)
    retry = log.append_as_leader(batch(2, pid=PID, epoch=0, seq=3), now_ms=1)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (3, 4)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(1, pid=99, epoch=3, seq=9), now_ms=1)
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    assert log.append_as_leader(batch(1, pid=99, epoch=3, seq=4), now_ms=1).first_offset == 9


def test_state_survives_unclean_stop_without_snapshots(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    _fill(log)
    # crash: no close, and every snapshot lost
    for snap in (tmp_path / "t-0").glob("*.snapshot"):
        snap.unlink()
    log = Log(tmp_path / "t-0", config(), now_ms=2)
    assert log.log_end_offset == 9
    retry = log.append_as_leader(batch(3, pid=PID, epoch=0, seq=0), now_ms=1)
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (0, 2)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(1, pid=PID, epoch=0, seq=6), now_ms=1)
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(1, pid=99, epoch=2, seq=4), now_ms=1)
    assert err.value.code == ErrorCode.invalid_producer_epoch


def test_expired_producers_are_not_loaded(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    _fill(log)  # record timestamps around 1000 ms
    log.close()
    day = 86_400_000
    log = Log(tmp_path / "t-0", config(), had_clean_shutdown=True, now_ms=1_003 + day)
    assert PID not in log.producer_state.producers  # last timestamp 1001: expired
    assert 99 not in log.producer_state.producers
    log.close()
    log = Log(tmp_path / "t-0", config(), had_clean_shutdown=True, now_ms=1_002 + day)
    assert 99 in log.producer_state.producers and PID not in log.producer_state.producers


def test_snapshot_file_is_kafkas_format_and_crc_checked(tmp_path) -> None:
    pm = ProducerStateManager(tmp_path)
    pm.replay_batch(
        read_batch_header(
            build_batch(
                [(None, b"v", [], 5555)] * 5,
                base_offset=100,
                producer_id=PID,
                producer_epoch=3,
                base_sequence=10,
            )
        )
    )
    path = pm.take_snapshot()
    data = path.read_bytes()
    assert path.name == "00000000000000000105.snapshot"
    assert data[:2] == b"\x00\x01" and int.from_bytes(data[6:10], "big") == 1
    assert len(data) == 10 + 46
    (entry,) = ProducerStateManager.read_snapshot(path)
    assert (entry.producer_id, entry.producer_epoch, entry.last_seq) == (PID, 3, 14)
    assert entry.batches[-1].first_offset == 100 and entry.batches[-1].first_seq == 10
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError, match="CRC"):
        ProducerStateManager.read_snapshot(path)
