"""Helpers for the tests/test_log_*.py files: batches, and reading a log back."""

from __future__ import annotations

from broker.log.config import LogConfig
from broker.log.log import Log
from broker.protocol.records import build_batch, decode_records, scan_valid_prefix


def batch(
    count: int = 1,
    *,
    ts: int = 1_000,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    value_size: int = 10,
    compression: int = 0,
    tag: bytes = b"v",
) -> bytearray:
    """A produce batch (base offset 0) of ``count`` records with timestamps ts, ts+1..."""
    records = [(b"k%d" % i, tag + b"%d-" % i + b"x" * value_size, [], ts + i) for i in range(count)]
    return bytearray(
        build_batch(
            records,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            compression=compression,
        )
    )


def config(**props) -> LogConfig:
    """A LogConfig from keyword props: segment_bytes=2000 -> segment.bytes=2000."""
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})


def read_all(log: Log, start: int = 0, max_offset: int | None = None) -> list:
    """Every record from ``start`` up to ``max_offset`` (default LEO), via Log.read."""
    out = []
    offset = start
    end = log.log_end_offset if max_offset is None else max_offset
    while offset < end:
        data = log.read(offset, 1 << 20, max_offset=max_offset)
        if data is None:
            break
        raw = data.read_bytes()
        _, headers = scan_valid_prefix(raw)
        assert headers, f"no whole batch at offset {offset}"
        for h in headers:
            out += [
                r
                for r in decode_records(raw[h.position : h.position + h.size])
                if r.offset >= offset
            ]
        offset = headers[-1].next_offset
    return out
