"""Partial UpdateMetadata (issue 27): as Kafka's controller, each event sends brokers only
the partitions it changed; a deleted topic's partitions travel with the deletion
sentinel leader -2; a broker that (re)joins gets the full metadata. Brokers keep what an
UpdateMetadata does not name (Kafka's MetadataCache).

Broker 2 advertises a recording proxy, so the controller's requests to it (and every
other connection to it) pass through the proxy, which keeps the frames."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.protocol.messages import parse_request
from tests.fuzz_helpers import RecordingProxy
from tests.wait_helpers import wait_until
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

BASE, BASE_PARTITIONS = "um-base", 30
UPDATE_METADATA = 6


@pytest.fixture(scope="module")
def recorded(cluster_factory):
    proxy = RecordingProxy()

    def advertised(broker_id: int, port: int) -> str:
        if broker_id != 2:
            return f"PLAINTEXT://127.0.0.1:{port}"
        proxy.target = ("127.0.0.1", port)  # the proxy forwards to broker 2's listener
        return f"PLAINTEXT://127.0.0.1:{proxy.port}"

    cluster = cluster_factory(3, **{"advertised.listeners": advertised})
    _create(cluster, BASE, BASE_PARTITIONS)
    yield cluster, proxy
    proxy.close()


def _create(cluster, name: str, partitions: int, brokers=(1, 2, 3)) -> None:
    """Create ``name`` (RF 2); wait until ``brokers``' metadata shows it led."""
    admin = AdminClient({"bootstrap.servers": cluster.broker(1).address})
    admin.create_topics([NewTopic(name, partitions, 2)], request_timeout=60)[name].result(60)
    for broker in brokers:
        wait_until(
            lambda b=broker: _complete(cluster, b, name, partitions),
            timeout=60,
            what=f"broker {broker}'s metadata to show {name} led",
        )


def _metadata(cluster, broker_id: int) -> dict[str, dict[int, int]]:
    """{topic: {partition: leader}} as broker ``broker_id`` answers Metadata."""
    port = int(cluster.broker(broker_id).address.rsplit(":", 1)[1])
    wire = WireClient("127.0.0.1", port, timeout=30)
    try:
        resp = wire.request(3, 1, {"topics": None})
    finally:
        wire.close()
    return {
        t.name: {p.partition_index: p.leader_id for p in t.partitions}
        for t in resp.topics
        if t.error_code == 0
    }


def _complete(cluster, broker_id: int, name: str, partitions: int) -> bool:
    led = _metadata(cluster, broker_id).get(name, {})
    return len(led) == partitions and all(leader >= 0 for leader in led.values())


def _update_metadata_since(proxy, mark: int) -> list[dict[str, dict[int, int]]]:
    """The UpdateMetadata requests broker 2 received after ``mark``: {topic: {partition:
    leader}} each."""
    out = []
    for api_key, _version, frame in list(proxy.requests)[mark:]:
        if api_key == UPDATE_METADATA:
            _header, req = parse_request(frame)
            out.append(
                {
                    t.topic_name: {p.partition_index: p.leader for p in t.partition_states}
                    for t in req.topic_states
                }
            )
    return out


def test_an_event_sends_only_the_partitions_it_changed(recorded):
    cluster, proxy = recorded
    mark = len(proxy.requests)
    _create(cluster, "um-fresh", 3)
    sent = _update_metadata_since(proxy, mark)
    assert sent, "no UpdateMetadata reached broker 2"
    assert {name for body in sent for name in body} == {"um-fresh"}
    assert set().union(*(body["um-fresh"] for body in sent)) == {0, 1, 2}
    # the untouched topic stays whole in every broker's metadata
    for broker in (1, 2, 3):
        assert _complete(cluster, broker, BASE, BASE_PARTITIONS)


def test_a_deleted_topic_travels_with_leader_minus_two(recorded):
    cluster, proxy = recorded
    _create(cluster, "um-doomed", 2)
    mark = len(proxy.requests)
    admin = AdminClient({"bootstrap.servers": cluster.broker(1).address})
    admin.delete_topics(["um-doomed"], request_timeout=60)["um-doomed"].result(60)
    for broker in (1, 2, 3):
        wait_until(
            lambda b=broker: "um-doomed" not in _metadata(cluster, b),
            timeout=60,
            what=f"broker {broker} to forget um-doomed",
        )
    sent = _update_metadata_since(proxy, mark)
    doomed = [body["um-doomed"] for body in sent if "um-doomed" in body]
    assert doomed and doomed[-1] == {0: -2, 1: -2}
    assert all(BASE not in body for body in sent)
    for broker in (1, 2, 3):
        assert _complete(cluster, broker, BASE, BASE_PARTITIONS)


def test_a_restarted_broker_gets_the_full_metadata(recorded):
    cluster, proxy = recorded
    cluster.broker(2).stop(timeout=120)
    _create(cluster, "um-while-away", 4, brokers=(1, 3))
    mark = len(proxy.requests)
    cluster.broker(2).start()
    for name, partitions in ((BASE, BASE_PARTITIONS), ("um-while-away", 4)):
        wait_until(
            lambda n=name, c=partitions: _complete(cluster, 2, n, c),
            timeout=120,
            what=f"the restarted broker's metadata to show {name}",
        )
    first = _update_metadata_since(proxy, mark)[0]
    assert len(first[BASE]) == BASE_PARTITIONS and len(first["um-while-away"]) == 4
    assert "um-doomed" not in _metadata(cluster, 2)
