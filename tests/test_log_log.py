"""Log: append/read round trips, rolls, index lookups, timestamps, retention,
DeleteRecords, high watermark, truncation and follower appends, on real files."""

from __future__ import annotations

import os

import pytest

from broker.log.log import Log, parse_topic_partition
from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.records import (
    build_batch,
    decode_records,
    read_batch_header,
    scan_valid_prefix,
)

from .log_helpers import batch, config, read_all


def test_append_read_round_trip_bytes_and_offsets(tmp_path) -> None:
    log = Log(tmp_path / "orders-3", config())
    assert (log.topic, log.partition) == ("orders", 3)
    sent = [
        batch(5, ts=1_000, tag=b"a"),
        batch(1, ts=2_000, tag=b"b"),
        batch(7, ts=3_000, tag=b"c"),
    ]
    originals = [bytes(b) for b in sent]
    infos = [log.append_as_leader(b, leader_epoch=4, now_ms=10) for b in sent]
    assert [(i.first_offset, i.last_offset, i.record_count) for i in infos] == [
        (0, 4, 5),
        (5, 5, 1),
        (6, 12, 7),
    ]
    assert infos[2].max_timestamp == 3_006 and infos[2].offset_of_max_timestamp == 12
    assert log.log_end_offset == 13 and log.high_watermark == 0
    raw = (tmp_path / "orders-3" / "00000000000000000000.log").read_bytes()
    assert len(raw) == sum(len(b) for b in originals) == log.size_bytes
    # on disk: the batches with base offset and leader epoch rewritten, nothing else
    pos = 0
    for original, info in zip(originals, infos, strict=True):
        stored = raw[pos : pos + len(original)]
        assert stored[12:] != original[12:] and stored[16:] == original[16:]
        header = read_batch_header(stored)
        assert (header.base_offset, header.partition_leader_epoch) == (info.first_offset, 4)
        pos += len(original)
    data = log.read(0, 1 << 20)
    assert (data.position, data.size) == (0, len(raw)) and data.read_bytes() == raw
    records = read_all(log)
    assert [r.offset for r in records] == list(range(13))
    assert records[5].value.startswith(b"b0-") and records[12].timestamp == 3_006


