"""Each broker's own /metrics, read once a second by the monitor.

A scrape is parsed with prometheus_client's parser into a ``Reading``; two readings
make the figures the pages chart (rates from counter deltas, gauges as they are).
Per broker they go to the ``broker:<id>`` subscription and Redis; summed over the
brokers to ``cluster``; a broker's throttle times and cleaner status are kept in
Redis for the quotas and topic pages, and so is each topic's BytesOut on each broker
(the topic page's "consumer reads by broker": with fetch from follower, KIP-392, the
bytes come from the replica in the consumers' rack). No Prometheus server is needed.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from cluster_client import clusters
from console.monitor import deltas as D
from livefeed import history
from livefeed.groups import broker_sub

log = logging.getLogger("console.monitor")
SCRAPE_TIMEOUT_S = 0.8
SERIES_KEEP = 3600  # one hour of 1 s points
METRICS_TTL_S = 60

# counters charted as per-second rates: figure name -> sample name (all-topics sample)
RATES = {
    "bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total",
    "messages_in": "kafka_server_brokertopicmetrics_messagesin_total",
    "cpu": "process_cpu_seconds_total",
}
GAUGES = {
    "under_replicated": "kafka_server_replicamanager_underreplicatedpartitions",
    "loop_lag_ms": "quill_event_loop_lag_seconds",
    "partitions": "kafka_server_replicamanager_partitioncount",
    "leaders": "kafka_server_replicamanager_leadercount",
    "rss": "process_resident_memory_bytes",
}
TOPIC_BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"  # with a topic label
CHARTED = ("bytes_in", "bytes_out", "messages_in", "requests", "under_replicated")
CHARTED += ("purgatory", "loop_lag_ms", "cpu")
SUMMED = ("bytes_in", "bytes_out", "messages_in", "requests", "under_replicated", "purgatory")


@dataclass
class Reading:
    """What one scrape of one broker says, keyed for the figures below."""

    at: float
    plain: dict[str, float] = field(default_factory=dict)  # unlabelled samples
    requests: dict[str, float] = field(default_factory=dict)  # request -> count
    p99_ms: dict[str, float] = field(default_factory=dict)  # request -> totaltimems p99
    purgatory: float = 0.0
    throttle: dict[str, dict] = field(default_factory=dict)  # "type/user/client" -> row
    cleaner: dict[str, dict] = field(default_factory=dict)  # "topic/partition" -> status
    topic_bytes_out: dict[str, float] = field(default_factory=dict)  # topic -> bytes sent


def parse(text: str, at: float) -> Reading:
    r = Reading(at)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            _take(r, s.name, s.labels, s.value)
    return r


def _take(r: Reading, name: str, labels: dict, value: float) -> None:
    if not labels:
        r.plain[name] = value
    elif name == "kafka_network_requestmetrics_requests_total":
        r.requests[labels["request"]] = r.requests.get(labels["request"], 0.0) + value
    elif name == "kafka_network_requestmetrics_totaltimems" and labels.get("quantile") == "0.99":
        r.p99_ms[labels["request"]] = value
    elif name == TOPIC_BYTES_OUT and "topic" in labels:
        r.topic_bytes_out[labels["topic"]] = value
    elif name == "kafka_server_delayedoperationpurgatory_purgatorysize":
        r.purgatory += value
    elif name.endswith("_throttle_time") and "client_id" in labels:
        kind = name.removeprefix("kafka_server_").removesuffix("_throttle_time")
        _throttle_row(r, kind, labels)["throttle_ms"] = value
    elif name.startswith("quill_quota_") and name.endswith("_throttle_time_ms_total"):
        kind = name.removeprefix("quill_quota_").removesuffix("_throttle_time_ms_total")
        _throttle_row(r, kind, labels)["total_ms"] = value
    elif name.startswith("quill_log_cleaner_"):
        key = f"{labels['topic']}/{labels['partition']}"
        r.cleaner.setdefault(key, {})[name.removeprefix("quill_log_cleaner_")] = value


def _throttle_row(r: Reading, kind: str, labels: dict) -> dict:
    key = f"{kind}/{labels.get('user', '')}/{labels.get('client_id', '')}"
    return r.throttle.setdefault(
        key,
        {"type": kind, "user": labels.get("user", ""), "client_id": labels.get("client_id", "")},
    )


def figures(prev: Reading | None, cur: Reading) -> dict:
    """The charted values of one broker: rates over the two readings, gauges now."""
    out: dict = {name: cur.plain.get(sample, 0.0) for name, sample in GAUGES.items()}
    out["loop_lag_ms"] *= 1000.0
    out["purgatory"] = cur.purgatory
    span = cur.at - prev.at if prev is not None else 0.0
    for name, sample in RATES.items():
        delta = cur.plain.get(sample, 0.0) - prev.plain.get(sample, 0.0) if span > 0 else 0.0
        out[name] = max(0.0, delta / span) if span > 0 else 0.0
    by_api = {}
    for req, count in cur.requests.items():
        before = prev.requests.get(req, 0.0) if prev is not None else count
        rate = max(0.0, (count - before) / span) if span > 0 else 0.0
        by_api[req] = {"rate": rate, "p99_ms": cur.p99_ms.get(req, 0.0)}
    out["requests"] = sum(v["rate"] for v in by_api.values())
    out["by_api"] = by_api
    out["cpu"] *= 100.0  # percent of one core
    out["topic_out"] = {
        topic: {"total": total, "rate": _rate(prev, cur, topic, total, span)}
        for topic, total in cur.topic_bytes_out.items()
    }
    return out


def _rate(prev: Reading | None, cur: Reading, topic: str, total: float, span: float) -> float:
    """Bytes per second a topic's consumers were sent between the two readings."""
    if prev is None or span <= 0:
        return 0.0
    return max(0.0, (total - prev.topic_bytes_out.get(topic, total)) / span)


