"""The replication short path (issue 24) against the general one, byte for byte.

- the leader answers a follower's incremental Fetch v12 with its own encoder
  (broker/server/handlers/follower_fetch.py): on a real cluster, the same request
  (same partitions, same offsets) answered by the general path (a full fetch) and by the
  short path (the incremental fetch that follows) gives the same bytes, with records,
  with an error partition and with an offset out of range; an empty round gives what the
  general encoder makes;
- ``encode_follower_fetch_response`` against ``encode_fetch_response(12, ...)`` on many
  shapes (record sizes around the varint boundaries, many partitions, long names,
  records sent in place);
- ``decode_follower_fetch_response`` against kio's decoder: what it accepts, kio reads
  the same; what it refuses (aborted transactions, tagged fields, unknown error codes,
  cut frames) it leaves to kio (None), and ``follower_fetch_answer`` then gives kio's
  reading, or kio's ProtocolError.
"""

from __future__ import annotations

import json
import random
import struct
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.client.connection import follower_fetch_answer
from broker.protocol.fetch_response import (
    PartitionData,
    decode_follower_fetch_response,
    encode_fetch_response,
    encode_follower_fetch_response,
)
from broker.protocol.messages import ProtocolError, parse_response
from broker.protocol.records import build_batch
from tests.wait_helpers import wait_until
from tests.wire import WireClient


class Region:
    """An opaque records object, as the leader's file regions are to the encoders."""

    def __init__(self, count: int) -> None:
        self.count = count


def _flat(parts: list) -> list:
    """Parts with adjacent bytes joined; an opaque records object stays itself."""
    out: list = []
    for part in parts:
        if isinstance(part, bytes | bytearray):
            if out and isinstance(out[-1], bytes):
                out[-1] += bytes(part)
            else:
                out.append(bytes(part))
        else:
            out.append(part)
    return out


def _general(correlation_id: int, session_id: int, topics: list) -> list:
    return encode_fetch_response(
        12,
        correlation_id,
        [
            (name, [PartitionData(i, e, hw, lso, ls, r, s) for i, e, hw, lso, ls, r, s in parts])
            for name, parts in topics
        ],
        session_id=session_id,
    )


def _random_topics(rng: random.Random, in_place: bool, small: bool = False) -> list:
    topics = []
    for t in range(rng.choice([0, 1, 1, 2, 3])):
        name = f"t{t}-" + "x" * rng.choice([1, 5] if small else [1, 5, 130, 200])
        parts = []
        for index in range(rng.choice([1, 2, 3] if small else [1, 2, 7, 130])):
            sizes = (
                [0, 1, 126, 127, 300]
                if small
                else [0, 0, 1, 125, 126, 127, 128, 300, 16383, 16384, 70000]
            )
            size = rng.choice(sizes)
            if size and in_place and rng.random() < 0.5:
                records: object = Region(size)
            else:
                records = rng.randbytes(size) if size else b""
            error = rng.choice([0, 0, 0, 1, 6, 74])
            hw = rng.choice([-1, 0, 5, 2**40])
            parts.append(
                (index, error, hw, hw if error == 0 else -1, rng.choice([-1, 0, 3]), records, size)
            )
        topics.append((name, parts))
    return topics


def test_the_short_encoder_makes_the_general_encoders_bytes() -> None:
    rng = random.Random(24)
    for _ in range(150):
        topics = _random_topics(rng, in_place=True)
        corr, sid = rng.randrange(2**31), rng.choice([0, 1, 2**31 - 1])
        assert _flat(encode_follower_fetch_response(corr, sid, topics)) == _flat(
            _general(corr, sid, topics)
        )


def _fields(resp) -> tuple:
    return (
        resp.error_code,
        resp.session_id,
        [
            (
                t.topic,
                p.partition_index,
                p.error_code,
                p.high_watermark,
                p.log_start_offset,
                p.records,
            )
            for t in resp.responses
            for p in t.partitions
        ],
    )


def _frame(topics: list, sid: int = 7) -> bytes:
    return b"".join(_general(99, sid, topics))[4:]  # as the connection reads it: no size


def test_the_short_decoder_reads_what_kio_reads() -> None:
    rng = random.Random(5)
    for _ in range(100):
        frame = _frame(_random_topics(rng, in_place=False))
        answer = decode_follower_fetch_response(frame)
        assert answer is not None
        assert tuple(answer) == _fields(parse_response(1, 12, frame)[1])


def _with_aborted(frame_topics: list) -> bytes:
    name, parts = frame_topics[0]
    index, _e, hw, lso, ls, records, size = parts[0]
    data = PartitionData(index, 0, hw, lso, ls, records, size, aborted_transactions=[(5, 0)])
    return b"".join(encode_fetch_response(12, 99, [(name, [data])], session_id=7))[4:]


def test_unusual_answers_are_left_to_kio() -> None:
    records = build_batch([(None, b"v", [], int(time.time() * 1000))])
    topics = [("t", [(0, 0, 1, 1, 0, records, len(records))])]
    frame = _frame(topics)
    cases = {
        "aborted transactions": _with_aborted(topics),
        "response header tagged field": frame[:4] + b"\x01\x00\x00" + frame[5:],
        "response tagged field": frame[:-1] + b"\x01\x00\x00",
        "unknown error code": frame[:9] + struct.pack(">h", 9999) + frame[11:],
        "unknown partition error code": frame[:23] + struct.pack(">h", 9999) + frame[25:],
        "cut short": frame[:-7],
    }
    for why, bad in cases.items():
        assert decode_follower_fetch_response(bad) is None, why
        try:
            expected = _fields(parse_response(1, 12, bad)[1])
        except ProtocolError:
            with pytest.raises(ProtocolError):
                follower_fetch_answer(bad)
            continue
        assert tuple(follower_fetch_answer(bad)) == expected, why


