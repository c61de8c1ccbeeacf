"""quill-dump-log on segment, index and snapshot files built byte by byte."""

from __future__ import annotations

import struct

import pytest

from broker.cli import dump_log
from broker.protocol.records import CRC_POS, build_batch

BASE = 100


def _segment(tmp_path):
    b1 = build_batch(
        [(b"k0", b"v0", [], 1000), (None, b"v1", [("h1", b"x"), ("h2", None)], 1001)],
        base_offset=BASE,
    )
    b2 = build_batch(
        [(b"k2", b"hello", [], 1002), (b"k3", None, [], 1005)],
        base_offset=BASE + 2,
        compression=3,
        producer_id=7,
        producer_epoch=1,
        base_sequence=5,
        partition_leader_epoch=4,
    )
    path = tmp_path / f"{BASE:020d}.log"
    path.write_bytes(b1 + b2)
    return path, b1, b2


def _run(capsys, *args) -> tuple[int, list[str]]:
    code = dump_log.main(list(args))
    return code, capsys.readouterr().out.splitlines()


def test_batches_and_records(tmp_path, capsys):
    path, b1, b2 = _segment(tmp_path)
    code, lines = _run(capsys, "--files", str(path), "--print-data-log")
    assert code == 0
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == f"Log starting offset: {BASE}"
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batches) == 2
    assert batches[0].startswith(
        "baseOffset: 100 lastOffset: 101 count: 2 baseSequence: -1 lastSequence: -1 "
        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: -1 isTransactional: false "
        "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1001 "
        f"size: {len(b1)} magic: 2 compresscodec: none crc: "
    )
    assert batches[0].endswith("isvalid: true")
    assert (
        "baseOffset: 102 lastOffset: 103 count: 2 baseSequence: 5 lastSequence: 6 producerId: 7 "
        "producerEpoch: 1 partitionLeaderEpoch: 4" in batches[1]
    )
    assert f"position: {len(b1)} CreateTime: 1005 size: {len(b2)}" in batches[1]
    assert "compresscodec: lz4" in batches[1]
    crc = struct.unpack_from(">I", b2, CRC_POS)[0]
    assert f"crc: {crc} isvalid: true" in batches[1]
    records = [line for line in lines if line.startswith("|")]
    assert records == [
        "| offset: 100 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] "
        "key: k0 payload: v0",
        "| offset: 101 CreateTime: 1001 keySize: -1 valueSize: 2 sequence: -1 "
        "headerKeys: [h1,h2] payload: v1",
        "| offset: 102 CreateTime: 1002 keySize: 2 valueSize: 5 sequence: 5 headerKeys: [] "
        "key: k2 payload: hello",
        "| offset: 103 CreateTime: 1005 keySize: 2 valueSize: -1 sequence: 6 headerKeys: [] "
        "key: k3",
    ]


def test_without_print_data_log_records_are_hidden_unless_deep(tmp_path, capsys):
    path, _, _ = _segment(tmp_path)
    _, lines = _run(capsys, "--files", str(path))
    assert not [line for line in lines if line.startswith("|")]
    _, lines = _run(capsys, "--files", str(path), "--deep-iteration")
    records = [line for line in lines if line.startswith("|")]
    assert len(records) == 4
    assert all("payload:" not in r for r in records)


def test_flipped_byte_makes_batch_invalid(tmp_path, capsys):
    path, b1, _ = _segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(b1) - 1] ^= 0xFF  # last byte of the first batch's records: covered by the CRC
    path.write_bytes(bytes(data))
    code, lines = _run(capsys, "--files", str(path))
    assert code == 0
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert batches[0].endswith("isvalid: false")
    assert batches[1].endswith("isvalid: true")


def test_torn_tail_is_reported(tmp_path, capsys):
    path, b1, b2 = _segment(tmp_path)
    path.write_bytes(b1 + b2[:30])
    _, lines = _run(capsys, "--files", str(path))
    assert len([line for line in lines if line.startswith("baseOffset:")]) == 1
    assert lines[-1] == f"Found 30 invalid bytes at the end of {path.name}"


def test_control_batch(tmp_path, capsys):
    key = struct.pack(">hh", 0, 1)  # version 0, COMMIT
    value = struct.pack(">hi", 0, 3)  # version 0, coordinator epoch 3
    batch = build_batch(
        [(key, value, [], 5)],
        producer_id=9,
        producer_epoch=0,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
    )
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(batch)
    _, lines = _run(capsys, "--files", str(path), "--print-data-log")
    assert "isTransactional: true isControl: true" in lines[2]
    assert lines[3].endswith("endTxnMarker: COMMIT coordinatorEpoch: 3")


def test_offset_and_time_index(tmp_path, capsys):
    path, b1, _ = _segment(tmp_path)
    index = path.with_suffix(".index")
    # Kafka preallocates index files: zero entries after the last real one are ignored.
    index.write_bytes(struct.pack(">ii", 1, 0) + struct.pack(">ii", 3, len(b1)) + bytes(16))
    timeindex = path.with_suffix(".timeindex")
    timeindex.write_bytes(struct.pack(">qi", 1001, 1) + struct.pack(">qi", 1005, 3))
    code, lines = _run(capsys, "--files", f"{index},{timeindex}")
    assert code == 0
    assert lines == [
        f"Dumping {index}",
        "offset: 101 position: 0",
        f"offset: 103 position: {len(b1)}",
        f"Dumping {timeindex}",
        "timestamp: 1001 offset: 101",
        "timestamp: 1005 offset: 103",
    ]


def test_index_mismatch_is_reported(tmp_path, capsys):
    path, _, _ = _segment(tmp_path)
    index = path.with_suffix(".index")
    index.write_bytes(struct.pack(">ii", 1, 0) + struct.pack(">ii", 3, 17))  # 17: mid-batch
    timeindex = path.with_suffix(".timeindex")
    timeindex.write_bytes(struct.pack(">qi", 999, 1))
    _, lines = _run(capsys, "--files", f"{index},{timeindex}")
    assert f"Mismatches in :{index.resolve()}" in lines
    assert "  Index offset: 103, log offset: -1" in lines
    assert "  Index timestamp: 999, log timestamp: 1001" in lines


def test_producer_snapshot(tmp_path, capsys):
    entry = struct.pack(">qhiqiqiq", 7, 1, 6, 103, 1, 1005, -1, -1)
    path = tmp_path / f"{104:020d}.snapshot"
    path.write_bytes(struct.pack(">hIi", 1, 0, 1) + entry)
    _, lines = _run(capsys, "--files", str(path))
    assert lines[1] == (
        "producerId: 7 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1005 firstSequence: 5 lastSequence: 6 "
        "lastOffset: 103 offsetDelta: 1 timestamp: 1005"
    )


@pytest.mark.parametrize("name", ["missing.log", "missing.index"])
def test_missing_file_fails(tmp_path, capsys, name):
    code = dump_log.main(["--files", str(tmp_path / name)])
    assert code == 1
    assert "No such file" in capsys.readouterr().err
