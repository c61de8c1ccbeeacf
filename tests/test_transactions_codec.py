"""The records of ``__transaction_state``: Kafka's TransactionLog key and value bytes,
and which partition a transactional id lives in."""

from __future__ import annotations

import struct

from broker.coordinator.transaction import codec


def test_transaction_log_records_are_kafkas_bytes() -> None:
    key = codec.key_bytes("tx-1")
    assert key == b"\x00\x00\x00\x04tx-1"
    value = codec.TxnLogValue(42, 3, 60000, 1, {"t": [0, 2]}, 1700, 1600)
    raw = codec.value_bytes(value)
    expected = (
        struct.pack(">hqhib", 0, 42, 3, 60000, 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">qq", 1700, 1600)
    )
    assert raw == expected
    assert codec.read_value(raw) == value and codec.read_key(key) == "tx-1"
    empty = codec.TxnLogValue(42, 4, 60000, 0, None, 1, -1)
    assert codec.value_bytes(empty)[17:21] == b"\xff\xff\xff\xff"  # null partitions
    assert codec.read_value(codec.value_bytes(empty)) == empty


def test_transaction_log_value_v1_flexible_is_read() -> None:
    raw = (
        struct.pack(">hqhib", 1, 42, 3, 60000, 2)
        + bytes([2])  # compact array of 1
        + bytes([2])
        + b"t"
        + bytes([2])
        + struct.pack(">i", 5)
        + bytes([0])
        + struct.pack(">qq", 10, 9)
        + bytes([0])
    )
    assert codec.read_value(raw) == codec.TxnLogValue(42, 3, 60000, 2, {"t": [5]}, 10, 9)


def test_partition_for_matches_kafka() -> None:
    # Utils.abs("my-txn".hashCode) % 50, computed with Java
    assert codec.partition_for("my-txn", 50) == 1061187895 % 50 == 45
