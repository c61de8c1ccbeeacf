"""A fresh broker's scrape, before any client traffic: Kafka registers its per-request
timers (RequestMetrics, for every API the listener serves, and FetchConsumer /
FetchFollower) and the log cleaner's gauges at start-up, so dashboards show zeros, not
"No data"."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.metrics.stats import TIMERS
from broker.server.apis import SUPPORTED

from .metrics_helpers import scrape_text

CLEANER_GAUGES = (
    "kafka_log_logcleanermanager_max_dirty_percent",
    "kafka_log_logcleanermanager_time_since_last_run_ms",
    "kafka_log_logcleanermanager_uncleanable_bytes",
    "kafka_log_logcleanermanager_uncleanable_partitions_count",
    "kafka_log_logcleaner_cleaner_recopy_percent",
    "kafka_log_logcleaner_max_buffer_utilization_percent",
    "kafka_log_logcleaner_max_clean_time_secs",
    "kafka_log_logcleaner_max_compaction_delay_secs",
    "kafka_log_logcleaner_deadthreadcount",
)


@pytest.fixture(scope="module")
def fresh(cluster_factory):
    cluster = cluster_factory(1, **{"quill.metrics.port": "free"})
    broker = cluster.brokers[0]
    families = {f.name: f for f in text_string_to_metric_families(scrape_text(broker.metrics_port))}
    return broker, families


def test_every_request_timer_exists_from_start_up(fresh):
    _broker, families = fresh
    served = {spec[0] for spec in SUPPORTED.values()} | {"FetchConsumer", "FetchFollower"}
    for timer in TIMERS:
        family = families[f"kafka_network_requestmetrics_{timer}"]
        counted = {s.labels["request"] for s in family.samples if s.name.endswith("_count")}
        assert counted >= served, (timer, sorted(served - counted))
        quantiles = {
            s.labels["request"] for s in family.samples if s.labels.get("quantile") == "0.99"
        }
        assert quantiles >= served, (timer, sorted(served - quantiles))
    produce = families["kafka_network_requestmetrics_totaltimems"]
    zero = {s.name: s.value for s in produce.samples if s.labels.get("request") == "DeleteAcls"}
    assert zero["kafka_network_requestmetrics_totaltimems_count"] == 0
    assert zero["kafka_network_requestmetrics_totaltimems"] == 0


def test_cleaner_gauges_exist_from_start_up(fresh):
    broker, families = fresh
    for name in CLEANER_GAUGES:
        assert name in families, name
        assert families[name].samples, name
    by_dir = {
        s.labels["logDirectory"]: s.value
        for s in families["kafka_log_logcleanermanager_uncleanable_partitions_count"].samples
    }
    assert by_dir == {str(broker.log_dir): 0}
    by_dir = {
        s.labels["logDirectory"]: s.value
        for s in families["kafka_log_logcleanermanager_uncleanable_bytes"].samples
    }
    assert by_dir == {str(broker.log_dir): 0}
    for name in (
        "kafka_log_logcleanermanager_max_dirty_percent",
        "kafka_log_logcleaner_max_buffer_utilization_percent",
        "kafka_log_logcleaner_max_compaction_delay_secs",
    ):
        assert families[name].samples[0].value == 0, name
    assert families["kafka_log_logcleanermanager_time_since_last_run_ms"].samples[0].value >= 0
