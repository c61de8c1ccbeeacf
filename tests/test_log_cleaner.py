"""The log cleaner on real segment files: latest value per key, tombstones, limits."""

from __future__ import annotations

import os

from broker.log.cleaner import CLEANER_CHECKPOINT, ENTRY_BYTES, LogCleaner
from broker.log.log import Log
from broker.protocol.records import build_batch, decode_records, read_batch_header
from tests.log_helpers import config, read_all

NOW = 10_000_000


def _append(lg: Log, entries, ts: int = NOW, **batch_kw) -> None:
    """Append one batch of (key, value) pairs."""
    records = [(k, v, [], ts) for k, v in entries]
    lg.append_as_leader(bytearray(build_batch(records, **batch_kw)), now_ms=ts)
    lg.high_watermark = lg.log_end_offset


def _compact_log(tmp_path, **props) -> Log:
    props = {"cleanup_policy": "compact", "segment_bytes": 400, **props}
    return Log(tmp_path / "topic-0", config(**props), now_ms=NOW)


def _cleaner(tmp_path) -> LogCleaner:
    return LogCleaner([tmp_path], backoff_ms=0)


def _latest(lg: Log) -> dict[bytes, tuple[int, bytes | None]]:
    return {r.key: (r.offset, r.value) for r in read_all(lg)}


def test_keeps_the_latest_value_per_key_and_never_the_active_segment(tmp_path):
    lg = _compact_log(tmp_path)
    for round_ in range(10):
        for key in (b"a", b"b", b"c"):
            _append(lg, [(key, b"%s-%d" % (key, round_))])
    before = _latest(lg)
    active_base = lg.active_segment.base_offset
    active_bytes = os.pread(lg.active_segment.fd, lg.active_segment.size, 0)
    assert len(lg.segments) > 2
    cleaner = _cleaner(tmp_path)
    assert cleaner.maybe_clean({("topic", 0): lg}, NOW)
    records = read_all(lg)
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets)  # order and offsets kept
    below_active = [r for r in records if r.offset < active_base]
    assert len({r.key for r in below_active}) == len(below_active)  # one per key at most
    # every key still reads as its latest value, at its original offset
    assert _latest(lg) == before
    assert lg.active_segment.base_offset == active_base
    assert os.pread(lg.active_segment.fd, lg.active_segment.size, 0) == active_bytes
    assert lg.log_end_offset == 30
    # the checkpoint holds the first dirty offset: nothing left to clean now
    assert (tmp_path / CLEANER_CHECKPOINT).exists()
    assert not cleaner.maybe_clean({("topic", 0): lg}, NOW)
    # Kafka's LogCleaner gauges: the offset map held 3 keys; the last look was at NOW
    assert cleaner.last_buffer_utilization == 3 / (cleaner.dedupe_buffer_size / ENTRY_BYTES)
    assert cleaner.last_run_ms == NOW and cleaner.max_compaction_delay_ms == 0


def test_a_reopened_log_reads_the_same_after_cleaning(tmp_path):
    lg = _compact_log(tmp_path)
    for i in range(40):
        _append(lg, [(b"k%d" % (i % 4), b"v%d" % i)])
    _cleaner(tmp_path).maybe_clean({("topic", 0): lg}, NOW)
    expected = [(r.offset, r.key, r.value) for r in read_all(lg)]
    lg.close()
    reopened = Log(tmp_path / "topic-0", lg.config, now_ms=NOW)
    assert [(r.offset, r.key, r.value) for r in read_all(reopened)] == expected
    assert not list(reopened.dir.glob("*.cleaned")) and not list(reopened.dir.glob("*.swap"))


def test_tombstones_survive_one_pass_then_go_after_delete_retention(tmp_path):
    lg = _compact_log(tmp_path, delete_retention_ms=1000, min_cleanable_dirty_ratio=0.01)
    _append(lg, [(b"gone", b"value")])
    _append(lg, [(b"gone", None)])  # tombstone
    for i in range(30):
        _append(lg, [(b"k%d" % (i % 3), b"v%d" % i)])
    cleaner = _cleaner(tmp_path)
    tp = ("topic", 0)
    assert cleaner.maybe_clean({tp: lg}, NOW)
    assert _latest(lg)[b"gone"] == (1, None)  # the value went, the tombstone stays
    # its batch now carries a delete horizon of now + delete.retention.ms
    seg = lg.segments[0]
    header = next(h for h in seg.batches_from(0) if h.base_offset == 1)
    assert header.has_delete_horizon and header.first_timestamp == NOW + 1000
    assert decode_records(os.pread(seg.fd, header.size, header.position))[0].timestamp == NOW
    for i in range(30):  # more dirt, so the next pass runs
        _append(lg, [(b"k%d" % (i % 3), b"w%d" % i)])
    assert cleaner.maybe_clean({tp: lg}, NOW + 500)
    assert b"gone" in _latest(lg)  # before the horizon: still there
    for i in range(30):
        _append(lg, [(b"k%d" % (i % 3), b"x%d" % i)])
    assert cleaner.maybe_clean({tp: lg}, NOW + 1001)
    assert b"gone" not in _latest(lg)


