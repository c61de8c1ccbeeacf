"""LogManager: locks, meta.properties, checkpoints, clean shutdown, placement, deletion."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker.log.manager import (
    LogDirLockedError,
    LogManager,
    MetaPropertiesError,
    read_meta_properties,
)

from .log_helpers import batch, config, read_all


def test_lock_refuses_a_second_manager(tmp_path) -> None:
    first = LogManager([tmp_path / "a"], config())
    with pytest.raises(LogDirLockedError, match="Failed to acquire lock on file .lock"):
        LogManager([tmp_path / "b", tmp_path / "a"], config())
    # another process is refused too (flock is per open file description)
    code = (
        "import sys; from broker.log.manager import LogManager, LogDirLockedError\n"
        f"try: LogManager([{str(tmp_path / 'a')!r}])\n"
        "except LogDirLockedError: sys.exit(3)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 3
    first.close()
    LogManager([tmp_path / "a", tmp_path / "b"], config()).close()  # free again


def test_meta_properties(tmp_path) -> None:
    m = LogManager([tmp_path / "a"], config(), broker_id=3)
    m.ensure_meta_properties(3, "clusterXYZ")
    m.close()
    props = read_meta_properties(tmp_path / "a")
    assert props == {"version": "0", "broker.id": "3", "cluster.id": "clusterXYZ"}
    with pytest.raises(MetaPropertiesError, match="doesn't match stored broker.id 3"):
        LogManager([tmp_path / "a"], config(), broker_id=4)
    with pytest.raises(MetaPropertiesError, match="doesn't match stored clusterId"):
        LogManager([tmp_path / "a"], config(), broker_id=3, cluster_id="other")
    LogManager([tmp_path / "a"], config(), broker_id=3, cluster_id="clusterXYZ").close()


def test_checkpoints_clean_shutdown_and_reload(tmp_path) -> None:
    m = LogManager([tmp_path / "a"], config(segment_bytes=400), now_ms=0)
    log = m.get_or_create_log("orders", 0)
    assert m.get_or_create_log("orders", 0) is log
    for _ in range(10):
        log.append_as_leader(batch(2), now_ms=1)
    log.high_watermark = 12
    log.delete_records_before(3)
    m.close()
    d = tmp_path / "a"
    assert (d / ".kafka_cleanshutdown").exists()
    assert (d / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 20\n"
    assert (d / "log-start-offset-checkpoint").read_text() == "0\n1\norders 0 3\n"
    assert (d / "replication-offset-checkpoint").read_text() == "0\n1\norders 0 12\n"
    m = LogManager([d], config(segment_bytes=400))
    assert not (d / ".kafka_cleanshutdown").exists()  # removed once loaded
    log = m.get_log("orders", 0)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (3, 20, 12)
    assert log.recovery_point == 20
    assert [r.offset for r in read_all(log, start=3)] == list(range(3, 20))
    m.close()


def test_unclean_restart_recovers_from_the_recovery_point(tmp_path) -> None:
    d = tmp_path / "a"
    m = LogManager([d], config())
    log = m.get_or_create_log("t", 0)
    for _ in range(5):
        log.append_as_leader(batch(2), now_ms=1)
    m.checkpoint()
    with open(log.active_segment.log_path, "ab") as f:
        f.write(b"\x00\x01garbage" * 50)
    # no close: the lock dies with the process; here we just drop the fds
    m._release_locks()
    m2 = LogManager([d], config())
    assert m2.get_log("t", 0).log_end_offset == 10
    assert m2.get_log("t", 0).size_bytes == 5 * len(batch(2))
    m2.close()


def test_logs_know_their_dir_as_the_managers_own_path(tmp_path) -> None:
    m = LogManager([tmp_path / "a", tmp_path / "b"], config())
    logs = [m.get_or_create_log("t", p) for p in range(7)]  # counts kept, not recounted
    assert [lg.dir.parent.name for lg in logs].count("a") == 4
    assert all(lg.parent_dir == lg.dir.parent for lg in logs)
    assert all(any(lg.parent_dir is d for d in m.log_dirs) for lg in logs)
    m.close()
    m = LogManager([tmp_path / "a", tmp_path / "b"], config())  # loaded ones too
    assert all(any(lg.parent_dir is d for d in m.log_dirs) for _, lg in m.all_logs())
    m.close()


def test_placement_deletion_and_sizes(tmp_path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, config(file_delete_delay_ms=1000))
    logs = [m.get_or_create_log("t", p) for p in range(4)]
    assert sorted(lg.dir.parent.name for lg in logs) == ["a", "a", "b", "b"]
    logs[0].append_as_leader(batch(3), now_ms=1)
    sizes = m.log_dir_sizes()
    assert sizes[str(logs[0].dir.parent)][("t", 0)] == len(batch(3))
    assert m.delete_log("t", 0, now_ms=10_000)
    assert m.get_log("t", 0) is None
    doomed = [p for p in logs[0].dir.parent.iterdir() if p.name.endswith("-delete")]
    assert len(doomed) == 1 and doomed[0].name.startswith("t-0.")
    m.tick(10_500)
    assert doomed[0].exists()  # file.delete.delay.ms not yet elapsed
    m.tick(11_001)
    assert not doomed[0].exists()
    m.close()
    m = LogManager(dirs, config())
    assert sorted(tp for tp, _ in m.all_logs()) == [("t", 1), ("t", 2), ("t", 3)]
    m.close()


def test_update_config_and_periodic_retention(tmp_path) -> None:
    m = LogManager(
        [tmp_path / "a"], config(segment_bytes=300), retention_check_interval_ms=100, now_ms=0
    )
    log = m.get_or_create_log("t", 0)
    for _ in range(8):
        log.append_as_leader(batch(2, ts=1_000), now_ms=1)
    log.high_watermark = log.log_end_offset
    segments = len(log.segments)
    m.update_config("t", config(segment_bytes=300, retention_ms=50_000, file_delete_delay_ms=0))
    assert log.config.retention_ms == 50_000
    m.tick(50)  # retention check not due yet
    assert len(log.segments) == segments
    m.tick(100_000)
    assert len(log.segments) == 1 and log.log_start_offset == log.active_segment.base_offset
    assert not list((tmp_path / "a" / "t-0").glob("*.deleted"))
    m.close()


def test_flush_ms_and_rolled_segment_flush(tmp_path) -> None:
    m = LogManager([tmp_path / "a"], config(segment_bytes=300), now_ms=0)
    log = m.get_or_create_log("t", 0, config(segment_bytes=300, flush_ms=1000), now_ms=0)
    for _ in range(4):
        log.append_as_leader(batch(2), now_ms=1)
    assert len(log.segments) > 1 and log.recovery_point == 0
    m.flush_dirty_logs(500)  # flush.ms not elapsed: only the rolled segments
    assert log.recovery_point == log.active_segment.base_offset
    m.flush_dirty_logs(1_000)  # that flush counts as one (Kafka's markFlushed)
    assert log.recovery_point == log.active_segment.base_offset
    m.flush_dirty_logs(1_500)
    assert log.recovery_point == log.log_end_offset
    m.close()


def test_recovery_threads_load_every_dir_as_one_thread_does(tmp_path) -> None:
    """num.recovery.threads.per.data.dir: logs of two dirs recovered on 4 threads each
    after an unclean stop hold what the serial load finds, torn tails cut off."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, config())
    for p in range(12):
        log = m.get_or_create_log("t", p)
        for _ in range(p % 3 + 1):
            log.append_as_leader(batch(2), now_ms=1)
        with open(log.active_segment.log_path, "ab") as f:
            f.write(b"\x00\x01torn" * 7)
    m._release_locks()  # an unclean stop: no clean-shutdown marker, no checkpoints
    loaded = {}
    for threads in (4, 1):  # the threaded load is the one that meets the torn tails
        m2 = LogManager(dirs, config(), recovery_threads_per_data_dir=threads)
        loaded[threads] = {
            (tp, str(lg.dir.parent)): [r.offset for r in read_all(lg)] for tp, lg in m2.all_logs()
        }
        m2._release_locks()
    assert len(loaded[4]) == 12
    assert loaded[4] == loaded[1]
    assert {len(offsets) for offsets in loaded[4].values()} == {2, 4, 6}
    assert {d for _, d in loaded[4]} == {str(d.absolute()) for d in dirs}


