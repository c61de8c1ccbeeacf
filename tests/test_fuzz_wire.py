"""Wire-level mutation at the socket: real clients' frames, mutated, on live connections.

The frames librdkafka (producer per codec, transactional producer, consumer group,
admin), kafka-python and aiokafka send are recorded through a proxy the broker
advertises; then tens of thousands of mutated copies (bit flips, truncations,
rewritten size fields, count fields set to extremes, api key/version swaps, splices of
two requests) go to the broker one at a time, each followed by an ApiVersions probe on
the same connection. The broker must answer the probe or close the connection (never
hang, never die); a topic written before the fuzz must hold exactly its records; and
a fresh client round trip must work after.

Requests that legitimately reshape the cluster when replayed (create/delete topics and
partitions, configs, reassignments, deleting records, the controller's own requests)
are not replayed: a mutated CreateTopics asking for 2**30 partitions is a limits
question (issue 14's other half), not a parser's.

``QUILL_WIRE_FUZZ_CASES`` sets how many mutated frames to send (20,000 by default);
bench/fuzz.py --wire runs more.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.records import build_batch, decode_records, scan_valid_prefix
from broker.server.apis import SUPPORTED
from tests.fuzz_helpers import RecordingProxy, record_all_clients
from tests.wire import WireClient

RECORDED_TOPIC = "wire-recorded"
SENTINEL_TOPIC = "wire-sentinel"
GROUP = "wire-fuzz-group"
CASES = int(os.environ.get("QUILL_WIRE_FUZZ_CASES", "20000"))
WORKERS = 4
PROBE_TIMEOUT = 5.0
NOT_REPLAYED = {4, 5, 6, 7, 19, 20, 21, 33, 37, 43, 44, 45, 49}
_API_VERSIONS_PROBE = struct.pack(">hhih", 18, 0, 0x7FFF_FFF0, 5) + b"probe"


@pytest.fixture(scope="module")
def recorded(cluster_factory):
    proxy = RecordingProxy()
    cluster = cluster_factory(1, **{"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    host, port = cluster.bootstrap.rsplit(":", 1)
    proxy.target = (host, int(port))
    w = WireClient.for_bootstrap(cluster.bootstrap)
    assert w.create_topic(RECORDED_TOPIC, 1).error_code == ErrorCode.none
    assert w.create_topic(SENTINEL_TOPIC, 2).error_code == ErrorCode.none
    for partition in (0, 1):
        batch = build_batch([(b"s%d" % i, b"sentinel-%d" % i, [], 1000 + i) for i in range(7)])
        assert w.produce(SENTINEL_TOPIC, partition, batch).error_code == ErrorCode.none
    w.close()
    record_all_clients(f"127.0.0.1:{proxy.port}", RECORDED_TOPIC, GROUP)
    if os.environ.get("QUILL_FUZZ_WRITE_CORPUS"):
        from tests.fuzz.corpus_builder import write_corpus

        cluster.brokers[0].stop()  # it writes its snapshots and checkpoints on the way out
        write_corpus(
            proxy.requests,
            proxy.responses,
            next(cluster.state_dir.glob("broker-1*/data")),
            Path(os.environ["QUILL_FUZZ_WRITE_CORPUS"]),
        )
        cluster.brokers[0].start()
    yield cluster, proxy
    proxy.close()


def _topic_records(bootstrap: str, topic: str, partition: int) -> list[tuple]:
    w = WireClient.for_bootstrap(bootstrap)
    try:
        data = w.fetch(topic, partition, 0).records or b""
    finally:
        w.close()
    _, headers = scan_valid_prefix(data)
    return [
        (r.offset, r.key, r.value)
        for h in headers
        for r in decode_records(data[h.position : h.position + h.size])
    ]


def test_issue_14_inputs_are_refused_and_the_broker_serves_on(recorded):
    """The two broker-killers found for issue 14, on the wire: a compressed batch whose
    raw snappy preamble claims 4 GiB, produced to a topic stored as gzip (so the broker
    decompresses it), is CORRUPT_MESSAGE; a 20-byte Metadata request declaring 2**31-1
    topics closes the connection. The broker lives and keeps answering."""
    import cramjam

    cluster, _proxy = recorded
    w = WireClient.for_bootstrap(cluster.bootstrap)
    assert w.create_topic("wire-gzip", 1, {"compression.type": "gzip"}).error_code == 0
    raw = bytes(cramjam.snappy.compress_raw(b"hello world " * 100))
    bomb_payload = (
        b"\xff\xff\xff\xff\x0f" + raw[next(i for i, b in enumerate(raw) if b < 0x80) + 1 :]
    )
    batch = bytearray(build_batch([(b"k", b"v" * 1200, [], 1000)]))
    batch[61:] = bomb_payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, 2)  # attributes: snappy
    import crc32c

    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    assert w.produce("wire-gzip", 0, bytes(batch)).error_code == ErrorCode.corrupt_message
    w.send_raw(
        _size_prefixed(struct.pack(">hhih", 3, 1, 1, 1) + b"c" + struct.pack(">i", 2**31 - 1))
    )
    assert w.is_closed_by_peer()
    w.close()
    w = WireClient.for_bootstrap(cluster.bootstrap)
    good = build_batch([(b"k", b"after", [], 1000)], compression=2)
    assert w.produce("wire-gzip", 0, good).error_code == ErrorCode.none
    assert [r[1:] for r in _topic_records(cluster.bootstrap, "wire-gzip", 0)] == [(b"k", b"after")]
    w.close()
    assert cluster.brokers[0].alive


def _handler_errors(log_path) -> dict[str, int]:
    """The last line of each 'unexpected error' traceback in the broker's log, counted."""
    counts: dict[str, int] = {}
    lines = Path(log_path).read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if "unexpected error serving" in line:
            j = i + 1
            while j < len(lines) and (lines[j].startswith((" ", "Traceback")) or not lines[j]):
                j += 1
            if j < len(lines):
                counts[lines[j][:160]] = counts.get(lines[j][:160], 0) + 1
    return counts