def test_min_compaction_lag_and_high_watermark_bound_the_cleaning(tmp_path):
    lg = _compact_log(tmp_path, min_compaction_lag_ms=60_000)
    for i in range(30):
        _append(lg, [(b"k", b"v%d" % i)], ts=NOW - 120_000 if i < 15 else NOW)
    cleaner = _cleaner(tmp_path)
    assert cleaner.maybe_clean({("topic", 0): lg}, NOW)
    records = read_all(lg)
    # every record younger than the lag is still there; older duplicates went
    assert {r.value for r in records} >= {b"v%d" % i for i in range(15, 30)}
    assert len(records) < 30

    lg2 = Log(tmp_path / "other-0", config(cleanup_policy="compact", segment_bytes=400), now_ms=NOW)
    for i in range(30):
        _append(lg2, [(b"k", b"v%d" % i)])
    lg2.high_watermark = 5  # nothing at or past the HW is cleaned
    assert cleaner.maybe_clean({("other", 0): lg2}, NOW)
    assert [r.offset for r in read_all(lg2)] == list(range(4, 30))


def test_idempotent_producer_keeps_its_last_batch_and_sequences(tmp_path):
    lg = _compact_log(tmp_path)
    for seq in range(20):
        batch = build_batch(
            [(b"same", b"v%d" % seq, [], NOW)], producer_id=7, producer_epoch=0, base_sequence=seq
        )
        lg.append_as_leader(bytearray(batch), now_ms=NOW)
    for i in range(20):  # later plain writes make every record of producer 7 obsolete
        _append(lg, [(b"same", b"plain%d" % i)])
    last_data = lg.producer_state.producers[7].last_data_offset
    assert _cleaner(tmp_path).maybe_clean({("topic", 0): lg}, NOW)
    kept = [h for seg in lg.segments for h in seg.batches_from(0) if h.producer_id == 7]
    assert [(h.last_offset, h.records_count) for h in kept] == [(last_data, 0)]
    for seg in lg.segments:
        for h in seg.batches_from(0):
            raw = os.pread(seg.fd, h.size, h.position)
            assert read_batch_header(raw).crc == h.crc
    # rebuilt from the log alone, the producer state still knows the last sequence
    lg.close()
    for snapshot in (tmp_path / "topic-0").glob("*.snapshot"):
        snapshot.unlink()
    lg = Log(tmp_path / "topic-0", lg.config, now_ms=NOW)
    retry = build_batch(
        [(b"same", b"v19", [], NOW)], producer_id=7, producer_epoch=0, base_sequence=19
    )
    info = lg.append_as_leader(bytearray(retry), now_ms=NOW)
    assert info.duplicate and info.last_offset == last_data


def test_delete_and_compact_topics_and_non_compacted_ones_are_left_alone(tmp_path):
    lg = Log(tmp_path / "plain-0", config(segment_bytes=400), now_ms=NOW)
    for i in range(30):
        _append(lg, [(b"k", b"v%d" % i)])
    assert not _cleaner(tmp_path).maybe_clean({("plain", 0): lg}, NOW)
    assert len(read_all(lg)) == 30


def test_io_max_bytes_per_second_holds_the_next_pass_back(tmp_path):
    """log.cleaner.io.max.bytes.per.second: a pass that read and wrote N bytes keeps
    the cleaner idle N / rate seconds; without a limit it may go again at once."""
    first, second = _compact_log(tmp_path / "a"), _compact_log(tmp_path / "b")
    for lg in (first, second):
        for round_ in range(10):
            _append(lg, [(b"k", b"v-%d" % round_)])
    cleaner = LogCleaner([tmp_path / "a", tmp_path / "b"], backoff_ms=0)
    cleaner.io_max_bytes_per_second = 1000.0
    logs = {("a", 0): first, ("b", 0): second}
    assert cleaner.maybe_clean(logs, NOW)
    moved = cleaner.stats.bytes_read + cleaner.stats.bytes_written
    assert moved > 0
    held_ms = moved * 1000 / 1000.0
    assert cleaner.throttled_until_ms == NOW + held_ms
    assert not cleaner.maybe_clean(logs, NOW + int(held_ms) - 1)  # still held back
    assert cleaner.maybe_clean(logs, NOW + int(held_ms) + 1)  # the other log, now


def test_uncleanable_bytes_are_the_given_up_partitions_cleanable_bytes(tmp_path):
    lg = _compact_log(tmp_path)
    for i in range(40):
        _append(lg, [(b"k%d" % (i % 4), b"v%d" % i)])
    cleaner = _cleaner(tmp_path)
    logs = {("topic", 0): lg}
    assert cleaner.uncleanable_bytes(lambda t, p: logs.get((t, p))) == {str(tmp_path): 0}
    cleaner.uncleanable.add(("topic", 0))  # as a failed clean marks it
    below_active = sum(s.size for s in lg.segments if s is not lg.active_segment)
    assert below_active > 0
    got = cleaner.uncleanable_bytes(lambda t, p: logs.get((t, p)))
    assert got == {str(tmp_path): below_active}
