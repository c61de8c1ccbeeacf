"""``GET /metrics``: what the console knows that brokers do not, for Prometheus.

Consumer lag per group and partition, from the monitor's 1 s samples in Redis, under
the names kafka_exporter gives it (``kafka_consumergroup_lag``), which Strimzi's
dashboards and docs/monitoring's alert rules query. No login: Prometheus scrapes it.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from prometheus_client import CollectorRegistry, exposition, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from livefeed import history

# the names this endpoint serves (tests check the dashboard's queries against them)
CONSOLE_METRIC_NAMES = ("kafka_consumergroup_lag", "kafka_consumergroup_members")
CONTENT_TYPE = getattr(exposition, "CONTENT_TYPE_PLAIN_0_0_4", exposition.CONTENT_TYPE_LATEST)


class LagCollector(Collector):
    def collect(self):
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Records between a group's committed offset and the high watermark",
            labels=["consumergroup", "topic", "partition"],
        )
        members = GaugeMetricFamily(
            "kafka_consumergroup_members", "Members of a group", labels=["consumergroup"]
        )
        for gid, status in sorted(history.group_statuses().items()):
            members.add_metric([gid], status.get("members", 0))
            for key, row in sorted(status.get("partitions", {}).items()):
                topic, _, partition = key.rpartition("/")
                lag.add_metric([gid, topic, partition], row.get("lag", 0))
        yield lag
        yield members


@login_not_required
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LagCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE)