def test_checkpoint_files_rewritten_only_when_a_value_moved(tmp_path) -> None:
    """With thousands of idle logs the 5 s high watermark checkpoint must not rewrite
    (and fsync) every dir's file each time: a dir's file is written again only when one
    of its offsets moved, and then holds every partition's current offset."""
    m = LogManager([tmp_path / "a", tmp_path / "b"], config(), now_ms=0)
    logs = [m.get_or_create_log("t", i) for i in range(6)]  # three in each dir
    for i, lg in enumerate(logs):
        lg.append_as_leader(batch(i + 1), now_ms=1)
        lg.high_watermark = i + 1
    m.checkpoint_high_watermarks()
    files = {d: tmp_path / d / "replication-offset-checkpoint" for d in ("a", "b")}
    inodes = {d: f.stat().st_ino for d, f in files.items()}  # written by rename: new inode
    m.checkpoint_high_watermarks()
    assert {d: f.stat().st_ino for d, f in files.items()} == inodes  # nothing moved
    moved = logs[1]
    moved_dir = moved.dir.parent.name
    moved.append_as_leader(batch(3), now_ms=2)
    moved.high_watermark = moved.log_end_offset
    m.checkpoint_high_watermarks()
    assert files[moved_dir].stat().st_ino != inodes[moved_dir]  # its dir's file again
    other = "b" if moved_dir == "a" else "a"
    assert files[other].stat().st_ino == inodes[other]
    expected = sorted(
        f"t {lg.partition} {lg.high_watermark}" for lg in logs if lg.dir.parent.name == moved_dir
    )
    lines = files[moved_dir].read_text().splitlines()
    assert lines[:2] == ["0", "3"] and sorted(lines[2:]) == expected
    assert f"t 1 {1 + 1 + 3}" in lines  # the moved one's new high watermark
    assert m.checkpoint_plan("replication-offset-checkpoint", lambda lg: lg.high_watermark) == []
    m.delete_log("t", 1)  # a partition gone is a change too
    m.checkpoint_high_watermarks()
    assert "t 1 " not in files[moved_dir].read_text()
    m.close()


