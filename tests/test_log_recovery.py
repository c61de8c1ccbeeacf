"""Recovery on open: torn writes, garbage tails, corrupt batches and indexes, leftovers."""

from __future__ import annotations

import os
import struct

from broker.log.log import Log

from .log_helpers import batch, config, read_all


def _filled(path, n: int = 10, cfg=None) -> tuple[Log, list[int]]:
    log = Log(path, cfg or config(index_interval_bytes=100))
    sizes = []
    for i in range(n):
        b = batch(2, ts=1_000 + i, tag=b"%d" % i)
        sizes.append(len(b))
        log.append_as_leader(b, leader_epoch=1 + i // 4, now_ms=1)
    return log, sizes


def _records(log: Log) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in read_all(log)]


def test_garbage_tail_is_cut(tmp_path) -> None:
    d = tmp_path / "t-0"
    log, sizes = _filled(d)
    expected = _records(log)
    size = log.size_bytes
    with open(d / "00000000000000000000.log", "ab") as f:  # crash: garbage after the data
        f.write(os.urandom(3000))
    log = Log(d, config(index_interval_bytes=100))
    assert log.log_end_offset == 20 and log.size_bytes == size
    assert os.path.getsize(d / "00000000000000000000.log") == size
    assert _records(log) == expected
    assert log.append_as_leader(batch(1), now_ms=1).first_offset == 20


def test_zero_filled_tail_is_cut(tmp_path) -> None:
    d = tmp_path / "t-0"
    log, _ = _filled(d)
    size = log.size_bytes
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(bytes(4096))
    log = Log(d, config())
    assert log.log_end_offset == 20 and log.size_bytes == size


def test_torn_last_batch_is_dropped(tmp_path) -> None:
    d = tmp_path / "t-0"
    log, sizes = _filled(d)
    expected = _records(log)
    os.truncate(d / "00000000000000000000.log", sum(sizes) - 7)
    log = Log(d, config(index_interval_bytes=100))
    assert log.log_end_offset == 18
    assert log.size_bytes == sum(sizes[:-1])
    assert _records(log) == expected[:18]
    assert log.append_as_leader(batch(1), now_ms=1).first_offset == 18


def test_bad_crc_in_the_middle_truncates_there_and_drops_later_segments(tmp_path) -> None:
    d = tmp_path / "t-0"
    cfg = config(segment_bytes=400)
    log, sizes = _filled(d, 12, cfg)
    assert len(log.segments) >= 3
    second = log.segments[1]
    expected = _records(log)
    with open(second.log_path, "r+b") as f:  # flip a byte in the 2nd batch of segment 2
        f.seek(sizes[0] + 70)
        byte = f.read(1)
        f.seek(sizes[0] + 70)
        f.write(bytes([byte[0] ^ 0x55]))
    log = Log(d, cfg)  # unclean, recovery point 0: everything is re-validated
    assert log.log_end_offset == second.base_offset + 2
    assert [s.base_offset for s in log.segments] == [0, second.base_offset]
    assert _records(log) == expected[: second.base_offset + 2]
    assert sorted(p.name for p in d.glob("*.log")) == [
        "00000000000000000000.log",
        f"{second.base_offset:020d}.log",
    ]


def test_corrupt_and_missing_indexes_are_rebuilt(tmp_path) -> None:
    d = tmp_path / "t-0"
    cfg = config(segment_bytes=600, index_interval_bytes=100)
    log, _ = _filled(d, 20, cfg)
    expected = _records(log)
    log.flush()
    log.close()
    first, second, active = (f"{s.base_offset:020d}" for s in log.segments[:2] + log.segments[-1:])
    old = (d / f"{first}.index").read_bytes()
    assert len(old) >= 16
    (d / f"{first}.index").write_bytes(old[:-3])  # truncated mid-entry
    (d / f"{second}.index").write_bytes(struct.pack(">ii", 3, 7) * 4)  # garbage
    (d / f"{active}.index").unlink()  # missing
    (d / f"{active}.timeindex").write_bytes(b"\xff" * 24)
    # clean shutdown: no recovery, the indexes are checked on first use
    log = Log(d, cfg, recovery_point=40, had_clean_shutdown=True)
    assert log.log_end_offset == 40
    assert _records(log) == expected
    rebuilt = (d / f"{first}.index").read_bytes()
    assert len(rebuilt) % 8 == 0 and len(rebuilt) >= 8
    assert (d / f"{active}.index").exists()
    assert log.fetch_offset_by_timestamp(1_015).offset == 29  # batch 14: ts 1014, 1015
    for offset in range(40):
        assert log.read(offset, 1).read_bytes()  # every offset is found


def test_leftover_files_are_cleaned_up(tmp_path) -> None:
    d = tmp_path / "t-0"
    log, _ = _filled(d, 4)
    log.close()
    (d / "00000000000000000050.log.deleted").write_bytes(b"x")
    (d / "00000000000000000060.log.cleaned").write_bytes(b"x")
    (d / "00000000000000000070.index").write_bytes(b"")  # orphan index
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"")
    log = Log(d, config(), had_clean_shutdown=True)
    names = sorted(os.listdir(d))
    assert not [n for n in names if n.endswith((".deleted", ".cleaned", ".tmp"))]
    assert "00000000000000000070.index" not in names
    assert log.log_end_offset == 8


def test_interrupted_swap_is_completed(tmp_path) -> None:
    d = tmp_path / "t-0"
    log, _ = _filled(d, 4)
    log.close()
    log_file = d / "00000000000000000000.log"
    data = log_file.read_bytes()
    # a "compacted" replacement holding only the first batch, left as .swap by a crash
    first_batch = data[: int.from_bytes(data[8:12], "big") + 12]
    (d / "00000000000000000000.log.swap").write_bytes(first_batch)
    log = Log(d, config(), had_clean_shutdown=True)
    assert not list(d.glob("*.swap"))
    assert log.log_end_offset == 2 and log_file.read_bytes() == first_batch


def test_leader_epochs_are_recovered_from_batches(tmp_path) -> None:
    d = tmp_path / "t-0"
    log, _ = _filled(d, 10)
    entries = log.leader_epoch_cache.entries()
    assert [tuple(e) for e in entries] == [(1, 0), (2, 8), (3, 16)]
    (d / "leader-epoch-checkpoint").unlink()
    log = Log(d, config())
    assert log.leader_epoch_cache.entries() == entries
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n2 8\n3 16\n"
