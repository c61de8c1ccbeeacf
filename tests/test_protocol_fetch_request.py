"""The hand-written follower Fetch request encoder (v12) against kio's, byte for byte."""

from __future__ import annotations

import random

import pytest

from broker.protocol.fetch_request import FOLLOWER_FETCH_VERSION, encode_fetch_request
from broker.protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_request,
    request_schema,
)


def _random_body(rng: random.Random) -> dict:
    def partition(i: int) -> dict:
        return {
            "partition": i,
            "current_leader_epoch": rng.choice([-1, 0, rng.randrange(2**31)]),
            "fetch_offset": rng.choice([0, rng.randrange(2**63)]),
            "last_fetched_epoch": rng.choice([-1, rng.randrange(2**31)]),
            "log_start_offset": rng.choice([-1, 0, rng.randrange(2**63)]),
            "partition_max_bytes": rng.randrange(2**31),
        }

    def name() -> str:
        return rng.choice(["t", "orders", "cl\u00e9s", "x" * 249, "__consumer_offsets"])

    topics = [
        {"topic": name(), "partitions": [partition(i) for i in range(rng.randrange(0, 140))]}
        for _ in range(rng.randrange(0, 4))
    ]
    forgotten = [
        {"topic": name(), "partitions": [rng.randrange(2**31) for _ in range(rng.randrange(0, 5))]}
        for _ in range(rng.randrange(0, 3))
    ]
    body = {
        "replica_id": rng.randrange(-1, 2**31),
        "max_wait": rng.randrange(0, 2**31),
        "min_bytes": rng.randrange(0, 2**31),
        "max_bytes": rng.randrange(0, 2**31),
        "isolation_level": rng.choice([0, 1]),
        "session_id": rng.randrange(0, 2**31),
        "session_epoch": rng.choice([-1, 0, rng.randrange(2**31)]),
        "topics": topics,
        "forgotten_topics_data": forgotten,
        "rack_id": rng.choice(["", "rack-a", "r\u00e4ck"]),
    }
    if rng.random() < 0.3:
        body["cluster_id"] = rng.choice(["", "Mv1mM2nTQXmAGr1gPvMpiA"])
    return body


@pytest.mark.parametrize("seed", range(60))
def test_hand_encoder_equals_kio(seed: int) -> None:
    rng = random.Random(seed)
    body = _random_body(rng)
    client_id = rng.choice([None, "", "quill-replica-fetcher-2", "\u00e9"])
    header = RequestHeader(1, FOLLOWER_FETCH_VERSION, rng.randrange(2**31), client_id)
    expected = encode_request(header, build(request_schema(1, FOLLOWER_FETCH_VERSION), body))
    got = encode_fetch_request(header.correlation_id, client_id, body)
    assert got == expected
    parsed_header, parsed = parse_request(got[4:])  # and the broker reads it back
    assert parsed_header.correlation_id == header.correlation_id
    assert [p.fetch_offset for t in parsed.topics for p in t.partitions] == [
        p["fetch_offset"] for t in body["topics"] for p in t["partitions"]
    ]
