"""The acks=all round trip on a real 3-broker cluster (RF 3, min.insync.replicas=2).

- followers parked in a fetch are woken by the leader's append: with
  replica.fetch.wait.max.ms far above the produce timeout, acks=all produces still
  complete (a follower that only came back at its max wait would time them out);
- acks=all produces pipelined on one connection are all appended, in arrival order,
  and answered in request order, also when other requests sit between them;
- the records read back are the bytes sent, at the offsets the responses gave;
- a partition a follower gets while its fetch to that leader is parked is fetched at
  once (not when the parked fetch returns, 25 s later);
- acks=all produces the ISR cannot confirm (followers hung) are answered
  REQUEST_TIMED_OUT at their own timeouts, in request order, and the records appended
  meanwhile are committed once the followers come back.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
from collections import deque

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)
from broker.protocol.records import build_batch, decode_records
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

SETTINGS = {
    # far above the 5 s produce timeout below: only the leader's wake-up makes it in time
    "replica.fetch.wait.max.ms": "25000",
    "replica.lag.time.max.ms": "30000",
}


@pytest.fixture(scope="module")
def three(cluster_factory):
    return cluster_factory(3, **SETTINGS)


def _topic(three, partitions: int, leader: int | None = None) -> tuple[str, dict[int, int]]:
    """A fresh RF 3 topic (one partition led by broker ``leader`` when given); returns
    it and each partition's leader's port once the ISR is full."""
    name = f"rt-{uuid.uuid4().hex[:6]}"
    w = WireClient.for_bootstrap(three.bootstrap)
    if leader is None:
        created = w.create_topic(name, partitions, {"min.insync.replicas": "2"}, rf=3)
    else:
        replicas = [leader] + [b for b in (1, 2, 3) if b != leader]
        topic = {"name": name, "num_partitions": -1, "replication_factor": -1}
        topic["assignments"] = [{"partition_index": 0, "broker_ids": replicas}]
        topic["configs"] = [{"name": "min.insync.replicas", "value": "2"}]
        body = {"topics": [topic], "timeout": 10000, "validate_only": False}
        created = w.request(19, 7, body).topics[0]
    assert created.error_code == ErrorCode.none, created.error_message
    w.close()
    zk = three.zk_client()
    leaders: dict[int, int] = {}
    deadline = time.time() + 60
    while len(leaders) < partitions and time.time() < deadline:
        for p in range(partitions):
            path = f"/brokers/topics/{name}/partitions/{p}/state"
            if zk.exists(path):
                state = json.loads(zk.get(path)[0])
                if len(state["isr"]) == 3 and state["leader"] >= 0:
                    leaders[p] = three.broker(state["leader"]).port
        time.sleep(0.1)
    assert len(leaders) == partitions, "the topic's partitions never got a full ISR"
    return name, leaders


def _batch(values: list[bytes]) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(None, v, [], now) for v in values])


def _produce_frame(
    correlation: int, topic: str, partition: int, records: bytes, timeout_ms: int = 5000
) -> bytes:
    body = {
        "acks": -1,
        "timeout": timeout_ms,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }
    return encode_request(
        RequestHeader(0, 9, correlation, "round-trip"), build(request_schema(0, 9), body)
    )


def _read_back(port: int, topic: str, partition: int, end: int) -> list[tuple[int, bytes]]:
    w = WireClient("127.0.0.1", port)
    out: list[tuple[int, bytes]] = []
    while not out or out[-1][0] < end - 1:
        p = w.fetch(topic, partition, out[-1][0] + 1 if out else 0)
        assert p.error_code == ErrorCode.none
        got = [(r.offset, r.value) for r in decode_records(bytes(p.records or b""))]
        assert got, f"no records at {out[-1][0] + 1 if out else 0} below HW {p.high_watermark}"
        out += [(o, v) for o, v in got if not out or o > out[-1][0]]
    w.close()
    return out


def test_acks_all_completes_while_followers_would_wait_long(three):
    topic, leaders = _topic(three, 1)
    w = WireClient("127.0.0.1", leaders[0])
    for i in range(20):
        r = w.produce(topic, 0, _batch([b"v%d" % i]), acks=-1)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, i)
    high = w.list_offset(topic, 0, -1)
    w.close()
    assert high.offset == 20  # the high watermark covers every acknowledged record
    assert _read_back(leaders[0], topic, 0, 20) == [(i, b"v%d" % i) for i in range(20)]


def test_pipelined_acks_all_produces_answer_in_order(three):
    topic, leaders = _topic(three, 2)
    port = leaders[0]
    parts = [p for p in (0, 1) if leaders[p] == port]  # what this broker leads of the two
    frames: list[bytes] = []
    expected: list[tuple[int, int]] = []  # (api key, partition) per correlation id
    sent: dict[int, list[bytes]] = {p: [] for p in parts}
    batches: dict[int, deque[int]] = {p: deque() for p in parts}
    for i in range(60):
        p = parts[i % len(parts)]
        values = [b"%d-%d-%d" % (p, i, k) for k in range(1 + i % 3)]
        sent[p] += values
        batches[p].append(len(values))
        expected.append((0, p))
        frames.append(_produce_frame(len(expected), topic, p, _batch(values)))
        if i % 20 == 10:  # another API between the produces: its answer must wait its turn
            expected.append((18, -1))
            header = RequestHeader(18, 3, len(expected), "round-trip")
            frames.append(encode_request(header, build(request_schema(18, 3), {})))
    w = WireClient("127.0.0.1", port)
    w.send_raw(b"".join(frames))  # all at once: the broker sees them pipelined
    next_offset = dict.fromkeys(parts, 0)
    for correlation, (api_key, partition) in enumerate(expected, start=1):
        frame = w.read_frame()
        assert struct.unpack_from(">i", frame)[0] == correlation, "a response out of order"
        if api_key == 18:
            continue
        _corr, resp = parse_response(0, 9, frame)
        (pr,) = resp.responses[0].partition_responses
        assert pr.index == partition
        assert pr.error_code == ErrorCode.none, pr.error_message
        assert pr.base_offset == next_offset[partition]  # appended in arrival order
        next_offset[partition] += batches[partition].popleft()
    w.close()
    for p in parts:
        assert next_offset[p] == len(sent[p])
        assert _read_back(port, topic, p, len(sent[p])) == list(enumerate(sent[p]))


def test_partition_added_while_the_followers_fetch_is_parked(three):
    """The followers of broker 1 have a fetch parked there (25 s max wait) when they
    get a new partition it leads: acks=all produces on it must not wait for that fetch
    (5 s produce timeout). They did, whenever the leader already had fetchers parked."""
    first, leaders = _topic(three, 1, leader=1)
    w = WireClient("127.0.0.1", leaders[0])
    assert w.produce(first, 0, _batch([b"first"]), acks=-1).error_code == ErrorCode.none
    w.close()
    time.sleep(1.0)  # not a bound: lets the followers' next fetches park at broker 1
    topic, leaders = _topic(three, 1, leader=1)
    w = WireClient("127.0.0.1", leaders[0])
    for i in range(5):
        r = w.produce(topic, 0, _batch([b"n%d" % i]), acks=-1)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, i), r.error_message
    w.close()
    assert _read_back(leaders[0], topic, 0, 5) == [(i, b"n%d" % i) for i in range(5)]


def test_acks_all_times_out_while_the_followers_hang(three):
    topic, leaders = _topic(three, 1, leader=1)
    followers = [three.broker(2), three.broker(3)]
    w = WireClient("127.0.0.1", leaders[0])
    timeouts = [900, 300, 600]  # answered in request order whatever the deadlines
    frames = [
        _produce_frame(i + 1, topic, 0, _batch([b"t%d" % i]), timeout_ms=ms)
        for i, ms in enumerate(timeouts)
    ]
    for b in followers:
        b.pause()
    try:
        w.send_raw(b"".join(frames))
        for correlation in range(1, len(frames) + 1):
            corr, resp = parse_response(0, 9, w.read_frame())
            assert corr == correlation
            (pr,) = resp.responses[0].partition_responses
            assert pr.error_code == ErrorCode.request_timed_out
    finally:
        for b in followers:
            b.resume()
    # appended though not acknowledged: committed once the followers fetch again
    r = w.produce(topic, 0, _batch([b"after"]), acks=-1)
    assert (r.error_code, r.base_offset) == (ErrorCode.none, len(timeouts))
    w.close()
    expected = [(i, b"t%d" % i) for i in range(len(timeouts))] + [(len(timeouts), b"after")]
    assert _read_back(leaders[0], topic, 0, len(timeouts) + 1) == expected
