"""ListOffsets v0 by hand (kio has v1 and later only): the request with
``max_num_offsets`` and the response's ``old_style_offsets`` array, which Kafka 3.x
still serves and older clients (sarama-based tools such as Burrow) still send.

    request:  header v1 | replica_id int32 | [topic string | [partition int32 |
              timestamp int64 | max_num_offsets int32]]
    response: correlation_id int32 | [topic string | [partition int32 |
              error_code int16 | [offset int64]]]
"""

from __future__ import annotations

import struct
from typing import NamedTuple

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class PartitionRequest(NamedTuple):
    partition: int
    timestamp: int
    max_num_offsets: int


class Request(NamedTuple):
    correlation_id: int
    client_id: str | None
    replica_id: int
    topics: list[tuple[str, list[PartitionRequest]]]


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: struct.Struct):
        value = fmt.unpack_from(self.data, self.pos)[0]
        self.pos += fmt.size
        return value

    def string(self) -> str | None:
        n = self.take(_I16)
        if n < 0:
            return None
        text = self.data[self.pos : self.pos + n].decode()
        if len(text.encode()) != n:
            raise ValueError("string runs past the end of the request")
        self.pos += n
        return text


def parse_request(frame: bytes) -> Request:
    """Raises ValueError (or struct.error) on a malformed request."""
    c = _Cursor(frame)
    c.pos = 4  # api key and version
    correlation_id = c.take(_I32)
    client_id = c.string()
    replica_id = c.take(_I32)
    topics = []
    for _ in range(c.take(_I32)):
        name = c.string() or ""
        parts = [
            PartitionRequest(c.take(_I32), c.take(_I64), c.take(_I32)) for _ in range(c.take(_I32))
        ]
        topics.append((name, parts))
    return Request(correlation_id, client_id, replica_id, topics)


def encode_response(
    correlation_id: int, topics: list[tuple[str, list[tuple[int, int, list[int]]]]]
) -> bytes:
    out = bytearray(_I32.pack(0) + _I32.pack(correlation_id) + _I32.pack(len(topics)))
    for name, parts in topics:
        data = name.encode()
        out += _I16.pack(len(data)) + data + _I32.pack(len(parts))
        for partition, error, offsets in parts:
            out += _I32.pack(partition) + _I16.pack(error) + _I32.pack(len(offsets))
            out += b"".join(_I64.pack(o) for o in offsets)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
