"""Checkpoint files (Kafka's text formats) and the leader epoch cache."""

from __future__ import annotations

import random

import pytest

from broker.log.checkpoint import (
    CheckpointError,
    OffsetCheckpointFile,
    OffsetCheckpointRows,
    OffsetCheckpointText,
)
from broker.log.leader_epoch import LeaderEpochFileCache


def test_offset_checkpoint_format_and_round_trip(tmp_path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    cp = OffsetCheckpointFile(path)
    assert cp.read() == {}
    cp.write({("orders", 1): 42, ("orders", 0): 7, ("a-b.c", 12): 0})
    assert path.read_text() == "0\n3\na-b.c 12 0\norders 0 7\norders 1 42\n"
    assert cp.read() == {("orders", 1): 42, ("orders", 0): 7, ("a-b.c", 12): 0}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


@pytest.mark.parametrize("seed", range(5))
def test_kept_text_is_the_files_bytes_and_reformats_only_what_moved(tmp_path, seed) -> None:
    rng = random.Random(seed)
    partitions = {(rng.choice(["a", "orders", "z-1", "t.x"]), p): None for p in range(300)}
    text = OffsetCheckpointText(OffsetCheckpointRows(partitions))
    keys = sorted(partitions)
    values = [rng.randrange(10**12) for _ in keys]
    reference = OffsetCheckpointFile(tmp_path / "reference")
    previous: list[int] = []
    for _ in range(6):
        lines = text.lines_for(values)
        assert lines is not None
        reference.write(dict(zip(keys, values, strict=True)))
        assert text.render(lines) == reference.path.read_bytes()
        before = text.lines
        text.written(values, lines)
        assert text.lines_for(list(values)) is None  # nothing moved: nothing to write
        if previous:  # the lines of unmoved offsets are the same objects: not formatted
            assert all(
                (new is old) == (v == w)
                for new, old, v, w in zip(lines, before, values, previous, strict=True)
            )
        previous = values
        values = list(values)
        for i in rng.sample(range(len(values)), rng.randrange(1, 20)):
            values[i] += rng.randrange(1, 1000)


def test_kept_text_of_no_partitions(tmp_path) -> None:
    text = OffsetCheckpointText(OffsetCheckpointRows({}))
    reference = OffsetCheckpointFile(tmp_path / "reference")
    reference.write({})
    assert text.render(text.lines_for([])) == reference.path.read_bytes() == b"0\n0\n"


@pytest.mark.parametrize(
    "text",
    ["1\n0\n", "0\n2\ntopic 0 5\n", "0\n1\ntopic zero 5\n", "0\n1\ntopic 0\n", "x\n"],
)
def test_malformed_checkpoints_raise(tmp_path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile(path).read()


def test_leader_epoch_checkpoint(tmp_path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochFileCache(path)
    cache.assign(0, 0)
    cache.assign(0, 10)  # same epoch, later offset: no change
    cache.assign(2, 15)
    cache.assign(5, 40)
    assert path.read_text() == "0\n3\n0 0\n2 15\n5 40\n"
    assert cache.latest_epoch == 5
    # OffsetForLeaderEpoch
    assert cache.end_offset_for(5, 100) == (5, 100)
    assert cache.end_offset_for(2, 100) == (2, 40)
    assert cache.end_offset_for(3, 100) == (2, 40)  # unknown epoch: the one below it
    assert cache.end_offset_for(6, 100) == (-1, -1)
    assert cache.end_offset_for(-1, 100) == (-1, -1)
    assert cache.epoch_for_offset(20) == 2
    # reloads from the file
    again = LeaderEpochFileCache(path)
    assert again.entries() == cache.entries()
    # truncation from the end and from the start
    again.truncate_from_end(40)
    assert [tuple(e) for e in again.entries()] == [(0, 0), (2, 15)]
    again.truncate_from_start(20)
    assert [tuple(e) for e in again.entries()] == [(2, 20)]
    assert path.read_text() == "0\n1\n2 20\n"
    # a new epoch at a lower offset drops the conflicting entries
    again.assign(3, 18)
    assert [tuple(e) for e in again.entries()] == [(3, 18)]