def test_only_logs_that_rolled_are_flushed_by_the_tick(tmp_path) -> None:
    m = LogManager([tmp_path / "a"], config(segment_bytes=300), now_ms=0)
    rolling = m.get_or_create_log("t", 0)
    quiet = m.get_or_create_log("t", 1)
    quiet.append_as_leader(batch(1), now_ms=1)
    m.flush_dirty_logs(10)
    for _ in range(4):
        rolling.append_as_leader(batch(2), now_ms=1)
    assert len(rolling.segments) > 1 and rolling.recovery_point == 0
    m.flush_dirty_logs(20)  # told of the roll: flushed up to the new segment
    assert rolling.recovery_point == rolling.active_segment.base_offset
    assert quiet.recovery_point == 0  # flush.ms is Kafka's default (never): untouched
    m.close()


def test_checkpoint_job_writes_from_a_thread_and_never_after_close(tmp_path) -> None:
    """The chores hand the due checkpoint files to a worker thread (checkpoint_job):
    it writes the offsets the logs have when it runs, and a job that runs after close
    wrote the final files writes nothing (a stale write would undo close's)."""
    import threading

    m = LogManager([tmp_path / "a"], config(), now_ms=0)
    lg = m.get_or_create_log("t", 0)
    lg.append_as_leader(batch(4), now_ms=1)
    due: list[str] = []
    m.tick(now_ms=10**12, checkpoints=due)  # everything is due this far on
    assert sorted(due) == [
        "log-start-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
    ]
    job = m.checkpoint_job(due)
    lg.high_watermark = 4  # moved after the job was made: the job reads it when it runs
    result: list = []
    worker = threading.Thread(target=lambda: result.append(job()))
    worker.start()
    worker.join(30)
    assert result == [[]]  # no failures
    hw_file = tmp_path / "a" / "replication-offset-checkpoint"
    assert hw_file.read_text().splitlines() == ["0", "1", "t 0 4"]
    late = m.checkpoint_job(["replication-offset-checkpoint"])
    lg.high_watermark = 2  # what close finds is final, whatever a late job would read
    m.close()
    inode = hw_file.stat().st_ino
    assert late() == []
    assert hw_file.stat().st_ino == inode and hw_file.read_text().splitlines()[2] == "t 0 2"
