"""Lag alerts end to end: a rule made with POST /api/alerts, evaluated by the worker's
Celery beat from the monitor's Burrow status; a group that stopped consuming with lag
fires the webhook (a test HTTP server here) with the group, its status, lag and
partitions, and the event is in the history (API and group page)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytest.register_assert_rewrite("tests.ops_stack_helpers")
from tests.ops_stack_helpers import running_stack, unique  # noqa: E402
from tests.wait_helpers import wait_until  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
pytest_plugins = ["tests.webhook_helpers"]


@pytest.fixture(scope="module")
def alert_stack(cluster_factory, redis_server, tmp_path_factory):
    cluster = cluster_factory(1)
    redis_url = redis_server.url.rsplit("/", 1)[0] + "/6"
    # the test's webhook listens on loopback, which alert webhooks may call only when an
    # admin allows it (alerts.webhook)
    allow = {"QUILL_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"}
    # beat evaluates the rules every second (10 s by default), and a partition whose
    # commits stopped is STOP after 3 s without one (30 s by default): the same rules
    # fire on the same status, sooner
    fast = {"QUILL_ALERT_EVALUATE_S": "1", "QUILL_LAG_MIN_SPAN_S": "3"}
    state = tmp_path_factory.mktemp("alerts")
    with running_stack(cluster, redis_url, state, True, allow | fast) as stack:
        yield stack


def test_a_stalled_group_fires_the_webhook(alert_stack, webhook):
    stack = alert_stack
    url, received = webhook
    topic, group = unique("alert"), unique("stuck")
    admin = AdminClient({"bootstrap.servers": stack.cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": stack.cluster.bootstrap})
    for i in range(100):
        producer.produce(topic, b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": stack.cluster.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
    consumer.close()  # lag 90, nobody consuming: Burrow's STOP once the window has aged

    status, bad = stack.call("POST", "/alerts", {"group": group, "statuses": ["NOPE"]})
    assert status == 400 and "statuses" in bad["errors"]
    body = {
        "name": "stuck",
        "group": "stuck-*",
        "statuses": ["ERR", "STOP", "STALL"],
        "webhook_url": url,
    }
    status, rule = stack.call("POST", "/alerts", body)
    assert status == 201, rule

    wait_until(lambda: any(r["group"] == group for r in received), 180, "the webhook", 1.0)
    fired = next(r for r in received if r["group"] == group)
    assert fired["event"] == "firing" and fired["rule"] == "stuck"
    assert fired["status"] in ("ERR", "STOP", "STALL")
    assert fired["lag"] == 90
    assert fired["partitions"] == [
        {
            "topic": topic,
            "partition": 0,
            "status": fired["partitions"][0]["status"],
            "lag": 90,
            "lag_ms": fired["partitions"][0]["lag_ms"],
        }
    ]
    assert fired["partitions"][0]["status"] in ("STOP", "STALL")
    status, events = stack.call("GET", f"/alerts/events?group={group}")
    assert status == 200 and [e["kind"] for e in events] == ["firing"]
    assert events[0]["delivered"] == {"webhook": "delivered"}  # the detail is for admins
    status, events = stack.call("GET", f"/alerts/events?group={group}", role="admin")
    assert events[0]["delivered"] == {"webhook": "HTTP 200"}
