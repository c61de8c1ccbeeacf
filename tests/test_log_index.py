"""OffsetIndex / TimeIndex: Kafka's file formats, lookups, truncation, full, corruption."""

from __future__ import annotations

import struct

import pytest

from broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex


def test_offset_index_format_lookup_and_reload(tmp_path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, 1024)
    idx.append(105, 0)
    idx.append(120, 4100)
    idx.append(150, 8300)
    assert path.read_bytes() == struct.pack(">iiiiii", 5, 0, 20, 4100, 50, 8300)
    assert idx.lookup(99) == (100, 0)  # before the first entry: the segment start
    assert idx.lookup(105) == (105, 0)
    assert idx.lookup(119) == (105, 0)
    assert idx.lookup(120) == (120, 4100)
    assert idx.lookup(10_000) == (150, 8300)
    with pytest.raises(ValueError):
        idx.append(150, 9000)  # not increasing
    idx.close()
    again = OffsetIndex(path, 100, 1024)
    assert again.entries == 3 and again.last_offset == 150
    assert again.lookup(130) == (120, 4100)
    again.truncate_to(120)  # drops entries for offsets >= 120
    assert again.entries == 1 and len(path.read_bytes()) == 8
    again.close()


def test_offset_index_full(tmp_path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 8 * 3 + 5)
    assert idx.max_entries == 3
    for i in range(3):
        assert not idx.is_full
        idx.append(i, i * 10)
    assert idx.is_full
    with pytest.raises(ValueError):
        idx.append(10, 100)
    idx.close()


def test_time_index_format_lookup_truncate(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    idx = TimeIndex(path, 0, 12 * 10)
    idx.maybe_append(1000, 4)
    idx.maybe_append(1000, 9)  # not a larger timestamp: skipped
    idx.maybe_append(2000, 12)
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 4, 2000, 12)
    assert idx.lookup(999) == (-1, 0)
    assert idx.lookup(1500) == (1000, 4)
    assert idx.lookup(5000) == (2000, 12)
    assert idx.last_entry == (2000, 12)
    assert idx.max_entries == 10 and not idx.is_full
    idx.truncate_to(12)
    assert idx.entries == 1 and path.read_bytes() == struct.pack(">qi", 1000, 4)
    idx.close()
    assert TimeIndex(path, 0, 120).last_entry == (1000, 4)


def test_time_index_keeps_a_slot_for_the_final_entry(tmp_path) -> None:
    idx = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 12 * 3)
    idx.maybe_append(1, 1)
    idx.maybe_append(2, 2)
    assert idx.is_full  # max_entries - 1 used
    idx.maybe_append(3, 3, skip_full_check=True)
    assert idx.entries == 3
    idx.close()


def test_corrupt_index_files_are_detected(tmp_path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 1, 0) + b"\x00\x00\x00")  # not a multiple of 8
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 1024).lookup(1)
    path.write_bytes(struct.pack(">iiii", 5, 100, 3, 200))  # offsets go backwards
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 1024).sanity_check(1000)
    path.write_bytes(struct.pack(">iiii", 1, 100, 3, 5000))  # points past the log
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 1024).sanity_check(1000)
    tpath = tmp_path / "00000000000000000000.timeindex"
    tpath.write_bytes(struct.pack(">qiqi", 2000, 1, 1000, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(tpath, 0, 1024).sanity_check(10)


def test_only_a_bounded_number_of_index_files_stay_open(tmp_path, monkeypatch) -> None:
    """Ten thousand partitions must not need three descriptors each: past the cap the
    least recently used index file is closed, and later appends, truncation and fsync
    reopen it; every entry still lands in Kafka's format."""

    from broker.log import index as index_module

    files = index_module._OpenIndexFiles(cap=3)
    monkeypatch.setattr(index_module, "OPEN_INDEX_FILES", files)
    indexes = [OffsetIndex(tmp_path / f"{n:020d}.index", n, 1024) for n in range(6)]
    times = [TimeIndex(tmp_path / f"{n:020d}.timeindex", n, 1024) for n in range(6)]
    for round_ in range(3):
        for n, (idx, tix) in enumerate(zip(indexes, times, strict=True)):
            idx.append(n + 10 * round_ + 1, 100 * round_)
            tix.maybe_append(1_000 * (round_ + 1), n + 10 * round_ + 1)
    assert len(files) == 3
    assert len(_open_under(tmp_path)) == 3
    for idx in indexes + times:
        idx.flush()  # closed ones reopen to fsync, then count against the cap again
    assert len(files) == 3
    indexes[0].truncate_to(11)
    for n, idx in enumerate(indexes):
        kept = 1 if n == 0 else 3
        want = b"".join(struct.pack(">ii", 1 + 10 * r, 100 * r) for r in range(kept))
        assert idx.path.read_bytes() == want
    for tix in times:
        want = b"".join(struct.pack(">qi", 1_000 * (r + 1), 1 + 10 * r) for r in range(3))
        assert tix.path.read_bytes() == want
    for idx in indexes + times:
        idx.close()
    assert len(files) == 0 and _open_under(tmp_path) == []


def _open_under(directory) -> list[str]:
    """Files under `directory` this process holds open (other tests' threads may open
    and close descriptors meanwhile, so only ours are counted)."""
    import os

    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed between the listing and the readlink
        if target.startswith(str(directory)):
            found.append(target)
    return found