def test_mutated_answers_the_short_decoder_accepts_kio_reads_the_same() -> None:
    rng = random.Random(11)
    accepted = 0
    for _ in range(3000):
        frame = bytearray(_frame(_random_topics(rng, in_place=False, small=True)))
        if not frame:
            continue
        for _ in range(rng.choice([1, 2, 4])):
            frame[rng.randrange(len(frame))] = rng.randrange(256)
        if rng.random() < 0.2:
            del frame[rng.randrange(len(frame)) :]
        frame = bytes(frame)
        answer = decode_follower_fetch_response(frame)
        if answer is None:
            continue
        accepted += 1
        assert tuple(answer) == _fields(parse_response(1, 12, frame)[1])
    assert accepted > 100  # the mutations that keep the shape were read, and checked


# -- the leader's short path on a real cluster ----------------------------------------------


@pytest.fixture(scope="module")
def three(cluster_factory):
    return cluster_factory(3)


def _state(three, topic: str, partition: int) -> dict | None:
    zk = three.zk_client()
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    return json.loads(zk.get(path)[0]) if zk.exists(path) else None


def _follower_fetch(w, replica_id, session_id, epoch, parts: dict, version: int = 12) -> bytes:
    """A follower's Fetch; ``parts``: {(topic, partition): fetch offset}. The answer's
    frame, correlation id cut off."""
    topics: dict[str, list] = {}
    for (topic, p), offset in parts.items():
        topics.setdefault(topic, []).append(
            {
                "partition": p,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": 0,
                "partition_max_bytes": 1 << 20,
            }
        )
    body = {
        "replica_id": replica_id,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return w.request_frame(1, version, body)[4:]


def test_the_leaders_short_path_answers_with_the_general_paths_bytes(three):
    topic = f"ff-{uuid.uuid4().hex[:6]}"
    w = WireClient.for_bootstrap(three.bootstrap)
    assert w.create_topic(topic, 6, {}, rf=3).error_code == ErrorCode.none
    w.close()
    for p in range(6):
        wait_until(lambda p=p: len((_state(three, topic, p) or {}).get("isr", [])) == 3, what="ISR")
    leaders = {p: _state(three, topic, p)["leader"] for p in range(6)}
    leader = leaders[0]
    mine = [p for p in range(6) if leaders[p] == leader]
    other = next(p for p in range(6) if leaders[p] != leader)  # answered NOT_LEADER
    follower = next(b for b in _state(three, topic, 0)["isr"] if b != leader)
    w = WireClient("127.0.0.1", three.broker(leader).port)
    for p in mine:
        batch = build_batch(
            [(None, f"v{p}-{i}".encode(), [], int(time.time() * 1000)) for i in range(3)]
        )
        assert w.produce(topic, p, batch, acks=-1).error_code == ErrorCode.none
    # the session keeps its partitions in order, those that returned records moved last
    # (as Kafka): with the one that returns none first, the full fetch leaves the order
    # as the request gave it, so the incremental one is answered in the same order
    parts = {(topic, other): 0}
    parts.update({(topic, p): 0 for p in mine})
    general = _follower_fetch(w, follower, 0, 0, parts)  # a full fetch: the general path
    (sid,) = struct.unpack_from(">i", general, 7)
    assert sid != 0
    short = _follower_fetch(w, follower, sid, 1, parts)  # incremental: the short path
    assert short == general
    resp = parse_response(1, 12, struct.pack(">i", 0) + short)[1]
    answered = {p.partition_index: p for t in resp.responses for p in t.partitions}
    assert answered[other].error_code == ErrorCode.not_leader_or_follower
    assert all(answered[p].records for p in mine)
    # a session at the log ends: once heard, a round with nothing new is answered empty,
    # as the general encoder writes it
    at_end = {(topic, p): 3 for p in mine}
    first = _follower_fetch(w, follower, 0, 0, at_end)
    (sid,) = struct.unpack_from(">i", first, 7)
    empty = _follower_fetch(w, follower, sid, 1, {})
    assert empty == b"".join(encode_fetch_response(12, 0, [], session_id=sid))[8:]
    w.close()


def test_an_offset_out_of_range_is_answered_the_same_on_both_paths(three):
    topic = f"fo-{uuid.uuid4().hex[:6]}"
    w = WireClient.for_bootstrap(three.bootstrap)
    assert w.create_topic(topic, 1, {}, rf=3).error_code == ErrorCode.none
    w.close()
    wait_until(lambda: len((_state(three, topic, 0) or {}).get("isr", [])) == 3, what="ISR")
    state = _state(three, topic, 0)
    follower = next(b for b in state["isr"] if b != state["leader"])
    w = WireClient("127.0.0.1", three.broker(state["leader"]).port)
    parts = {(topic, 0): 999}
    general = _follower_fetch(w, follower, 0, 0, parts)
    (sid,) = struct.unpack_from(">i", general, 7)
    short = _follower_fetch(w, follower, sid, 1, parts)
    assert short == general
    resp = parse_response(1, 12, struct.pack(">i", 0) + short)[1]
    assert resp.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    # Fetch v11 takes the general path in a session too, and answers the same fields
    v11 = w.request(1, 11, {**_v11_body(follower, parts)})
    assert v11.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    w.close()


def _v11_body(replica_id: int, parts: dict) -> dict:
    (((topic, p), offset),) = parts.items()
    return {
        "replica_id": replica_id,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "log_start_offset": 0,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
