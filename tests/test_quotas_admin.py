"""DescribeClientQuotas / AlterClientQuotas on the wire, over the ZooKeeper znodes, and
KIP-219 on the wire: a produce over its quota answers with throttle_time_ms, then the
connection is muted for that long."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from broker.protocol.errors import ErrorCode
from broker.protocol.records import build_batch
from broker.quota.manager import DEFAULT, entity_path
from broker.zk.znodes import ConfigEntityZNode
from tests.wait_helpers import wait_log

from .wire import WireClient


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1, **{"message.max.bytes": str(2 * 1024 * 1024)})


@pytest.fixture
def wire(broker):
    w = WireClient.for_bootstrap(broker.bootstrap)
    yield w
    w.close()


def _alter(wire, entity, ops, validate_only=False):
    resp = wire.request(
        49,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops],
                }
            ],
            "validate_only": validate_only,
        },
    )
    entry = resp.entries[0]
    return entry.error_code, entry.error_message


def _describe(wire, components, strict=False):
    resp = wire.request(
        48,
        1,
        {
            "components": [
                {"entity_type": t, "match_type": m, "match": n} for t, m, n in components
            ],
            "strict": strict,
        },
    )
    if resp.error_code != ErrorCode.none:
        return resp.error_code, resp.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


def test_alter_then_describe_round_trips_through_zookeeper(broker, wire):
    client = f"app-{uuid.uuid4().hex[:6]}"
    assert _alter(wire, [("client-id", client)], [("producer_byte_rate", 50000.0)]) == (0, None)
    assert _alter(
        wire, [("user", "alice"), ("client-id", client)], [("consumer_byte_rate", 7000.0)]
    ) == (0, None)
    assert _alter(wire, [("client-id", None)], [("request_percentage", 12.5)]) == (0, None)
    zk = broker.zk_client()
    data, _ = zk.get(f"/config/clients/{client}")
    assert ConfigEntityZNode.decode(data) == {"producer_byte_rate": "50000"}
    data, _ = zk.get(f"/config/users/alice/clients/{client}")
    assert ConfigEntityZNode.decode(data) == {"consumer_byte_rate": "7000"}
    notices = [zk.get(f"/config/changes/{c}")[0] for c in zk.get_children("/config/changes")]
    assert b'{"version":2,"entity_path":"clients/<default>"}' in notices

    got = _describe(wire, [("client-id", 0, client)])
    assert got == {
        (("client-id", client),): {"producer_byte_rate": 50000.0},
        (("user", "alice"), ("client-id", client)): {"consumer_byte_rate": 7000.0},
    }
    assert _describe(wire, [("client-id", 0, client)], strict=True) == {
        (("client-id", client),): {"producer_byte_rate": 50000.0}
    }
    assert _describe(wire, [("client-id", 1, None)], strict=True) == {
        (("client-id", None),): {"request_percentage": 12.5}
    }
    both = _describe(wire, [("user", 2, None), ("client-id", 2, None)], strict=True)
    assert both == {(("user", "alice"), ("client-id", client)): {"consumer_byte_rate": 7000.0}}
    wait_log(broker, f"quotas of clients/{client} are now {{'producer_byte_rate': 50000.0}}")

    assert _alter(wire, [("client-id", client)], [("producer_byte_rate", None)]) == (0, None)
    assert _alter(wire, [("client-id", None)], [("request_percentage", None)]) == (0, None)
    assert _describe(wire, [("client-id", 0, client)], strict=True) == {}
    wait_log(broker, f"quotas of clients/{client} are now unset")


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([("client-id", "x")], [("producer_byte_rate", -1.0)], "must be greater than 0"),
        ([("client-id", "x")], [("producer_byte_rate", 1.5)], "must be a LONG value"),
        ([("client-id", "x")], [("no_such_quota", 1.0)], "Invalid configuration key"),
        ([], [("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
        ([("client-id", "")], [("producer_byte_rate", 1.0)], "Empty client-id not supported"),
        ([("group", "g")], [("producer_byte_rate", 1.0)], "Unhandled client quota entity"),
    ],
)
def test_alter_rejects_bad_input_as_kafka_does(broker, wire, entity, ops, message):
    code, text = _alter(wire, entity, ops)
    assert code == ErrorCode.invalid_request
    assert message in text
    assert _describe(wire, [("client-id", 0, "x")]) == {}


def test_validate_only_writes_nothing_and_bad_filters_are_refused(broker, wire):
    assert _alter(wire, [("client-id", "dry")], [("producer_byte_rate", 1000.0)], True) == (0, None)
    assert _describe(wire, [("client-id", 0, "dry")]) == {}
    code, text = _describe(wire, [("client-id", 2, None), ("client-id", 2, None)])
    assert code == ErrorCode.invalid_request and "Duplicate client" in text
    code, text = _describe(wire, [("ip", 2, None)])
    assert code == ErrorCode.unsupported_version


def _quota_client(broker, wire, entity, rate=100000.0) -> None:
    assert _alter(wire, entity, [("producer_byte_rate", rate)]) == (0, None)
    names = {t: n or DEFAULT for t, n in entity}
    path = entity_path((names.get("user"), names.get("client-id")))
    wait_log(broker, f"quotas of {path} are now {{'producer_byte_rate': {rate}}}")


def _produce_big(broker, client: str, version: int, count: int = 2) -> list[tuple[int, float]]:
    """1.5 MB produce requests: (throttle_time_ms, seconds to the response) each."""
    w = WireClient.for_bootstrap(broker.bootstrap)
    w.client_id = client
    topic = f"wire-quota-{uuid.uuid4().hex[:6]}"
    w.create_topic(topic, 1)
    batch = build_batch([(None, os.urandom(1000), [], int(time.time() * 1000))] * 1500)
    out = []
    for _ in range(count):  # 1.5 MB each against 100 kB/s x 10 s of burst
        before = time.monotonic()
        resp = w.request(
            0,
            version,
            {
                "acks": 1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
        out.append((int(resp.throttle_time.total_seconds() * 1000), time.monotonic() - before))
    w.close()
    return out


def test_throttled_produce_carries_throttle_time_and_mutes_the_connection(broker, wire):
    client = f"kip219-{uuid.uuid4().hex[:6]}"
    _quota_client(broker, wire, [("client-id", client)])
    throttles = _produce_big(broker, client, 9)
    assert throttles[0][0] > 0, throttles  # 1.5 MB over a 10 s window: over 100 kB/s
    assert throttles[0][1] < throttles[0][0] / 1000.0, throttles  # answered at once
    # the next request waited out the mute (KIP-219)
    assert throttles[1][1] >= throttles[0][0] / 1000.0 * 0.9, throttles


def test_produce_before_kip219_gets_a_late_response_instead(broker, wire):
    client = f"old-{uuid.uuid4().hex[:6]}"
    _quota_client(broker, wire, [("client-id", client)])
    throttles = _produce_big(broker, client, 5, count=1)
    assert throttles[0][0] > 0 and throttles[0][1] >= throttles[0][0] / 1000.0 * 0.9, throttles


def test_default_user_quota_outranks_a_client_id_quota(broker, wire):
    """Kafka's order: users/<default> (6) before clients/<id> (7), and everyone
    unauthenticated is the user ANONYMOUS."""
    client = f"ranked-{uuid.uuid4().hex[:6]}"
    _quota_client(broker, wire, [("client-id", client)], rate=1e9)
    _quota_client(broker, wire, [("user", None)])
    try:
        throttles = _produce_big(broker, client, 9, count=1)
    finally:
        assert _alter(wire, [("user", None)], [("producer_byte_rate", None)]) == (0, None)
        wait_log(broker, "quotas of users/<default> are now unset")
    assert throttles[0][0] > 0, throttles


def test_quota_written_by_the_console_is_enforced(broker, wire, settings):
    """The console's own ZooKeeper write (znode + notification in one transaction)."""
    from cluster_client import zk as console_zk

    settings.QUILL_ZOOKEEPER_CONNECT = broker.zk_connect
    client = f"console-{uuid.uuid4().hex[:6]}"
    try:
        console_zk.set_entity_config(f"clients/{client}", {"producer_byte_rate": "100000"})
        wait_log(broker, f"quotas of clients/{client} are now {{'producer_byte_rate': 100000.0}}")
        assert _produce_big(broker, client, 9, count=1)[0][0] > 0
        console_zk.set_entity_config(f"clients/{client}", {})
        wait_log(broker, f"quotas of clients/{client} are now unset")
        assert _produce_big(broker, client, 9, count=1)[0][0] == 0
    finally:
        console_zk.reset()


