"""Fetch from follower (KIP-392) on real brokers in racks a, b and c (brokers 1, 2, 3).

- on the wire: a leader with replica.selector.class = RackAwareReplicaSelector answers
  a consumer's Fetch (v11+) from rack b with preferred_read_replica 2 and no records;
  from its own rack, with no rack, or from a rack no replica is in, with records; a
  follower serves a consumer's v11+ fetch up to its high watermark, refuses an older
  version (NOT_LEADER_OR_FOLLOWER) and an offset past its log end (OFFSET_OUT_OF_RANGE);
  ListOffsets stays with the leader;
- a real consumer (confluent-kafka) with client.rack=b reads every record once, in
  order, and the bytes come from broker 2 (the brokers' own BytesOut counters); one
  without client.rack reads from the leader;
- when the same-rack follower stops, the leader stops pointing there and the consumer
  goes on from the leader with nothing lost;
- a cluster without replica.selector.class never redirects.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from broker.protocol.records import decode_records
from console.monitor.brokers import figures, parse
from console.views.topics import consumer_reads
from tests.metrics_helpers import scrape_text
from tests.metrics_helpers import value as metric_value
from tests.wait_helpers import wait_until
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
RECORDS = 2000


def _rack(broker_id: int, _port: int) -> str:
    return "abc"[broker_id - 1]


@pytest.fixture(scope="module")
def racks(cluster_factory):
    return cluster_factory(
        3,
        **{
            "broker.rack": _rack,
            "replica.selector.class": RACK_AWARE,
            "quill.metrics.port": "free",
            "replica.lag.time.max.ms": "5000",
        },
    )


_ZK: dict[int, object] = {}  # one ZooKeeper client per cluster, not one per look


def _state(cluster, topic: str) -> dict:
    zk = _ZK.get(id(cluster))
    if zk is None:
        zk = _ZK[id(cluster)] = cluster.zk_client()
    path = f"/brokers/topics/{topic}/partitions/0/state"
    return json.loads(zk.get(path)[0]) if zk.exists(path) else {}


def _isr(cluster, topic: str) -> list[int]:
    return _state(cluster, topic).get("isr", [])


def _topic(cluster, replicas: list[int]) -> str:
    """A one-partition topic on ``replicas`` (the first leads), all of them in sync."""
    name = f"ffr-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, replica_assignment=[replicas])])[name].result(30)
    wait_until(lambda: sorted(_isr(cluster, name)) == sorted(replicas), what="full ISR")
    assert _state(cluster, name)["leader"] == replicas[0]
    return name


def _produce(cluster, topic: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, value=b"record-%06d-" % i + b"x" * 80)
    assert p.flush(60) == 0


@contextmanager
def _reading(cluster, topic: str, rack: str | None) -> Iterator[Consumer]:
    """A consumer in ``rack`` (its client.rack; None: unset) subscribed to ``topic``."""
    conf = {
        "bootstrap.servers": cluster.bootstrap,
        "group.id": f"g-{uuid.uuid4().hex[:6]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
    }
    if rack is not None:
        conf["client.rack"] = rack
    consumer = Consumer(conf)
    try:
        consumer.subscribe([topic])
        yield consumer
    finally:
        consumer.close()


def _consume(consumer: Consumer, count: int, timeout: float = 90.0) -> list[bytes]:
    got: list[bytes] = []

    def more() -> bool:
        for msg in consumer.consume(500, 1.0):
            assert msg.error() is None, msg.error()
            got.append(msg.value())
        return len(got) >= count

    wait_until(more, timeout=timeout, interval=0, what=f"{count} records")
    return got


def _expected(start: int, count: int) -> list[bytes]:
    return [b"record-%06d-" % i + b"x" * 80 for i in range(start, start + count)]


def _bytes_out(cluster, topic: str) -> dict[int, float]:
    """Each running broker's BytesOut counter for ``topic`` (consumer fetches only)."""
    return {
        b.id: metric_value(b.metrics_port, BYTES_OUT, topic=topic)
        for b in cluster.brokers
        if b.alive()
    }


def _values(records, start: int = 0) -> list[bytes]:
    """The values from offset ``start`` on (a fetch returns whole batches)."""
    if not records:
        return []
    return [r.value for r in decode_records(bytes(records)) if r.offset >= start]


def test_leader_names_the_same_rack_replica_on_the_wire(racks):
    topic = _topic(racks, [1, 2, 3])
    _produce(racks, topic, 0, 10)
    leader = WireClient.for_bootstrap(racks.broker(1).address)
    try:
        redirected = leader.fetch(topic, 0, 0, rack_id="b")
        assert redirected.error_code == ErrorCode.none
        assert redirected.preferred_read_replica == 2
        assert _values(redirected.records) == []  # as Kafka: no read when redirecting
        assert redirected.high_watermark == 10
        assert leader.fetch(topic, 0, 0, rack_id="c").preferred_read_replica == 3
        assert leader.fetch(topic, 0, 0, rack_id="b", version=11).preferred_read_replica == 2
        for rack in ("a", "", "elsewhere"):  # the leader's own rack, none, no replica there
            here = leader.fetch(topic, 0, 0, rack_id=rack)
            assert here.preferred_read_replica == -1, rack
            assert _values(here.records) == _expected(0, 10)
        old = leader.fetch(topic, 0, 0, version=10)  # no rack_id before v11
        assert _values(old.records) == _expected(0, 10)
    finally:
        leader.close()


