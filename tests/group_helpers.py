"""Helpers for tests/test_groups_*.py: topics, records, and group members in threads
that record which partitions they own, so a test can check that no partition is ever
owned by two members at once."""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode as E

from tests.wait_helpers import wait_until
from tests.wire import WireClient

# fast groups: no initial delay, short sessions (group.min.session.timeout.ms allows 1 s)
GROUP_BROKER = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "10",
}
FAST_CONSUMER = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int, rf: int = 1) -> None:
    """Create the topic and return once every broker's metadata has all its leaders:
    CreateTopics answers when the controller has written it, and a broker that has not
    had the controller's UpdateMetadata yet answers UNKNOWN_TOPIC_OR_PARTITION (to an
    OffsetCommit, say), which clients retry but raw-protocol tests would not."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(timeout=30)
    wait_until(
        lambda: all(_knows(address, name, partitions) for address in bootstrap.split(",")),
        what=f"every broker to know {name}",
    )


def _knows(address: str, topic: str, partitions: int) -> bool:
    from tests.wire import WireClient

    host, port = address.rsplit(":", 1)
    try:
        client = WireClient(host, int(port))
    except OSError:
        return True  # a broker that is down has nothing to answer for
    try:
        resp = client.request(
            3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
    finally:
        client.close()
    (t,) = resp.topics
    ready = [p for p in t.partitions if p.error_code == 0 and p.leader_id >= 0]
    return t.error_code == 0 and len(ready) == partitions


def topic_and_group(bootstrap: str, label: str, partitions: int, rf: int = 1) -> tuple[str, str]:
    """A new topic ``t-<label>-...`` and a fresh group name ``g-<label>-...`` for it."""
    topic, group = unique(f"t-{label}"), unique(f"g-{label}")
    create_topic(bootstrap, topic, partitions, rf)
    return topic, group


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (librdkafka's -1001 where there is none)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> set[bytes]:
    """``count`` records spread round robin over the partitions; returns the values."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for i in range(start, start + count):
        value = b"value-%d" % i
        producer.produce(topic, value=value, key=b"k%d" % i, partition=i % partitions)
        values.add(value)
    assert producer.flush(30) == 0
    return values


def read_partition(
    bootstrap: str, topic: str, partition: int, isolation: str = "read_uncommitted"
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of the partition, from its log start."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    c.assign([TopicPartition(topic, partition, low)])
    out, position = [], low
    while position < high:
        msg = c.poll(2.0)
        if msg is None:
            break
        if not msg.error():
            out.append((msg.offset(), msg.key(), msg.value()))
            position = msg.offset() + 1
    c.close()
    return out


class Ownership:
    """Which member owns which partition, with a record of any double ownership."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.assignments: dict[str, int] = defaultdict(int)  # number of on_assign calls

    def assign(self, member: str, partitions) -> None:
        with self.lock:
            self.assignments[member] += 1
            for p in partitions:
                current = self.owner.get(p)
                if current is not None and current != member:
                    self.violations.append(f"partition {p} given to {member}, owned by {current}")
                self.owner[p] = member

    def revoke(self, member: str, partitions) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p) == member:
                    del self.owner[p]

    def of(self, member: str) -> set[int]:
        with self.lock:
            return {p for p, m in self.owner.items() if m == member}


class ConfluentMember(threading.Thread):
    """A librdkafka consumer in a group, polling on its own thread."""

    def __init__(self, bootstrap, group, topic, name, ownership, **config) -> None:
        super().__init__(daemon=True, name=name)
        self.topic = topic
        self.ownership = ownership
        self.values: list[bytes] = []
        self.errors: list[KafkaError] = []
        self.fatal: KafkaError | None = None
        self.stop_flag = threading.Event()
        self.close_on_stop = True
        self.conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "error_cb": self._on_error,
            **FAST_CONSUMER,
            **config,
        }

    def _on_error(self, error: KafkaError) -> None:
        self.errors.append(error)
        if error.fatal() or error.code() == KafkaError._FATAL:
            self.fatal = error

    def _on_assign(self, consumer, partitions) -> None:
        self.ownership.assign(self.name, [tp.partition for tp in partitions])

    def _on_revoke(self, consumer, partitions) -> None:
        self.ownership.revoke(self.name, [tp.partition for tp in partitions])

    def run(self) -> None:
        consumer = Consumer(self.conf)
        consumer.subscribe(
            [self.topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_revoke,
        )
        try:
            while not self.stop_flag.is_set() and self.fatal is None:
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                if msg.error():
                    self._on_error(msg.error())
                    continue
                self.values.append(msg.value())
        finally:
            if self.close_on_stop:
                try:
                    consumer.close()
                except KafkaException:  # a fenced consumer cannot close cleanly
                    pass
            self.ownership.revoke(self.name, list(self.ownership.of(self.name)))

    def stop(self, close: bool = True) -> None:
        self.close_on_stop = close
        self.stop_flag.set()
        self.join(30)


def join_one_by_one(members, ownership: Ownership) -> None:
    """Start the members in turn, each once the one before owns partitions (every join
    rebalances the group)."""
    for m in members:
        m.start()
        wait_until(lambda m=m: ownership.of(m.name), what=f"{m.name} to own partitions")


def all_values(members) -> set[bytes]:
    out: set[bytes] = set()
    for m in members:
        out.update(m.values)
    return out


# -- group requests on the wire (tests.wire.WireClient) -------------------------------------
def find(wire: WireClient, group: str, version: int = 3):
    return wire.request(10, version, {"key": group, "key_type": 0})


def commit(wire, group, topic, offsets, member="", generation=-1, metadata="", instance=None):
    resp = wire.request(
        8,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": generation,
            "member_id": member,
            "group_instance_id": instance,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": o,
                            "committed_leader_epoch": -1,
                            "committed_metadata": metadata,
                        }
                        for p, o in offsets.items()
                    ],
                }
            ],
        },
    )
    return {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}


def fetched(wire, group, topic) -> dict[int, tuple[int, str]]:
    resp = wire.request(
        9,
        8,
        {
            "groups": [
                {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1, 2]}]}
            ],
            "require_stable": True,
        },
    )
    g = resp.groups[0]
    assert g.error_code == E.none
    return {
        p.partition_index: (p.committed_offset, p.metadata) for t in g.topics for p in t.partitions
    }
