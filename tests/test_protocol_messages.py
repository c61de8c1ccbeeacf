"""The hand-written Fetch encoder and the versioned builder, checked against kio's codecs."""

import struct

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from broker.protocol.fetch_response import PartitionData, encode_fetch_response
from broker.protocol.list_offsets_response import OffsetAnswer, encode_list_offsets_response
from broker.protocol.messages import (
    ProtocolError,
    RequestHeader,
    build,
    encode_request,
    encode_response,
    parse_request,
    request_schema,
    response_schema,
)
from broker.server.apis import SUPPORTED


class Region:
    """Stands in for a file region: the encoder must leave it in place, unread."""

    def __init__(self, data: bytes) -> None:
        self.data = data


def _join(parts) -> bytes:
    return b"".join(p.data if isinstance(p, Region) else p for p in parts)


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_response_matches_kio(version):
    records = b"\x01" * 100
    parts = encode_fetch_response(
        version,
        77,
        [
            (
                "orders",
                [
                    PartitionData(0, 0, 10, 10, 0, Region(records), len(records)),
                    PartitionData(1, 1, -1, -1, -1, b"", 0),
                ],
            ),
            ("empty", []),
        ],
    )
    assert any(isinstance(p, Region) for p in parts)
    frame = _join(parts)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    (corr,) = struct.unpack_from(">i", frame, 4)
    assert corr == 77
    schema = load_response_schema(1, version)
    body_start = 8 + (1 if version >= 12 else 0)
    body, used = entity_reader(schema)(frame, body_start)
    assert body_start + used == len(frame)
    p0, p1 = body.responses[0].partitions
    assert body.responses[0].topic == "orders"
    assert bytes(p0.records) == records and p0.high_watermark == 10
    assert p1.error_code == 1 and p1.high_watermark == -1
    if version >= 5:
        assert p1.log_start_offset == -1


@pytest.mark.parametrize("version", range(1, 8))
def test_list_offsets_response_matches_kio(version):
    answers = [OffsetAnswer(0, 0, -1, 1234, 7), OffsetAnswer(5, 6, -1, -1, -1)]
    timed = [OffsetAnswer(2, 0, 1_700_000_000_123, 99, 3)]
    frame = encode_list_offsets_response(
        version, 42, [("orders", answers), ("cl\u00e9s", timed), ("none", [])]
    )
    (size, corr) = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4 and corr == 42
    body_start = 8 + (1 if version >= 6 else 0)
    body, used = entity_reader(load_response_schema(2, version))(frame, body_start)
    assert body_start + used == len(frame)
    if version >= 2:
        assert body.throttle_time.total_seconds() == 0
    orders, keys, none = body.topics
    names = (orders.name, keys.name, none.name, none.partitions)
    assert names == ("orders", "cl\u00e9s", "none", ())
    got = [(p.partition_index, p.error_code, p.offset) for p in orders.partitions]
    assert got == [(0, 0, 1234), (5, 6, -1)]
    (p,) = keys.partitions
    assert p.offset == 99 and p.timestamp == 1_700_000_000_123
    if version >= 4:
        assert [q.leader_epoch for q in orders.partitions] == [7, -1] and p.leader_epoch == 3


def test_build_fills_versions_and_round_trips():
    data = {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (_n, lo, hi) in SUPPORTED.items()
        ],
        "throttle_time": 0,
    }
    for version in (0, 3):
        body = build(response_schema(18, version), data)
        frame = encode_response(18, version, 5, body)
        decoded, _ = entity_reader(response_schema(18, version))(frame, 8)
        assert {a.api_key for a in decoded.api_keys} == set(SUPPORTED)


def test_parse_request_rejects_garbage_and_tolerates_trailing_bytes():
    body = build(request_schema(3, 12), {"topics": None, "allow_auto_topic_creation": True})
    frame = encode_request(RequestHeader(3, 12, 9, "me"), body)[4:]
    header, parsed = parse_request(frame)
    assert header.correlation_id == 9 and header.client_id == "me" and parsed.topics is None
    assert parse_request(frame + b"\x01\x00\x00")[1] == parsed  # Kafka ignores them too
    with pytest.raises(ProtocolError):
        parse_request(frame[:10])
