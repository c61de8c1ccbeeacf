"""Throughput of the produce hot path: validate_produce + assign_offsets.

Builds one uncompressed batch of up to 1 MiB holding records with 100-byte values
(as kafka-producer-perf-test --record-size 100 with batch.size=1MB sends) and times,
per iteration:

- crc only: CRC-32C over the batch (the floor: the one pass over the bytes we must do);
- validate: ``validate_produce`` (framing, header checks, CRC);
- validate+assign: the above plus ``assign_offsets`` (CreateTime, in place);
- validate+assign LAT: the same with LogAppendTime and a new append time on every call
  (rewrites max timestamp and attributes, so a second CRC pass).

Run: ``python bench/bench_records.py [--seconds 2] [--record-bytes 100] [--batch-bytes 1048576]``
"""

from __future__ import annotations

import argparse
import itertools
import struct
import time

import crc32c

from broker.protocol.records import (
    BATCH_HEADER_SIZE,
    assign_offsets,
    build_batch,
    validate_produce,
)

_BASE_OFFSET = struct.Struct(">q")


def make_batch(record_bytes: int, batch_bytes: int) -> tuple[bytearray, int]:
    """A batch of at most ``batch_bytes`` holding records with ``record_bytes`` values
    (like kafka-producer-perf-test's --record-size) and no key or headers."""
    value = b"v" * record_bytes
    count = (batch_bytes - BATCH_HEADER_SIZE) // (record_bytes + 12)  # 12 >= record framing
    records = [(None, value, [], 1_700_000_000_000 + i) for i in range(count)]
    return bytearray(build_batch(records)), count


def run(label: str, fn, buf: bytearray, count: int, seconds: float) -> None:
    fn()  # warm up
    iterations, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(20):
            fn()
        iterations += 20
    per_call = elapsed / iterations
    mb_s = len(buf) / per_call / 1e6
    rec_s = count / per_call
    print(
        f"{label:<22} {per_call * 1e6:9.1f} us/batch {mb_s:10.0f} MB/s {rec_s / 1e6:9.1f} M records/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--batch-bytes", type=int, default=1024 * 1024)
    args = parser.parse_args()

    buf, count = make_batch(args.record_bytes, args.batch_bytes)
    print(
        f"batch: {len(buf)} bytes, {count} records with {args.record_bytes}-byte values, uncompressed"
    )
    limit = len(buf)
    view = memoryview(buf)
    clock = itertools.count(int(time.time() * 1000))

    def crc_only():
        crc32c.crc32c(view[21:])

    def validate():
        validate_produce(buf, max_message_bytes=limit)

    def validate_assign():
        _BASE_OFFSET.pack_into(buf, 0, 0)  # as a client sends it
        headers = validate_produce(buf, max_message_bytes=limit)
        assign_offsets(buf, headers, 1_000_000, 5)

    def validate_assign_lat():
        _BASE_OFFSET.pack_into(buf, 0, 0)
        headers = validate_produce(buf, max_message_bytes=limit)
        assign_offsets(buf, headers, 1_000_000, 5, log_append_time_ms=next(clock))

    run("crc only", crc_only, buf, count, args.seconds)
    run("validate", validate, buf, count, args.seconds)
    run("validate+assign", validate_assign, buf, count, args.seconds)
    run("validate+assign LAT", validate_assign_lat, buf, count, args.seconds)


if __name__ == "__main__":
    main()