def test_request_percentage_throttles_a_busy_client_for_at_most_a_window(broker, wire):
    client = f"busy-{uuid.uuid4().hex[:6]}"
    assert _alter(wire, [("client-id", client)], [("request_percentage", 0.01)]) == (0, None)
    wait_log(broker, f"quotas of clients/{client} are now {{'request_percentage': 0.01}}")
    w = WireClient.for_bootstrap(broker.bootstrap)
    w.client_id = client
    throttles = []
    try:
        for _ in range(2000):  # each takes ~0.1 ms of the broker: 1 ms in 10 s is 0.01 %
            resp = w.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            throttles.append(int(resp.throttle_time.total_seconds() * 1000))
            if throttles[-1]:
                break
    finally:
        w.close()
        assert _alter(wire, [("client-id", client)], [("request_percentage", None)]) == (0, None)
    assert 0 < throttles[-1] <= 1000, throttles[-5:]  # bounded at one window, as in Kafka
    assert _produce_big(broker, "not-busy", 9, count=1)[0][0] == 0  # others are not affected


def test_a_restarted_broker_reads_its_quotas_at_start(broker, wire):
    """Last in this module: it restarts the broker. The notification is long processed;
    the restarted broker must find the quota by reading the entities themselves."""
    client = f"restart-{uuid.uuid4().hex[:6]}"
    _quota_client(broker, wire, [("client-id", client)])
    broker.brokers[0].restart()
    assert _produce_big(broker, client, 9, count=1)[0][0] > 0
