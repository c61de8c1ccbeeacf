"""Hostile and malformed input: Kafka's error code or a closed connection, the log
unchanged, and the broker still serving everyone else."""

from __future__ import annotations

import os
import struct
import time

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.records import build_batch
from tests.wire import WireClient

TOPIC = "bad-input"


@pytest.fixture(scope="module")
def broker(cluster_factory):
    c = cluster_factory(1, **{"message.max.bytes": "20000"})
    w = WireClient.for_bootstrap(c.bootstrap)
    assert w.create_topic(TOPIC, 1).error_code == ErrorCode.none
    w.close()
    return c


def _batch(n: int = 3, **kw) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(build_batch([(b"k%d" % i, b"v%d" % i, [], now) for i in range(n)], **kw))


def _leo(w: WireClient) -> int:
    return w.list_offset(TOPIC, 0, -1).offset


@pytest.fixture
def wire(broker):
    w = WireClient.for_bootstrap(broker.bootstrap)
    yield w
    w.close()


def test_good_batch_is_appended(wire):
    before = _leo(wire)
    r = wire.produce(TOPIC, 0, bytes(_batch(3)))
    assert r.error_code == ErrorCode.none and r.base_offset == before
    assert _leo(wire) == before + 3


@pytest.mark.parametrize(
    "name,mutate,code",
    [
        ("flipped crc byte", lambda b: b.__setitem__(40, b[40] ^ 0xFF), ErrorCode.corrupt_message),
        (
            "non-zero base offset",
            lambda b: struct.pack_into(">q", b, 0, 5),
            ErrorCode.invalid_record,
        ),
        ("wrong record count", None, ErrorCode.invalid_record),
        ("control batch", None, ErrorCode.invalid_record),
        ("oversize batch", None, ErrorCode.message_too_large),
        ("truncated batch", lambda b: b.__delitem__(slice(-5, None)), ErrorCode.corrupt_message),
    ],
)
def test_bad_batches_get_kafka_error_and_log_is_unchanged(wire, name, mutate, code):
    if name == "wrong record count":
        batch = bytearray(build_batch([(b"k", b"v", [], 1)] * 3, last_offset_delta=5))
    elif name == "control batch":
        batch = bytearray(
            build_batch(
                [(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [], 1)], is_control=True
            )
        )
    elif name == "oversize batch":
        batch = bytearray(build_batch([(None, os.urandom(30000), [], 1)]))
    else:
        batch = _batch(3)
        mutate(batch)
    before = _leo(wire)
    r = wire.produce(TOPIC, 0, bytes(batch))
    assert r.error_code == code, name
    assert _leo(wire) == before


def test_clients_cannot_append_to_internal_topics(wire):
    """As Kafka: __consumer_offsets is written by the group coordinator only."""
    r = wire.request(10, 4, {"key_type": 0, "coordinator_keys": ["bad-input-group"]})
    assert r.coordinators[0].error_code in (ErrorCode.none, ErrorCode.coordinator_not_available)
    for _ in range(100):  # the offsets topic is created by that first FindCoordinator
        if wire.list_offset("__consumer_offsets", 0, -1).error_code == ErrorCode.none:
            break
        time.sleep(0.1)
    before = wire.list_offset("__consumer_offsets", 0, -1)
    assert before.error_code == ErrorCode.none
    r = wire.produce("__consumer_offsets", 0, bytes(_batch(2)))
    assert r.error_code == ErrorCode.invalid_topic_exception
    assert wire.list_offset("__consumer_offsets", 0, -1).offset == before.offset
    assert _leo(wire) >= 0  # and the broker serves everyone else


def test_produce_to_unknown_partition(wire):
    r = wire.produce(TOPIC, 7, bytes(_batch(1)))
    assert r.error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(
            b"\x7f\xff" + os.urandom(62), id="random bytes"
        ),  # sizes a frame past any limit
        pytest.param(struct.pack(">i", 2_000_000_000) + b"x" * 16, id="absurd size"),
        pytest.param(struct.pack(">i", -5), id="negative size"),
        pytest.param(struct.pack(">ihhih", 10, 9999, 0, 1, -1), id="unknown api key"),
        pytest.param(struct.pack(">ihhih", 10, 3, 99, 1, -1), id="unknown api version"),
        pytest.param(
            struct.pack(">ihhi", 28, 3, 12, 1) + b"\xff" * 20, id="body that does not parse"
        ),
    ],
)
def test_garbage_closes_only_that_connection(broker, payload):
    bad = WireClient.for_bootstrap(broker.bootstrap)
    good = WireClient.for_bootstrap(broker.bootstrap)
    try:
        bad.send_raw(payload)
        assert bad.is_closed_by_peer(), "the broker kept a connection that sent garbage"
        assert _leo(good) >= 0  # the other connection is still served
        r = good.produce(TOPIC, 0, bytes(_batch(1)))
        assert r.error_code == ErrorCode.none
    finally:
        bad.close()
        good.close()


def test_truncated_frame_then_disconnect_leaves_broker_serving(broker):
    bad = WireClient.for_bootstrap(broker.bootstrap)
    bad.send_raw(struct.pack(">i", 500) + b"\x00" * 100)
    bad.close()
    good = WireClient.for_bootstrap(broker.bootstrap)
    try:
        assert good.produce(TOPIC, 0, bytes(_batch(1))).error_code == ErrorCode.none
    finally:
        good.close()


def test_api_versions_with_unsupported_version_answers_in_v0(broker):
    w = WireClient.for_bootstrap(broker.bootstrap)
    try:
        w.send_raw(struct.pack(">ihhih", 10, 18, 99, 42, -1))
        frame = w.read_frame()
        corr, err, count = struct.unpack_from(">ihi", frame)
        assert corr == 42 and err == ErrorCode.unsupported_version and count > 10
    finally:
        w.close()


def test_zstd_needs_produce_v7(wire):
    batch = bytes(build_batch([(b"k", b"v", [], int(time.time() * 1000))], compression=4))
    before = _leo(wire)
    assert (
        wire.produce(TOPIC, 0, batch, version=6).error_code
        == ErrorCode.unsupported_compression_type
    )
    assert _leo(wire) == before
    assert wire.produce(TOPIC, 0, batch, version=7).error_code == ErrorCode.none
    assert _leo(wire) == before + 1