def test_read_granularity_max_bytes_and_min_one_message(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    sizes = []
    for i in range(4):
        b = batch(3, tag=b"%d" % i)
        sizes.append(len(b))
        log.append_as_leader(b, now_ms=1)
    # an offset inside the second batch starts at that batch (batch granularity)
    data = log.read(4, 1 << 20)
    assert data.position == sizes[0] and data.offset == 4
    assert read_batch_header(data.read_bytes()).base_offset == 3
    # max_bytes smaller than a batch: min_one_message returns the whole first batch
    assert log.read(4, 10).size == sizes[1]
    assert log.read(4, 10, min_one_message=False).size == 10
    # max_bytes may end inside a batch, as Kafka does
    assert log.read(0, sizes[0] + 5).size == sizes[0] + 5
    assert log.read(12, 100) is None  # at the LEO: nothing


def test_offset_out_of_range(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(batch(3), now_ms=1)
    for bad in (-1, 4, 100):
        with pytest.raises(KafkaError) as err:
            log.read(bad, 100)
        assert err.value.code == ErrorCode.offset_out_of_range
    log.high_watermark = 3
    log.delete_records_before(2)
    with pytest.raises(KafkaError) as err:
        log.read(1, 100)
    assert err.value.code == ErrorCode.offset_out_of_range


def test_high_watermark_limits_reads_and_is_clamped(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    first = len(batch(2))
    log.append_as_leader(batch(2), now_ms=1)
    log.append_as_leader(batch(2), now_ms=1)
    log.append_as_leader(batch(2), now_ms=1)
    log.high_watermark = 100
    assert log.high_watermark == 6
    log.high_watermark = 2
    assert log.read(0, 1 << 20, max_offset=log.high_watermark).size == first
    assert log.read(2, 1 << 20, max_offset=log.high_watermark) is None
    assert [r.offset for r in read_all(log, max_offset=4)] == [0, 1, 2, 3]
    log.high_watermark = -5
    assert log.high_watermark == 0


def test_roll_on_segment_bytes(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config(segment_bytes=1000))
    size = len(batch(5))
    for _ in range(10):
        log.append_as_leader(batch(5), now_ms=1)
    per_segment = 1000 // size
    assert len(log.segments) == -(-10 // per_segment)
    assert [s.base_offset for s in log.segments] == [
        i * 5 * per_segment for i in range(len(log.segments))
    ]
    assert all(s.size <= 1000 for s in log.segments)
    names = sorted(os.listdir(tmp_path / "t-0"))
    assert "00000000000000000000.log" in names and f"{5 * per_segment:020d}.log" in names
    assert [r.offset for r in read_all(log)] == list(range(50))
    # a batch bigger than a whole segment is refused
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(batch(3, value_size=2000), now_ms=1)
    assert err.value.code == ErrorCode.record_list_too_large


def test_roll_on_full_index_and_on_segment_ms(tmp_path) -> None:
    # segment.index.bytes=48: 6 offset index entries, 4 time index entries (one kept
    # for the final entry). An entry is added on every append after the first.
    log = Log(tmp_path / "t-0", config(segment_index_bytes=48, index_interval_bytes=1))
    for _ in range(16):  # same timestamp: only the offset index fills
        log.append_as_leader(batch(1, ts=5), now_ms=1)
    assert [s.base_offset for s in log.segments] == [0, 7, 14]
    assert [s.offset_index.entries for s in log.segments[:2]] == [6, 6]
    assert [r.offset for r in read_all(log)] == list(range(16))
    rising = Log(tmp_path / "t-2", config(segment_index_bytes=48, index_interval_bytes=1))
    for i in range(9):  # rising timestamps: the time index fills first
        rising.append_as_leader(batch(1, ts=100 + i), now_ms=1)
    assert [s.base_offset for s in rising.segments] == [0, 4, 8]
    timed = Log(tmp_path / "t-1", config(segment_ms=1000))
    timed.append_as_leader(batch(1, ts=10_000), now_ms=10_000)
    timed.append_as_leader(batch(1, ts=10_900), now_ms=10_900)
    assert len(timed.segments) == 1
    timed.append_as_leader(batch(1, ts=11_001), now_ms=11_001)  # 1001 ms after the first batch
    assert [s.base_offset for s in timed.segments] == [0, 2]


def test_index_lookup_finds_the_right_position(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config(index_interval_bytes=200))
    positions = {}
    pos = 0
    for i in range(40):
        b = batch(1 + i % 4, tag=b"%d" % i)
        info = log.append_as_leader(b, now_ms=1)
        for off in range(info.first_offset, info.last_offset + 1):
            positions[off] = pos
        pos += len(b)
    seg = log.active_segment
    assert seg.offset_index.entries > 5  # sparse, but there are entries
    for offset, expected in positions.items():
        assert seg.translate_offset(offset).position == expected
        entry = seg.offset_index.lookup(offset)
        assert entry.offset <= max(offset, entry.offset) and entry.position <= expected
        assert log.read(offset, 1).position == expected


def test_offsets_by_timestamp(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config(segment_bytes=600, index_interval_bytes=50))
    # batches of 4 records: timestamps base, base+1, base+2, base+3
    for i in range(12):
        log.append_as_leader(batch(4, ts=10_000 + 100 * i), leader_epoch=2, now_ms=1)
    assert len(log.segments) > 2
    found = log.fetch_offset_by_timestamp(10_502)  # 6th batch, third record
    assert (found.offset, found.timestamp, found.leader_epoch) == (22, 10_502, 2)
    found = log.fetch_offset_by_timestamp(10_550)  # between batches: first of the next
    assert (found.offset, found.timestamp) == (24, 10_600)
    assert log.fetch_offset_by_timestamp(0).offset == 0
    assert log.fetch_offset_by_timestamp(20_000) is None
    assert log.fetch_offset_by_timestamp(-2).offset == 0  # earliest
    assert log.fetch_offset_by_timestamp(-1).offset == 48  # latest
    assert log.fetch_offset_by_timestamp(-3)[:2] == (47, 11_103)  # max timestamp


def test_retention_by_time_and_bytes_keeps_the_active_segment(tmp_path) -> None:
    log = Log(
        tmp_path / "t-0", config(segment_bytes=500, retention_ms=1000, file_delete_delay_ms=0)
    )
    for i in range(12):
        log.append_as_leader(batch(3, ts=1_000 + i * 100), now_ms=1)
    log.high_watermark = log.log_end_offset
    n = len(log.segments)
    assert n > 3
    in_flight = log.read(0, 1 << 20)  # handed to sendfile just before the delete
    first_bytes = in_flight.read_bytes()
    # nothing is older than 1000 ms yet
    assert log.delete_retention_segments(now_ms=2_000) == 0
    # at 3000 every segment has expired; all but the active one go
    deleted = log.delete_retention_segments(now_ms=10_000)
    assert deleted == n - 1 and len(log.segments) == 1
    assert log.log_start_offset == log.active_segment.base_offset > 0
    assert read_all(log, start=log.log_start_offset)[0].offset == log.log_start_offset
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log.deleted"))
    assert in_flight.read_bytes() == first_bytes  # still readable until the delayed delete
    log.deleter.run(10_000)
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    assert len(list((tmp_path / "t-0").glob("*.log"))) == 1

    sized = Log(tmp_path / "t-1", config(segment_bytes=500, retention_bytes=1000))
    for _ in range(12):
        sized.append_as_leader(batch(3), now_ms=1)
    sized.high_watermark = sized.log_end_offset
    before = [s.size for s in sized.segments]
    sized.delete_retention_segments(now_ms=2)
    assert sized.size_bytes <= 1000 + before[-1] and sized.size_bytes + before[0] > 1000
    assert sized.log_start_offset == sized.segments[0].base_offset > 0
    assert sized.segments[-1].size == before[-1]


def test_retention_stops_at_the_high_watermark(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config(segment_bytes=500, retention_ms=1))
    for _ in range(12):
        log.append_as_leader(batch(3, ts=0), now_ms=1)
    log.high_watermark = log.segments[2].base_offset
    assert log.delete_retention_segments(now_ms=100_000) == 2
    assert log.log_start_offset == log.segments[0].base_offset


def test_delete_records(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config(segment_bytes=500))
    for _ in range(12):
        log.append_as_leader(batch(3), now_ms=1)
    log.high_watermark = 20
    with pytest.raises(KafkaError) as err:
        log.delete_records_before(21)
    assert err.value.code == ErrorCode.offset_out_of_range
    second_base = log.segments[1].base_offset
    assert log.delete_records_before(second_base + 1) == second_base + 1
    assert log.segments[0].base_offset == second_base  # the first segment is gone
    records = read_all(log, start=second_base + 1)
    assert records[0].offset == second_base + 1
    assert log.delete_records_before(-1) == 20  # -1: up to the high watermark
    assert log.fetch_offset_by_timestamp(-2).offset == 20


def test_log_append_time_and_timestamp_bounds(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(batch(3, ts=5), now_ms=777_000)
    assert (info.log_append_time, info.max_timestamp, info.offset_of_max_timestamp) == (
        777_000,
        777_000,
        2,
    )
    assert [r.timestamp for r in read_all(log)] == [777_000] * 3
    _, (header,) = scan_valid_prefix(log.read(0, 1000).read_bytes())
    assert header.timestamp_type == 1

    strict = Log(tmp_path / "t-1", config(message_timestamp_difference_max_ms=1000))
    strict.append_as_leader(batch(2, ts=50_000), now_ms=50_500)
    with pytest.raises(KafkaError) as err:  # the second record is 1001 ms in the future
        strict.append_as_leader(batch(2, ts=51_500), now_ms=50_500)
    assert err.value.code == ErrorCode.invalid_timestamp
    with pytest.raises(KafkaError) as err:
        strict.append_as_leader(batch(1, ts=49_000), now_ms=50_500)
    assert err.value.code == ErrorCode.invalid_timestamp
    assert strict.log_end_offset == 2


def test_compression_type_recompresses(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config(compression_type="gzip"))
    log.append_as_leader(batch(20, value_size=200), now_ms=1)
    _, (header,) = scan_valid_prefix(log.read(0, 1 << 20).read_bytes())
    assert header.compression == 1 and header.size < len(batch(20, value_size=200))
    assert [r.offset for r in read_all(log)] == list(range(20))
    plain = Log(tmp_path / "t-1", config(compression_type="uncompressed"))
    plain.append_as_leader(batch(5, compression=4), now_ms=1)
    _, (header,) = scan_valid_prefix(plain.read(0, 1 << 20).read_bytes())
    assert header.compression == 0
    assert [r.value[:2] for r in read_all(plain)] == [b"v0", b"v1", b"v2", b"v3", b"v4"]


def test_truncate_and_follower_append(tmp_path) -> None:
    leader = Log(tmp_path / "t-0", config(segment_bytes=500))
    for epoch in (1, 1, 2, 2, 2, 3, 3, 3):
        leader.append_as_leader(batch(3), leader_epoch=epoch, now_ms=1)
    leader.high_watermark = leader.log_end_offset
    follower = Log(tmp_path / "t-1", config(segment_bytes=500))
    offset = 0
    while offset < leader.log_end_offset:
        raw = leader.read_bytes(offset, 400)  # may end in a partial batch: trimmed
        info = follower.append_as_follower(raw, now_ms=1)
        offset = info.last_offset + 1
    assert follower.log_end_offset == 24
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries()
    assert [r.value for r in read_all(follower)] == [r.value for r in read_all(leader)]
    with pytest.raises(KafkaError):  # offsets already present
        follower.append_as_follower(leader.read_bytes(0, 400))
    assert follower.end_offset_for_epoch(2) == (2, 15)
    assert follower.truncate_to(10)
    assert follower.log_end_offset == 10 and follower.high_watermark == 0
    assert [r.offset for r in read_all(follower)] == list(range(9))  # batch 9..11 went
    assert follower.leader_epoch_cache.latest_epoch == 2
    follower.truncate_fully_and_start_at(100)
    assert (follower.log_start_offset, follower.log_end_offset) == (100, 100)
    assert [s.base_offset for s in follower.segments] == [100]
    corrupt = bytearray(leader.read_bytes(0, 400))
    corrupt[70] ^= 0xFF
    with pytest.raises(KafkaError) as err:
        Log(tmp_path / "t-2", config()).append_as_follower(corrupt)
    assert err.value.code == ErrorCode.corrupt_message


def test_flush_messages_moves_the_recovery_point(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config(flush_messages=5))
    log.append_as_leader(batch(3), now_ms=1)
    assert log.recovery_point == 0
    log.append_as_leader(batch(3), now_ms=1)
    assert log.recovery_point == 6


def test_parse_topic_partition() -> None:
    assert parse_topic_partition("my-topic-12") == ("my-topic", 12)
    assert parse_topic_partition("t-0.0a1b2c-delete") == ("t", 0)
    for bad in ("nopartition", "t-x", "-1"):
        with pytest.raises(ValueError):
            parse_topic_partition(bad)


def test_records_of_a_read_decode(tmp_path) -> None:
    log = Log(tmp_path / "t-0", config())
    log.append_as_leader(bytearray(build_batch([(b"key", b"value", [("h", b"1")], 123)])), now_ms=1)
    (record,) = decode_records(log.read(0, 100).read_bytes())
    assert (record.offset, record.key, record.value, record.headers) == (
        0,
        b"key",
        b"value",
        [("h", b"1")],
    )


def test_reads_at_recent_append_offsets_match_a_scan_after_truncation(tmp_path) -> None:
    """Reads from the offsets just appended are found without an index scan; they must
    give the same bytes as a scan, also after a truncation re-used those offsets."""
    log = Log(tmp_path / "t-0", config())
    for i in range(60):
        log.append_as_leader(batch(3, tag=b"old%d" % i), leader_epoch=1, now_ms=1)
    log.high_watermark = log.log_end_offset

    def expected(offset: int) -> bytes:
        raw = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
        _end, headers = scan_valid_prefix(raw, 0)
        first = next(h for h in headers if h.last_offset >= offset)
        return raw[first.position :]

    for offset in (0, 3, 4, 90, 177, 179):  # batch starts, mid-batch, the last batch
        assert log.read(offset, 1 << 20).read_bytes() == expected(offset)
    assert log.truncate_to(90)
    # a follower-style append: several batches in one write, re-using offsets 90..
    leader = Log(tmp_path / "t-9", config())
    leader.truncate_fully_and_start_at(90)
    for i in range(5):
        leader.append_as_leader(batch(2, tag=b"new%d" % i), leader_epoch=2, now_ms=1)
    log.append_as_follower(leader.read_bytes(90, 1 << 20), now_ms=1)
    assert log.log_end_offset == 100
    log.high_watermark = log.log_end_offset
    for offset in (90, 92, 93, 98):
        got = log.read(offset, 1 << 20).read_bytes()
        assert got == expected(offset)
        assert [r.value[:4] for r in decode_records(got)][0] == b"new%d" % ((offset - 90) // 2)
