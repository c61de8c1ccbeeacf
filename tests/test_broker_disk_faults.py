"""Disk faults: a full log dir refuses produces with KAFKA_STORAGE_ERROR while the
broker serves reads and its other log dirs, and loses nothing acknowledged; a write
error takes the dir offline (Kafka's LogDirFailureChannel) and the controller moves
leadership away. The full disk is a real tmpfs the test mounts; the write error is a
real EFBIG from a file size limit put on the running broker (prlimit)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.records import build_batch, decode_records
from tests.wait_helpers import wait_until
from tests.wire import WireClient

STORAGE_ERROR = ErrorCode.kafka_storage_error

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a tmpfs and prlimit on the broker need root"
)


def _batch(i: int, size: int = 20_000) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(b"k%d" % i, (b"%08d" % i) * (size // 8), [], now)])


def _read_all(w: WireClient, topic: str, partition: int) -> list[bytes]:
    keys: list[bytes] = []
    offset = 0
    while True:
        part = w.fetch(topic, partition, offset, max_bytes=4 << 20)
        assert part.error_code == ErrorCode.none
        records = decode_records(bytes(part.records)) if part.records else []
        if not records:
            return keys
        keys += [r.key for r in records]
        offset = records[-1].offset + 1


@pytest.fixture
def tmpfs(tmp_path):
    mount = tmp_path / "small-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _partition_dirs(log_dir: Path, topic: str) -> set[int]:
    return {int(p.name.rsplit("-", 1)[1]) for p in log_dir.glob(f"{topic}-*")}


def test_full_log_dir_refuses_produce_keeps_reads_and_other_dirs(cluster_factory, tmpfs, tmp_path):
    other = tmp_path / "big-disk"
    filler = tmpfs / "filler"
    filler.write_bytes(b"\0" * 200_000)  # freed later, to make room again
    c = cluster_factory(1, **{"log.dirs": f"{tmpfs},{other}"})
    w = WireClient.for_bootstrap(c.bootstrap)
    topic = "full"
    assert w.create_topic(topic, 2).error_code == ErrorCode.none
    deadline = time.monotonic() + 60
    while not (_partition_dirs(tmpfs, topic) and _partition_dirs(other, topic)):
        assert time.monotonic() < deadline, "partitions were not placed one per log dir"
        time.sleep(0.2)
    (small,) = _partition_dirs(tmpfs, topic)
    (big,) = _partition_dirs(other, topic)

    acked = []
    codes = []
    for i in range(200):  # 200 x 20 KB: far more than the 1 MB tmpfs holds
        r = w.produce(topic, small, _batch(i))
        codes.append(r.error_code)
        if r.error_code == ErrorCode.none:
            assert r.base_offset == len(acked)
            acked.append(b"k%d" % i)
        elif r.error_code == STORAGE_ERROR and codes.count(STORAGE_ERROR) >= 3:
            break
    assert set(codes) == {ErrorCode.none, STORAGE_ERROR}
    assert len(acked) >= 10
    # the broker is up, reads the full dir, writes the other one
    assert _read_all(w, topic, small) == acked
    assert w.list_offset(topic, small, -1).offset == len(acked)
    for i in range(20):
        assert w.produce(topic, big, _batch(i)).error_code == ErrorCode.none
    assert len(_read_all(w, topic, big)) == 20
    w.close()

    broker = c.broker(1)
    broker.stop()
    filler.unlink()
    broker.start()
    w = WireClient.for_bootstrap(c.bootstrap)
    wait_until(lambda: w.list_offset(topic, small, -1).error_code == ErrorCode.none)
    assert _read_all(w, topic, small) == acked
    r = w.produce(topic, small, _batch(999, 1000))
    assert r.error_code == ErrorCode.none and r.base_offset == len(acked)
    assert _read_all(w, topic, small) == [*acked, b"k999"]
    w.close()


def test_write_error_takes_the_dir_offline_and_leadership_moves(cluster_factory, tmp_path):
    c = cluster_factory(2)
    # broker 1 gets a second log dir, so losing one leaves it running (with none left
    # it would stop, as Kafka does)
    one = c.broker(1)
    one.stop()
    one.proc.spec.env["QUILL_LOG_DIRS"] = f"{c.state_dir / 'broker-1' / 'data'},{tmp_path / 'b1'}"
    one.start()
    w = WireClient.for_bootstrap(c.bootstrap)
    topic = "doomed"
    # broker 1 leads partition 0, broker 2 follows
    result = w.request(
        19,
        7,
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                    "configs": [],
                }
            ],
            "timeout": 10000,
            "validate_only": False,
        },
    ).topics[0]
    assert result.error_code == ErrorCode.none
    zk = c.zk_client()
    state_path = f"/brokers/topics/{topic}/partitions/0/state"
    wait_until(lambda: zk.exists(state_path) and len(_state(zk, state_path)["isr"]) == 2)
    leader = WireClient.for_bootstrap(c.broker(1).address)
    acked = []
    for i in range(5):
        r = leader.produce(topic, 0, _batch(i, 1000), acks=-1)
        assert r.error_code == ErrorCode.none
        acked.append(b"k%d" % i)
    # every file broker 1 writes from now on may not grow past 64 KB: EFBIG
    subprocess.run(["prlimit", f"--pid={c.broker(1).pid}", "--fsize=65536"], check=True)
    codes = []
    for i in range(5, 40):
        r = leader.produce(topic, 0, _batch(i, 8000), acks=-1)
        codes.append(r.error_code)
        if r.error_code == ErrorCode.none:
            acked.append(b"k%d" % i)
        else:
            break
    assert codes[-1] == STORAGE_ERROR, codes
    # the controller moved leadership to broker 2 and took broker 1 out of the ISR
    wait_until(lambda: _state(zk, state_path)["leader"] == 2)
    assert _state(zk, state_path)["isr"] == [2]
    assert zk.get_children("/log_dir_event_notification") == []  # read and deleted
    assert leader.produce(topic, 0, _batch(99, 100)).error_code in (
        STORAGE_ERROR,
        ErrorCode.not_leader_or_follower,
    )
    assert c.broker(1).alive
    assert leader.request(18, 0, {}).error_code == ErrorCode.none  # still answering
    new_leader = WireClient.for_bootstrap(c.broker(2).address)
    wait_until(lambda: new_leader.produce(topic, 0, _batch(100, 100)).error_code == ErrorCode.none)
    got = _read_all(new_leader, topic, 0)
    assert got[: len(acked)] == acked  # nothing acknowledged lost, no half batch
    assert set(got[len(acked) :]) <= {b"k100"}
    for client in (w, leader, new_leader):
        client.close()


def _state(zk, path: str) -> dict:
    return json.loads(zk.get(path)[0])