# -- mutations --------------------------------------------------------------------------------


def _size_prefixed(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


def _bit_flips(rng, frame, frames):
    buf = bytearray(frame)
    for _ in range(rng.randint(1, 8)):
        pos = rng.randrange(len(buf))
        buf[pos] ^= 1 << rng.randrange(8)
    return _size_prefixed(bytes(buf))


def _truncation(rng, frame, frames):
    return _size_prefixed(frame[: rng.randrange(len(frame))])


def _size_rewritten(rng, frame, frames):
    size = rng.choice([-1, -(2**31), 0, 7, len(frame) - 1, len(frame) + 1, 2**31 - 1, 200 << 20])
    return struct.pack(">i", size) + frame


def _count_extreme(rng, frame, frames):
    buf = bytearray(frame)
    if len(buf) > 12:
        pos = rng.randrange(8, len(buf) - 3)
        value = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00"])
        value = rng.choice([value, b"\xff\xff\xff\xff\x07", b"\x00"])  # varints too
        buf[pos : pos + len(value)] = value
    return _size_prefixed(bytes(buf))


def _api_swapped(rng, frame, frames):
    key = rng.choice([*SUPPORTED, rng.randrange(-5, 100)])
    lo, hi = SUPPORTED.get(key, ("", 0, 15))[1:]
    version = rng.choice([rng.randint(lo, hi), rng.randrange(-2, 20)])
    return _size_prefixed(struct.pack(">hh", key, version) + frame[4:])


def _splice(rng, frame, frames):
    other = rng.choice(frames)
    return _size_prefixed(frame[: rng.randrange(len(frame))] + other[rng.randrange(len(other)) :])


MUTATORS = [_bit_flips, _truncation, _size_rewritten, _count_extreme, _api_swapped, _splice]


# -- one worker: a live connection, a mutated frame, a probe ---------------------------------------


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answered = self.closed = self.timeouts = 0
        self.hung: dict[str, int] = {}  # "mutator api-key" of the timeouts

    def add(self, outcome: str) -> None:
        with self.lock:
            setattr(self, outcome, getattr(self, outcome) + 1)


def _probe_answered(sock: socket.socket) -> bool:
    """Read responses until the probe's; False if the broker closed the connection."""
    buf = bytearray()
    while True:
        while len(buf) < 4 or len(buf) - 4 < struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return False
            buf += chunk
        size = struct.unpack_from(">i", buf)[0]
        (corr,) = struct.unpack_from(">i", buf, 4)
        del buf[: 4 + size]
        if corr == 0x7FFF_FFF0:
            return True


def _worker(address, frames, seed: int, cases: int, stats: _Stats) -> None:
    rng = random.Random(seed)
    sock = None
    for _ in range(cases):
        if sock is None:
            sock = socket.create_connection(address, timeout=PROBE_TIMEOUT)
        frame = rng.choice(frames)
        mutator = rng.choice(MUTATORS)
        payload = mutator(rng, frame, frames)
        try:
            sock.sendall(payload + _size_prefixed(_API_VERSIONS_PROBE))
            if mutator is _size_rewritten:  # a frame may now wait for bytes never sent:
                sock.shutdown(socket.SHUT_WR)  # hang up, as a client would, and see it closed
            outcome = "answered" if _probe_answered(sock) else "closed"
        except TimeoutError:
            outcome = "timeouts"  # e.g. a size field promising more bytes: we hang up
        except OSError:
            outcome = "closed"
        stats.add(outcome)
        if outcome == "timeouts":
            what = f"{mutator.__name__} {struct.unpack_from('>h', payload, 4)[0]}"
            with stats.lock:
                stats.hung[what] = stats.hung.get(what, 0) + 1
        if outcome != "answered":
            sock.close()
            sock = None
    if sock is not None:
        sock.close()


def test_mutated_client_frames_never_kill_the_broker(recorded):
    cluster, proxy = recorded
    broker = cluster.brokers[0]
    frames = [f for key, _v, f in proxy.requests if key not in NOT_REPLAYED]
    keys = {key for key, _v, _f in proxy.requests}
    # every client library's core requests were recorded
    assert {0, 1, 3, 8, 9, 10, 11, 12, 14, 18, 22, 24, 26} <= keys, sorted(keys)
    before = {p: _topic_records(cluster.bootstrap, SENTINEL_TOPIC, p) for p in (0, 1)}
    assert [len(before[p]) for p in (0, 1)] == [7, 7]

    host, port = cluster.bootstrap.rsplit(":", 1)
    stats = _Stats()
    threads = [
        threading.Thread(
            target=_worker, args=((host, int(port)), frames, seed, CASES // WORKERS, stats)
        )
        for seed in range(WORKERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert broker.alive, broker.log_tail()
    # no handler failed on what the parser let through (it would close the connection
    # instead of answering with an error code)
    assert _handler_errors(broker.log_path) == {}
    assert stats.answered + stats.closed + stats.timeouts == WORKERS * (CASES // WORKERS)
    # each mutation is refused or answered at once; a wait (a mutated Fetch's max wait,
    # say) is the rare exception
    assert stats.answered > CASES // 10, stats.hung
    assert stats.closed > CASES // 10, stats.hung
    assert stats.timeouts <= CASES // 100, stats.hung
    print(
        f"wire fuzz: {stats.answered} answered, {stats.closed} closed, {stats.timeouts} hung: {stats.hung}"
    )

    # the topic written before the fuzz holds exactly its records
    after = {p: _topic_records(cluster.bootstrap, SENTINEL_TOPIC, p) for p in (0, 1)}
    assert after == before

    # a fresh client round trip works
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce(SENTINEL_TOPIC, key=b"after", value=b"the fuzz", partition=1)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "after-fuzz",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([__import__("confluent_kafka").TopicPartition(SENTINEL_TOPIC, 1, 7)])
    deadline = time.monotonic() + 60
    msg = None
    while msg is None and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is not None:
            msg = None
    consumer.close()
    assert msg is not None and (msg.offset(), msg.key(), msg.value()) == (7, b"after", b"the fuzz")
