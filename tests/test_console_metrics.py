"""The console's view of the brokers' /metrics, end to end: two brokers serving
metrics, the console under daphne and the monitor process (which scrapes each broker
once a second), Debian's chromium. The broker page's charts get live points of what a
producer sends; the console's own /metrics serves consumer lag for Prometheus.
Screenshots go to test-output/console/metrics-*.png."""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest
import redis
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from quill_stack import services
from tests.console_helpers import OUT, discard, start_console_and_monitor
from tests.wait_helpers import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest_plugins = ["tests.console_helpers"]  # the chromium `page` fixture


@pytest.fixture(scope="module")
def stack(cluster_factory, redis_server, tmp_path_factory):
    cluster = cluster_factory(2, **{"quill.metrics.port": "free", "log.cleaner.backoff.ms": "1000"})
    state = tmp_path_factory.mktemp("console-metrics")
    redis_url = f"redis://{redis_server.host}:{redis_server.port}/6"
    redis.Redis.from_url(redis_url).flushdb()
    settings = services.app_env(state, redis_url, cluster.zk_connect, cluster.bootstrap)
    settings["QUILL_METRICS_PORTS"] = ",".join(f"{b.id}={b.metrics_port}" for b in cluster.brokers)
    procs, port, password = start_console_and_monitor(state, settings)
    r = redis.Redis.from_url(redis_url)
    wait_until(
        lambda: r.get("quill:broker-metrics:1") and r.get("quill:broker-metrics:2"), 60, "scrapes"
    )
    yield {"cluster": cluster, "url": f"http://127.0.0.1:{port}", "password": password}
    discard(procs)


@pytest.fixture(scope="module")
def admin_page(stack, request):
    """The browser test's chromium page, logged in as the admin."""
    pg = request.getfixturevalue("page")
    pg.goto(f"{stack['url']}/")
    pg.fill("input[name=username]", "admin")
    pg.fill("input[name=password]", stack["password"])
    pg.click("button[type=submit]")
    pg.wait_for_selector("#livedot[data-state=live]")
    return pg


def _produce_for(bootstrap: str, topic: str, seconds: float) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(200):
            producer.produce(topic, value=b"x" * 200)
        sent += 200
        producer.poll(0.05)
    assert producer.flush(60) == 0
    return sent


def test_broker_page_charts_live_points_of_produced_traffic(stack, admin_page):
    pg = admin_page
    url, cluster = stack["url"], stack["cluster"]
    topic = f"charted-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
    pg.goto(f"{url}/brokers/1/")
    pg.wait_for_selector("#livedot[data-state=live]")
    assert pg.locator("svg.chart[data-series='b1:messages_in']").count() == 1
    pg.evaluate("window.quillLastDelta = null")
    sent = _produce_for(cluster.bootstrap, topic, 4.0)
    # a live delta for this broker carries a messages-in point above zero
    pg.wait_for_function(
        """() => { const d = window.quillLastDelta && window.quillLastDelta.data;
                 const s = d && d.series && d.series['b1:messages_in'];
                 return s && s.some(p => p[1] > 0); }""",
        timeout=30_000,
    )
    points = pg.evaluate(
        "document.querySelector(\"svg.chart[data-series='b1:messages_in'] path.line\") !== null"
    )
    assert points, "the messages-in chart drew no line"
    # the figures on the page were patched from the deltas, without a reload
    rate = pg.locator("[data-k='bm:1:requests']").inner_text()
    assert rate.endswith("/s") and rate != "0.0/s"
    assert pg.locator("#apis tbody tr").count() >= 1
    pg.screenshot(path=str(OUT / "metrics-broker-1.png"), full_page=True)
    assert sent > 0
    pg.goto(f"{url}/")
    pg.wait_for_selector("svg.chart[data-series='cluster:bytes_in'] path.line")
    pg.screenshot(path=str(OUT / "metrics-cluster.png"), full_page=True)


def test_console_metrics_serve_consumer_lag(stack):
    cluster = stack["cluster"]
    topic = f"lagged-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(100):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 40)], asynchronous=False)
    consumer.close()

    def lag():
        with urllib.request.urlopen(f"{stack['url']}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "kafka_consumergroup_lag" and s.labels["consumergroup"] == group:
                    return s.value, s.labels
        return None

    value, labels = wait_until(lag, 60, "the group's lag in the console's /metrics")
    assert value == 60
    assert labels == {"consumergroup": group, "topic": topic, "partition": "0"}


def test_quotas_page_shows_throttle_time_and_topic_page_the_cleaner(stack, admin_page):
    pg, url, cluster = admin_page, stack["url"], stack["cluster"]
    from broker.zk.client import KafkaZkClient

    zk = KafkaZkClient(cluster.zk_connect)
    zk.start()
    topic = f"throttled-{uuid.uuid4().hex[:6]}"
    try:
        zk.set_entity_config("clients", "slowpoke", {"producer_byte_rate": "20000"})
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "client.id": "slowpoke", "linger.ms": 5}
        )

        def throttled_row():
            for _ in range(50):
                producer.produce(topic, value=b"y" * 1000)
            producer.poll(0.2)
            pg.goto(f"{url}/quotas/")
            row = pg.locator("#throttled tbody tr", has_text="slowpoke")
            if (
                not row.count()
                or float(row.first.locator("td").nth(4).get_attribute("data-v")) <= 0
            ):
                return None  # measured, not throttled yet
            return row.first.inner_text()

        text = wait_until(throttled_row, 90, "a throttle row for client-id slowpoke")
        assert text.startswith("produce") and "slowpoke" in text
        pg.screenshot(path=str(OUT / "metrics-quotas.png"), full_page=True)
        producer.purge()
    finally:
        zk.set_entity_config("clients", "slowpoke", {})
        zk.close()
    compacted = f"compacted-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(compacted, 1, replica_assignment=[[1, 2]], config={"cleanup.policy": "compact"})
    admin.create_topics([new])[compacted].result(30)

    def cleaner_rows():
        pg.goto(f"{url}/topics/{compacted}/")
        return pg.locator("#cleaner tbody tr td.n").count() >= 6  # a row per replica

    wait_until(cleaner_rows, 90, "the cleaner's status on the topic page")
    assert pg.locator("#cleaner tbody tr").count() == 2  # partition 0 on brokers 1 and 2
    pg.screenshot(path=str(OUT / "metrics-topic-cleaner.png"), full_page=True)
