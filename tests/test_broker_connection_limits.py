"""Connection limits as Kafka has them: idle connections closed, per-address and
broker-wide connection counts, and clients that write or read slowly holding bounded
memory without delaying anyone else. Every check is on what the broker answered."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from kio.schema.errors import ErrorCode

from broker.protocol.messages import RequestHeader, build, encode_request, request_schema
from broker.protocol.records import build_batch
from tests.wire import WireClient

TOPIC = "limits"
LIMITED_IP = "127.0.0.2"  # loopback aliases: Linux routes all of 127/8 to lo
HELD = 1000


def _api_versions_frame(correlation: int = 1) -> bytes:
    req = build(request_schema(18, 0), {})
    return encode_request(RequestHeader(18, 0, correlation, "limits"), req)


def _connect(address: str, source: str | None = None, timeout: float = 30.0) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection(
        (host, int(port)), timeout=timeout, source_address=(source, 0) if source else None
    )


def _round_trip(sock: socket.socket, correlation: int = 1) -> int:
    """ApiVersions; returns the correlation id the broker answered with."""
    sock.sendall(_api_versions_frame(correlation))
    size = struct.unpack(">i", _read_exact(sock, 4))[0]
    body = _read_exact(sock, size)
    return struct.unpack(">i", body[:4])[0]


def _read_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return bytes(out)


def _closed_by_broker(sock: socket.socket, within_s: float = 60.0) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _batch(n: int, value_size: int) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(b"k%d" % i, b"v" * value_size, [], now) for i in range(n)])


@pytest.fixture(scope="module")
def idle_broker(cluster_factory):
    """Short idle limit; 127.0.0.2 may hold two connections."""
    return cluster_factory(
        1,
        **{
            "connections.max.idle.ms": "1500",
            "max.connections.per.ip.overrides": f"{LIMITED_IP}:2",
            "socket.request.max.bytes": "100000",
        },
    )


@pytest.fixture(scope="module")
def busy_broker(cluster_factory):
    c = cluster_factory(
        1,
        **{"max.connections": str(HELD + 60), "queued.max.request.bytes": str(4 * 1024 * 1024)},
    )
    w = WireClient.for_bootstrap(c.bootstrap)
    assert w.create_topic(TOPIC, 1).error_code == ErrorCode.none
    w.close()
    return c


def test_idle_connection_is_closed_and_busy_one_is_not(idle_broker):
    idle = _connect(idle_broker.bootstrap)
    busy = _connect(idle_broker.bootstrap)
    assert _round_trip(idle, 1) == 1
    # the busy one sends a request every 0.3 s, well inside the 1.5 s idle limit
    for i in range(2, 12):
        assert _round_trip(busy, i) == i
        time.sleep(0.3)
    assert _closed_by_broker(idle)
    assert _round_trip(busy, 99) == 99
    busy.close()


def test_request_over_socket_request_max_bytes_closes_the_connection(idle_broker):
    over = _connect(idle_broker.bootstrap)
    over.sendall(struct.pack(">i", 100_001) + b"\0" * 1000)
    assert _closed_by_broker(over)
    fine = _connect(idle_broker.bootstrap)
    assert _round_trip(fine, 5) == 5
    fine.close()
    assert "outside [8, socket.request.max.bytes=100000]" in idle_broker.broker(1).log_tail(200)


def test_per_ip_override_refuses_the_third_connection(idle_broker):
    first = _connect(idle_broker.bootstrap, LIMITED_IP)
    second = _connect(idle_broker.bootstrap, LIMITED_IP)
    assert _round_trip(first, 1) == 1 and _round_trip(second, 2) == 2
    third = _connect(idle_broker.bootstrap, LIMITED_IP)
    assert _closed_by_broker(third)
    # another address is not limited by 127.0.0.2's count
    other = _connect(idle_broker.bootstrap, "127.0.0.1")
    assert _round_trip(other, 3) == 3
    # a slot freed is a slot the address may use again
    first.close()
    deadline = time.monotonic() + 60
    while True:
        again = _connect(idle_broker.bootstrap, LIMITED_IP)
        try:
            assert _round_trip(again, 4) == 4
            break
        except (ConnectionError, OSError):
            again.close()
            assert time.monotonic() < deadline, "the freed slot was never given back"
            time.sleep(0.2)
    for s in (second, again, other):
        s.close()


def test_slow_writer_does_not_delay_others(busy_broker):
    """A request sent a byte at a time is answered once whole; meanwhile another
    client's produce requests are all answered."""
    slow = _connect(busy_broker.bootstrap)
    frame = _api_versions_frame(7)
    fast = WireClient.for_bootstrap(busy_broker.bootstrap)
    answered = 0
    for i, byte in enumerate(frame):
        slow.sendall(bytes([byte]))
        if i % 4 == 0:
            r = fast.produce(TOPIC, 0, _batch(2, 10))
            assert r.error_code == ErrorCode.none
            answered += 1
    assert answered == (len(frame) + 3) // 4
    size = struct.unpack(">i", _read_exact(slow, 4))[0]
    assert struct.unpack(">i", _read_exact(slow, size)[:4])[0] == 7
    slow.close()
    fast.close()