def metrics_port(broker_id: int) -> int:
    cluster = clusters.current()
    ports = cluster.metrics_ports
    if broker_id in ports:
        return ports[broker_id]
    base = cluster.metrics_base_port
    return base + broker_id - 1 if base else 0


def scrape(host: str, port: int) -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=SCRAPE_TIMEOUT_S) as r:
        return r.read().decode()


class BrokerMetricsSampler:
    """Keeps each broker's previous reading; ``sample`` gives this second's deltas."""

    def __init__(self) -> None:
        self.readings: dict[int, Reading] = {}
        self.failing: set[int] = set()

    def sample(self, brokers: dict[int, dict], now: float) -> D.Deltas:
        out: D.Deltas = {}
        total = dict.fromkeys(SUMMED, 0.0)
        pipe = history.client().pipeline()
        for broker_id, info in sorted(brokers.items()):
            port = metrics_port(broker_id)
            if not port:
                continue
            try:
                cur = parse(scrape(info["host"], port), now)
            except Exception as exc:  # noqa: BLE001 - a broker down or without metrics
                if broker_id not in self.failing:
                    log.info("monitor: no metrics from broker %d (%s)", broker_id, exc)
                self.failing.add(broker_id)
                self.readings.pop(broker_id, None)
                continue
            self.failing.discard(broker_id)
            fig = figures(self.readings.get(broker_id), cur)
            self.readings[broker_id] = cur
            for name in SUMMED:
                total[name] += fig[name]
            self._publish(out, pipe, broker_id, fig, cur, now)
        for gone in set(self.readings) - set(brokers):
            del self.readings[gone]
        if self.readings:
            for name in SUMMED:
                point = [round(now, 3), round(total[name], 3)]
                _push(pipe, "all", name, point)
                D.add(out, "cluster", series={f"cluster:{name}": [point]})
        pipe.execute()
        return out

    def _publish(self, out, pipe, broker_id, fig, cur, now) -> None:
        sub = broker_sub(broker_id)
        series = {}
        for name in CHARTED:
            point = [round(now, 3), round(fig[name], 3)]
            series[f"b{broker_id}:{name}"] = [point]
            _push(pipe, broker_id, name, point)
        D.add(out, sub, series=series)
        for name in CHARTED + ("partitions", "leaders"):
            D.add(out, sub, f"bm:{broker_id}:{name}", {"t": _fmt(name, fig[name]), "v": fig[name]})
        for req, row in fig["by_api"].items():
            D.add(out, sub, f"bm:{broker_id}:api:{req}:rate", {"t": f"{row['rate']:,.1f}/s"})
            D.add(out, sub, f"bm:{broker_id}:api:{req}:p99", {"t": f"{row['p99_ms']:,.1f} ms"})
        kept = {**fig, "at": now, "throttle": cur.throttle, "cleaner": cur.cleaner}
        pipe.set(history.broker_metrics_key(broker_id), json.dumps(kept), ex=METRICS_TTL_S)


def _push(pipe, broker_id, name: str, point: list) -> None:
    key = history.broker_series_key(broker_id, name)
    pipe.lpush(key, json.dumps(point))
    pipe.ltrim(key, 0, SERIES_KEEP - 1)


def _fmt(name: str, value: float) -> str:
    if name in ("bytes_in", "bytes_out"):
        return D.fmt.size(value) + "/s"
    if name == "cpu":
        return f"{value:.1f} %"
    if name == "loop_lag_ms":
        return f"{value:,.1f} ms"
    if name in ("messages_in", "requests"):
        return f"{value:,.1f}/s"
    return f"{value:,.0f}"