def test_follower_serves_consumers_up_to_its_high_watermark(racks):
    topic = _topic(racks, [1, 2, 3])
    _produce(racks, topic, 0, 10)
    follower = WireClient.for_bootstrap(racks.broker(2).address)
    try:
        wait_until(lambda: follower.fetch(topic, 0, 0, rack_id="b").high_watermark == 10)
        served = follower.fetch(topic, 0, 0, rack_id="b")
        assert served.error_code == ErrorCode.none
        assert served.preferred_read_replica == -1  # only a leader points elsewhere
        assert _values(served.records) == _expected(0, 10)
        assert _values(follower.fetch(topic, 0, 7).records, 7) == _expected(7, 3)
        at_end = follower.fetch(topic, 0, 10)
        assert (at_end.error_code, _values(at_end.records)) == (ErrorCode.none, [])
        past = follower.fetch(topic, 0, 11)
        assert past.error_code == ErrorCode.offset_out_of_range
        old = follower.fetch(topic, 0, 0, version=10)  # before KIP-392: the leader only
        assert old.error_code == ErrorCode.not_leader_or_follower
        listed = follower.list_offset(topic, 0, -1)  # ListOffsets stays with the leader
        assert listed.error_code == ErrorCode.not_leader_or_follower
    finally:
        follower.close()


def test_consumer_in_rack_b_reads_from_the_rack_b_follower(racks):
    topic = _topic(racks, [1, 2, 3])
    _produce(racks, topic, 0, RECORDS)
    with _reading(racks, topic, "b") as consumer:
        assert _consume(consumer, RECORDS) == _expected(0, RECORDS)
        _produce(racks, topic, RECORDS, 100)  # and what comes after, too
        assert _consume(consumer, 100) == _expected(RECORDS, 100)
    out = _bytes_out(racks, topic)
    assert out[2] >= RECORDS * 90, out  # every record's bytes, at least once
    assert out[1] == 0 and out[3] == 0, out  # the leader only ever redirected


def test_console_reads_the_follower_serving_rack_b(racks):
    """The console's monitor parses each broker's /metrics; the topic page's "consumer
    reads by broker" then names broker 2, a follower, as the one serving the topic."""
    topic = _topic(racks, [1, 2, 3])
    _produce(racks, topic, 0, 200)
    with _reading(racks, topic, "b") as consumer:
        assert _consume(consumer, 200) == _expected(0, 200)
    readings = {b.id: figures(None, parse(scrape_text(b.metrics_port), 0.0)) for b in racks.brokers}
    partitions = [{"partition": 0, "leader": 1, "replicas": [1, 2, 3]}]
    rows = consumer_reads(topic, partitions, readings)
    assert [(r["broker"], r["leads"], r["follows"]) for r in rows] == [(2, [], [0])]
    assert rows[0]["total"] >= 200 * 90


def test_consumer_without_rack_reads_from_the_leader(racks):
    topic = _topic(racks, [1, 2, 3])
    _produce(racks, topic, 0, 500)
    with _reading(racks, topic, None) as consumer:
        assert _consume(consumer, 500) == _expected(0, 500)
    out = _bytes_out(racks, topic)
    assert out[1] >= 500 * 90 and out[2] == 0 and out[3] == 0, out


def test_stopped_follower_consumer_goes_on_from_the_leader(racks):
    topic = _topic(racks, [1, 2, 3])
    _produce(racks, topic, 0, 500)
    leader = WireClient.for_bootstrap(racks.broker(1).address)
    try:
        with _reading(racks, topic, "c") as consumer:
            assert _consume(consumer, 500) == _expected(0, 500)
            assert _bytes_out(racks, topic)[3] >= 500 * 90
            racks.broker(3).stop()
            # out of the ISR (controlled shutdown), not alive: the leader keeps the reads
            wait_until(lambda: leader.fetch(topic, 0, 0, rack_id="c").preferred_read_replica == -1)
            _produce(racks, topic, 500, 500)
            assert _consume(consumer, 500) == _expected(500, 500)
            assert _bytes_out(racks, topic)[1] >= 500 * 90
    finally:
        leader.close()
        racks.broker(3).start()


@pytest.fixture(scope="module")
def no_selector(cluster_factory):
    return cluster_factory(2, **{"broker.rack": _rack, "quill.metrics.port": "free"})


def test_without_a_selector_the_leader_serves_every_rack(no_selector):
    topic = _topic(no_selector, [1, 2])
    _produce(no_selector, topic, 0, 10)
    leader = WireClient.for_bootstrap(no_selector.broker(1).address)
    try:
        served = leader.fetch(topic, 0, 0, rack_id="b")
        assert served.preferred_read_replica == -1
        assert _values(served.records) == _expected(0, 10)
    finally:
        leader.close()
    with _reading(no_selector, topic, "b") as consumer:
        assert _consume(consumer, 10) == _expected(0, 10)
    out = _bytes_out(no_selector, topic)
    assert out[1] >= 10 * 90 and out[2] == 0, out