def test_half_sent_requests_hold_only_what_was_sent(busy_broker):
    """Fifty clients announce 90 MB requests and send 64 KB of each: the broker holds
    what arrived, not what was announced, and serves others meanwhile."""
    pid = busy_broker.broker(1).pid
    before = _rss_bytes(pid)
    stalled = []
    for _ in range(50):
        s = _connect(busy_broker.bootstrap)
        s.sendall(struct.pack(">i", 90 * 1024 * 1024) + b"\0" * 65536)
        stalled.append(s)
    w = WireClient.for_bootstrap(busy_broker.bootstrap)
    for _ in range(5):
        assert w.produce(TOPIC, 0, _batch(5, 100)).error_code == ErrorCode.none
    assert _rss_bytes(pid) - before < 64 * 1024 * 1024
    for s in stalled:
        s.close()
    w.close()


def test_request_memory_pool_mutes_readers_until_memory_comes_back(busy_broker):
    """queued.max.request.bytes=4 MB: while one client holds 4.5 MB of a request being
    read, another client's next request is not read; once the first goes, it is."""
    big = _connect(busy_broker.bootstrap)
    big.sendall(struct.pack(">i", 5 * 1024 * 1024) + b"\0" * (4608 * 1024))
    other = _connect(busy_broker.bootstrap, timeout=3.0)
    # answered until the broker has read enough of the big one to spend the pool; then
    # muted (the kernel holds the rest of the big one until the broker reads it)
    pending = None
    for correlation in range(1, 200):
        try:
            assert _round_trip(other, correlation) == correlation
        except TimeoutError:
            pending = correlation
            break
    assert pending is not None, "never muted although the pool was spent"
    big.close()
    other.settimeout(60.0)
    size = struct.unpack(">i", _read_exact(other, 4))[0]
    assert struct.unpack(">i", _read_exact(other, size)[:4])[0] == pending
    assert _round_trip(other, 999) == 999
    other.close()


def test_reader_that_never_reads_costs_bounded_memory(busy_broker):
    """A client sends fetch after fetch of 1 MB and reads nothing: the broker stops
    reading from it (its sends block) and its memory stays bounded, while another
    client round-trips."""
    w = WireClient.for_bootstrap(busy_broker.bootstrap)
    for _ in range(8):
        assert w.produce(TOPIC, 0, _batch(16, 8000)).error_code == ErrorCode.none
    pid = busy_broker.broker(1).pid
    before = _rss_bytes(pid)
    stuck = WireClient.for_bootstrap(busy_broker.bootstrap)
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 2 * 1024 * 1024,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 2 * 1024 * 1024}
                ],
            }
        ],
    }
    req = build(request_schema(1, 4), body)
    frame = encode_request(RequestHeader(1, 4, 1, "stuck"), req)
    stuck.sock.settimeout(5.0)
    sent = 0
    with pytest.raises(TimeoutError):
        while sent < 100_000:  # 100,000 x 1 MB if nothing pushed back
            stuck.sock.sendall(frame)
            sent += 1
    assert sent < 100_000
    for _ in range(5):
        assert w.produce(TOPIC, 0, _batch(2, 10)).error_code == ErrorCode.none
    assert _rss_bytes(pid) - before < 128 * 1024 * 1024
    stuck.close()
    w.close()


def test_thousand_connections_held_while_producing_and_consuming(busy_broker):
    held = []
    try:
        for i in range(HELD):
            s = _connect(busy_broker.bootstrap)
            held.append(s)
            assert _round_trip(s, i) == i
        topic = f"held-{uuid.uuid4().hex[:6]}"
        w = WireClient.for_bootstrap(busy_broker.bootstrap)
        assert w.create_topic(topic, 2).error_code == ErrorCode.none
        w.close()
        n = 5000
        producer = Producer({"bootstrap.servers": busy_broker.bootstrap, "linger.ms": 5})
        delivered = []
        for i in range(n):
            producer.produce(
                topic, key=b"%d" % i, value=b"value-%d" % i, on_delivery=_collect(delivered)
            )
            producer.poll(0)
        assert producer.flush(120) == 0
        assert len(delivered) == n and all(err is None for err in delivered)
        consumer = Consumer(
            {
                "bootstrap.servers": busy_broker.bootstrap,
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        seen = set()
        deadline = time.monotonic() + 180
        while len(seen) < n and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
        consumer.close()
        assert seen == {b"value-%d" % i for i in range(n)}
        # every held connection is still open and answers
        for i, s in enumerate(held):
            assert _round_trip(s, HELD + i) == HELD + i
    finally:
        for s in held:
            s.close()


def test_max_connections_makes_new_ones_wait_for_a_slot(busy_broker):
    """max.connections=1060: connections past it wait in the backlog unanswered, and
    are served once a slot frees (Kafka's acceptor waits, it does not refuse)."""
    held = []
    pending = None
    try:
        for i in range(HELD + 100):
            s = _connect(busy_broker.bootstrap, timeout=3.0)
            held.append(s)
            try:
                _round_trip(s, i)
            except TimeoutError:
                pending = held.pop()
                break
        assert pending is not None, "more than max.connections were served"
        assert HELD <= len(held) < HELD + 60
        held.pop(0).close()
        pending.settimeout(60)
        size = struct.unpack(">i", _read_exact(pending, 4))[0]
        assert struct.unpack(">i", _read_exact(pending, size)[:4])[0] == len(held) + 1
    finally:
        for s in held:
            s.close()
        if pending is not None:
            pending.close()


def _collect(into: list):
    def on_delivery(err, _msg):
        into.append(err)

    return on_delivery
