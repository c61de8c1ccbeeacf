"""Checkpoint files (Kafka's text formats) and the leader epoch cache."""

from __future__ import annotations

import pytest

from broker.log.checkpoint import CheckpointError, OffsetCheckpointFile
from broker.log.leader_epoch import LeaderEpochFileCache


def test_offset_checkpoint_format_and_round_trip(tmp_path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    cp = OffsetCheckpointFile(path)
    assert cp.read() == {}
    cp.write({("orders", 1): 42, ("orders", 0): 7, ("a-b.c", 12): 0})
    assert path.read_text() == "0\n3\na-b.c 12 0\norders 0 7\norders 1 42\n"
    assert cp.read() == {("orders", 1): 42, ("orders", 0): 7, ("a-b.c", 12): 0}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


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
