"""Broker metrics scraped from real brokers (3, one module-wide cluster) with real
clients: counters count what was produced, the under-replicated gauge follows a killed
follower, throttled clients show throttle time, the output parses with
prometheus_client's parser and holds every name Kafka's dashboards need (the names of
Strimzi's jmx_exporter rules)."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.zk.client import KafkaZkClient
from tests.wait_helpers import wait_log

from .metrics_helpers import names, samples, scrape_text, value, wait_value

pytestmark = pytest.mark.cluster

# what the issue lists, as Strimzi's rules name it (the sample names a scrape must hold)
REQUIRED = {
    *(
        f"kafka_server_brokertopicmetrics_{m}_total"
        for m in (
            "messagesin",
            "bytesin",
            "bytesout",
            "failedproducerequests",
            "failedfetchrequests",
            "totalproducerequests",
            "totalfetchrequests",
        )
    ),
    *(
        f"kafka_server_replicamanager_{m}"
        for m in (
            "partitioncount",
            "leadercount",
            "underreplicatedpartitions",
            "underminisrpartitioncount",
            "offlinereplicacount",
            "isrshrinks_total",
            "isrexpands_total",
        )
    ),
    *(
        f"kafka_controller_kafkacontroller_{m}"
        for m in (
            "activecontrollercount",
            "offlinepartitionscount",
            "globalpartitioncount",
            "globaltopiccount",
        )
    ),
    "kafka_controller_controllerstats_uncleanleaderelections_total",
    "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
    "kafka_network_requestmetrics_requests_total",
    *(
        f"kafka_network_requestmetrics_{m}{suffix}"
        for m in (
            "totaltimems",
            "requestqueuetimems",
            "localtimems",
            "remotetimems",
            "responsesendtimems",
        )
        for suffix in ("", "_count")
    ),
    "kafka_network_socketserver_networkprocessoravgidle_percent",
    "kafka_server_delayedoperationpurgatory_purgatorysize",
    "kafka_log_log_size",
    "kafka_log_log_logendoffset",
    "kafka_log_log_logstartoffset",
    "kafka_log_log_numlogsegments",
    "kafka_log_logcleanermanager_max_dirty_percent",
    "kafka_log_logcleanermanager_uncleanable_partitions_count",
    "kafka_log_logcleaner_cleaner_recopy_percent",
    "kafka_log_logcleaner_max_clean_time_secs",
    "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
    "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count",
    "kafka_server_sessionexpirelistener_zookeeperexpires_total",
    "kafka_coordinator_group_groupmetadatamanager_numgroups",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_open_fds",
    "python_gc_collections_total",
    "python_gc_pause_seconds_total",
    "python_gc_pause_seconds_max",
    "python_gc_objects_frozen",
    "quill_event_loop_lag_seconds",
}
QUOTA_NAMES = {
    "kafka_server_produce_byte_rate",
    "kafka_server_produce_throttle_time",
    "quill_quota_produce_throttle_time_ms_total",
}


@pytest.fixture(scope="module")
def cluster3(cluster_factory):
    return cluster_factory(
        3,
        **{
            "quill.metrics.port": "free",
            "replica.lag.time.max.ms": "4000",
            "log.cleaner.backoff.ms": "1000",
        },
    )


def _create(cluster, name: str, assignment: list[list[int]], config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(name, len(assignment), replica_assignment=assignment, config=config or {})
    admin.create_topics([new])[name].result(timeout=30)


def _produce(cluster, topic: str, n: int, **config) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, **config})
    for i in range(n):
        producer.produce(topic, key=b"k%d" % (i % 10), value=b"value-%06d" % i)
        producer.poll(0)
    assert producer.flush(60) == 0


def _consume(cluster, topic: str, n: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 60
    while got < n and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(100, timeout=1.0) if not m.error())
    consumer.close()
    assert got == n


def test_messagesin_counts_every_record_produced(cluster3):
    topic = f"m-in-{uuid.uuid4().hex[:6]}"
    _create(cluster3, topic, [[1, 2, 3]])
    port = cluster3.broker(1).metrics_port
    before_all = value(port, "kafka_server_brokertopicmetrics_messagesin_total")
    _produce(cluster3, topic, 1234)
    after = samples(port)
    messages = after[
        ("kafka_server_brokertopicmetrics_messagesin_total", frozenset({("topic", topic)}))
    ]
    assert messages == 1234
    total = after[("kafka_server_brokertopicmetrics_messagesin_total", frozenset())]
    assert total - before_all >= 1234
    assert (
        after[("kafka_server_brokertopicmetrics_bytesin_total", frozenset({("topic", topic)}))] > 0
    )
    # the partition's log gauges agree with what was appended
    part = frozenset({("topic", topic), ("partition", "0")})
    assert after[("kafka_log_log_logendoffset", part)] == 1234
    assert after[("kafka_log_log_numlogsegments", part)] == 1
    # followers count nothing in: their copies come by replication, not produce
    follower_port = cluster3.broker(2).metrics_port
    labels = {"topic": topic}
    assert value(follower_port, "kafka_server_brokertopicmetrics_messagesin_total", **labels) == 0
    _consume(cluster3, topic, 1234)
    bytes_out = value(port, "kafka_server_brokertopicmetrics_bytesout_total", **labels)
    assert (
        bytes_out
        >= after[("kafka_server_brokertopicmetrics_bytesin_total", frozenset(labels.items()))]
    )


def test_output_parses_and_holds_every_listed_name(cluster3):
    topic = f"m-all-{uuid.uuid4().hex[:6]}"
    _create(cluster3, topic, [[1, 2, 3]], {"cleanup.policy": "compact"})
    _produce(cluster3, topic, 50)
    _consume(cluster3, topic, 50)
    names = {name for name, _labels in samples(cluster3.broker(1).metrics_port)}
    missing = REQUIRED - names
    assert not missing, f"not served: {sorted(missing)}"
    # per-request timers carry Kafka's quantile labels, Fetch also as FetchConsumer
    got = samples(cluster3.broker(1).metrics_port)
    p99 = frozenset({("request", "Produce"), ("quantile", "0.99")})
    assert ("kafka_network_requestmetrics_totaltimems", p99) in got
    fetch_count = frozenset({("request", "FetchConsumer")})
    assert got[("kafka_network_requestmetrics_totaltimems_count", fetch_count)] >= 1
    follower = frozenset({("request", "FetchFollower")})
    assert got[("kafka_network_requestmetrics_totaltimems_count", follower)] >= 1
    # the parts of a request's time (queue, local, remote, send) are never negative:
    # a follower's long poll is remote time, not taken off some other request's local
    timers = [
        (name, labels, v)
        for (name, labels), v in got.items()
        if name.startswith("kafka_network_requestmetrics_") and name.endswith("timems")
    ]
    assert timers and all(v >= 0 for _n, _l, v in timers), [t for t in timers if t[2] < 0]
    # the broker froze its start-up objects out of full collections (broker.server.heap)
    assert value(cluster3.broker(1).metrics_port, "python_gc_objects_frozen") > 10_000
    ports = [b.metrics_port for b in cluster3.brokers]
    active = [value(p, "kafka_controller_kafkacontroller_activecontrollercount") for p in ports]
    assert sorted(active) == [0, 0, 1]
    compacted = frozenset({("topic", topic), ("partition", "0")})
    deadline = time.monotonic() + 60  # the cleaner looks every log.cleaner.backoff.ms
    while ("quill_log_cleaner_dirty_ratio", compacted) not in got:
        assert time.monotonic() < deadline, "no cleaner status for the compacted topic"
        time.sleep(0.5)
        got = samples(cluster3.broker(1).metrics_port)
    assert 0 <= got[("quill_log_cleaner_dirty_ratio", compacted)] <= 1


def test_endpoint_answers_only_metrics_and_survives_garbage(cluster3):
    port = cluster3.broker(1).metrics_port
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/nope", timeout=10)
    assert err.value.code == 404
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"\x00\x01garbage without end of head")
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(100) == b""  # closed, no answer
    assert "kafka_server_replicamanager_partitioncount" in scrape_text(port)


def test_killed_follower_makes_leader_report_under_replicated(cluster3):
    topic = f"m-urp-{uuid.uuid4().hex[:6]}"
    _create(cluster3, topic, [[1, 2, 3]])
    _produce(cluster3, topic, 10, acks="all")
    port = cluster3.broker(1).metrics_port
    name = "kafka_server_replicamanager_underreplicatedpartitions"
    assert wait_value(port, name, lambda v: v == 0) == 0
    shrinks = value(port, "kafka_server_replicamanager_isrshrinks_total")
    follower = cluster3.broker(3)
    follower.kill()
    try:
        assert wait_value(port, name, lambda v: v > 0) >= 1
    finally:
        follower.start()
    assert wait_value(port, name, lambda v: v == 0, timeout=120) == 0
    assert value(port, "kafka_server_replicamanager_isrshrinks_total") > shrinks
    assert value(port, "kafka_server_replicamanager_isrexpands_total") >= 1


def test_throttled_client_shows_throttle_time(cluster3):
    topic = f"m-q-{uuid.uuid4().hex[:6]}"
    _create(cluster3, topic, [[1]])
    zk = KafkaZkClient(cluster3.zk_connect)
    zk.start()
    try:
        zk.set_entity_config("clients", "metered", {"producer_byte_rate": "20000"})
        wait_log(cluster3, "quotas of clients/metered are now {'producer_byte_rate': 20000.0}")
        port = cluster3.broker(1).metrics_port
        producer = Producer(
            {"bootstrap.servers": cluster3.bootstrap, "client.id": "metered", "linger.ms": 5}
        )
        labels = {"user": "", "client_id": "metered"}
        deadline = time.monotonic() + 90
        throttle = 0.0
        while throttle <= 0 and time.monotonic() < deadline:
            for _ in range(50):
                producer.produce(topic, value=os.urandom(1000))
            producer.poll(0.5)
            throttle = value(port, "kafka_server_produce_throttle_time", **labels)
        assert throttle > 0, "no throttle time reported for client-id metered"
        assert value(port, "quill_quota_produce_throttle_time_ms_total", **labels) > 0
        assert value(port, "kafka_server_produce_byte_rate", **labels) > 0
        names = {name for name, _labels in samples(port)}
        assert QUOTA_NAMES <= names
        producer.purge()
    finally:
        zk.set_entity_config("clients", "metered", {})
        zk.close()


def test_dashboard_and_alert_rules_use_only_served_names(cluster3):
    from console.views.metrics import CONSOLE_METRIC_NAMES  # consumer lag (the console's)

    from .monitoring_helpers import dashboard_and_rule_names

    served = names(cluster3.broker(1).metrics_port) | set(CONSOLE_METRIC_NAMES)
    used = dashboard_and_rule_names()
    assert used, "the dashboard and rules query nothing?"
    assert not used - served, f"queried but not served: {sorted(used - served)}"
