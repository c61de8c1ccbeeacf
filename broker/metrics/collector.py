"""The broker's metric families, computed from its state when a scrape asks.

Names and labels are what Strimzi's jmx_exporter rules (``kafka-metrics.yaml``,
``lowercaseOutputName: true``) make of Kafka's MBeans:

- ``<type=T, name=XPerSec, k=v><>Count``  -> ``kafka_<domain>_t_x_total{k="v"}``
- ``<type=T, name=X, k=v><>Value``        -> ``kafka_<domain>_t_x{k="v"}``
- ``<type=T, name=XPercent><>Value``      -> ``kafka_<domain>_t_x_percent``
- histograms: ``<>NNthPercentile``        -> ``kafka_<domain>_t_x{quantile="0.NN"}``
  and ``<>Count`` -> ``kafka_<domain>_t_x_count``

Kafka metrics those rules do not match (the quota sensors, the group coordinator's
gauges) carry the names jmx_exporter gives them without rules; ``quill_*`` names are
ours where Kafka has nothing (event-loop lag, the cleaner's per-partition status).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..replica.counts import Counts
from .stats import TIMERS, Histogram

if TYPE_CHECKING:
    from .registry import BrokerMetrics

TOPIC_METRICS = (  # BrokerTopicMetrics name (without PerSec) -> TopicStats attribute
    ("messagesin", "messages_in", "Records appended (MessagesInPerSec)"),
    ("bytesin", "bytes_in", "Bytes appended by producers (BytesInPerSec)"),
    ("bytesout", "bytes_out", "Record bytes sent to consumers (BytesOutPerSec)"),
    ("totalproducerequests", "total_produce", "Produce requests per partition"),
    ("failedproducerequests", "failed_produce", "Failed produce requests per partition"),
    ("totalfetchrequests", "total_fetch", "Consumer fetch requests per partition"),
    ("failedfetchrequests", "failed_fetch", "Failed consumer fetch requests per partition"),
)
QUOTA_TYPES = (  # quota key -> Kafka's sensor type and its rate attribute
    ("producer_byte_rate", "produce", "byte_rate"),
    ("consumer_byte_rate", "fetch", "byte_rate"),
    ("request_percentage", "request", "request_time"),
)
GROUP_STATES = (
    ("numgroupsstable", "Stable"),
    ("numgroupspreparingrebalance", "PreparingRebalance"),
    ("numgroupscompletingrebalance", "CompletingRebalance"),
    ("numgroupsempty", "Empty"),
    ("numgroupsdead", "Dead"),
)


def summary(name: str, doc: str, labelled: list[tuple[dict[str, str], Histogram]]) -> Metric:
    """A Yammer histogram as Strimzi's rules export it: quantile gauges and a count."""
    family = Metric(name, doc, "summary")
    for labels, hist in labelled:
        for quantile, value in hist.quantiles():
            family.add_sample(name, {**labels, "quantile": quantile}, value)
        family.add_sample(name + "_count", labels, hist.count)
        family.add_sample(name + "_sum", labels, hist.total)
    return family


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class BrokerCollector(Collector):
    """prometheus_client Collector over one broker's state (see module docstring)."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics
        self.server = metrics.server

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_metrics()
        yield from self._request_metrics()
        yield from self._replica_manager()
        yield from self._controller()
        yield from self._purgatory()
        yield from self._cleaner()
        yield from self._quotas()
        yield from self._zookeeper()
        yield from self._groups()
        yield from self._fetch_sessions()
        yield from self._fetcher_stats()
        yield from self._loop()

    # -- kafka.server:type=BrokerTopicMetrics --------------------------------------------
    def _topic_metrics(self) -> Iterator[Metric]:
        topics = list(self.metrics.topics.topics.items())
        for short, attr, doc in TOPIC_METRICS:
            name = f"kafka_server_brokertopicmetrics_{short}"
            family = CounterMetricFamily(name, doc, labels=["topic"])
            total = 0
            for topic, stats in topics:
                value = getattr(stats, attr)
                total += value
                family.add_metric([topic], value)
            family.add_sample(name + "_total", {}, total)
            yield family
        yield CounterMetricFamily(
            "kafka_server_brokertopicmetrics_nokeycompactedtopicrecords",
            "Keyless records refused by compacted topics (NoKeyCompactedTopicRecordsPerSec)",
            value=self.metrics.topics.no_key_compacted,
        )

    # -- kafka.network:type=RequestMetrics -----------------------------------------------
    def _request_metrics(self) -> Iterator[Metric]:
        requests = self.metrics.requests
        name = "kafka_network_requestmetrics_requests"
        family = CounterMetricFamily(
            name, "Requests (RequestsPerSec)", labels=["request", "version"]
        )
        for (api_key, version), count in sorted(requests.counts.items()):
            family.add_metric([requests.names.get(api_key, str(api_key)), str(version)], count)
        yield family
        timers = sorted(requests.timers.items())
        for i, timer in enumerate(TIMERS):
            yield summary(
                f"kafka_network_requestmetrics_{timer}",
                f"Kafka's RequestMetrics {timer} by request, ms",
                [({"request": req}, hists[i]) for req, hists in timers],
            )

    # -- kafka.server:type=ReplicaManager ------------------------------------------------
    def _replica_manager(self) -> Iterator[Metric]:
        replicas = self.server.replicas
        c = replicas.partition_counts() if replicas else Counts()
        prefix = "kafka_server_replicamanager_"
        yield gauge(prefix + "partitioncount", "Partitions on this broker", c.hosted)
        yield gauge(prefix + "leadercount", "Partitions this broker leads", c.leaders)
        yield gauge(prefix + "underreplicatedpartitions", "Led, ISR < replicas", c.under_replicated)
        yield gauge(prefix + "underminisrpartitioncount", "Led, ISR < min ISR", c.under_min_isr)
        yield gauge(prefix + "atminisrpartitioncount", "Led, ISR = min ISR", c.at_min_isr)
        yield gauge(prefix + "offlinereplicacount", "Replicas whose log is offline", c.offline)
        shrinks, expands = replicas.isr_changes if replicas else (0, 0)
        yield CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks written", value=shrinks)
        yield CounterMetricFamily(prefix + "isrexpands", "ISR expands written", value=expands)

    # -- kafka.controller ----------------------------------------------------------------
    def _controller(self) -> Iterator[Metric]:
        ctl = self.server.controller
        active = ctl is not None and ctl.is_active
        topics = partitions = offline = 0
        if active:
            live = set(ctl.ctx.brokers)
            states = list(ctl.ctx.states.values())
            assign = list(ctl.ctx.assign.values())
            topics = len(assign)
            partitions = sum(len(a.partitions) for a in assign)
            offline = sum(1 for s in states if s.leader < 0 or s.leader not in live)
        prefix = "kafka_controller_kafkacontroller_"
        yield gauge(prefix + "activecontrollercount", "1 on the active controller", int(active))
        yield gauge(prefix + "offlinepartitionscount", "Partitions without a live leader", offline)
        yield gauge(prefix + "globalpartitioncount", "Partitions in the cluster", partitions)
        yield gauge(prefix + "globaltopiccount", "Topics in the cluster", topics)
        unclean = ctl.unclean_elections if ctl is not None else 0
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Unclean leader elections (UncleanLeaderElectionsPerSec)",
            value=unclean,
        )
        yield summary(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Leader elections after broker changes, ms (LeaderElectionRateAndTimeMs)",
            [({}, self.metrics.leader_elections.histogram)],
        )

    # -- kafka.server:type=DelayedOperationPurgatory ---------------------------------------
    def _purgatory(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests parked in a purgatory",
            labels=["delayedOperation"],
        )
        for operation, size in sorted(self.metrics.purgatory.size.items()):
            family.add_metric([operation], size)
        yield family

    # -- kafka.log:type=LogCleaner / LogCleanerManager ---------------------------------------
    def _cleaner(self) -> Iterator[Metric]:
        logs = self.server.logs
        if logs is None:
            return
        cleaner = logs.cleaner
        ratios = cleaner.dirty_ratios
        yield gauge(
            "kafka_log_logcleanermanager_max_dirty_percent",
            "Dirtiest compacted log's dirty share, percent",
            100.0 * max(ratios.values(), default=0.0),
        )
        by_dir = GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "Partitions the cleaner gave up on",
            labels=["logDirectory"],
        )
        counts = {str(d): 0 for d in cleaner.log_dirs}
        for tp in list(cleaner.uncleanable):
            lg = logs.get_log(*tp)
            if lg is not None:
                counts[str(lg.dir.parent)] = counts.get(str(lg.dir.parent), 0) + 1
        for log_dir, count in sorted(counts.items()):
            by_dir.add_metric([log_dir], count)
        yield by_dir
        by_bytes = GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_bytes",
            "Cleanable bytes of the partitions the cleaner gave up on",
            labels=["logDirectory"],
        )
        for log_dir, size in sorted(cleaner.uncleanable_bytes(logs.get_log).items()):
            by_bytes.add_metric([log_dir], size)
        yield by_bytes
        yield gauge(
            "kafka_log_logcleaner_deadthreadcount",
            "Dead cleaner threads: none can die, the cleaner runs in the log manager's tick",
            0,
        )
        yield gauge(
            "kafka_log_logcleaner_cleaner_recopy_percent",
            "Bytes rewritten / bytes read by the last clean, percent",
            100.0 * cleaner.last_recopy_ratio,
        )
        yield gauge(
            "kafka_log_logcleaner_max_clean_time_secs",
            "Duration of the last clean",
            cleaner.last_clean_secs,
        )
        yield gauge(
            "kafka_log_logcleaner_max_buffer_utilization_percent",
            "Offset map use of the last clean, percent",
            100.0 * cleaner.last_buffer_utilization,
        )
        yield gauge(
            "kafka_log_logcleaner_max_compaction_delay_secs",
            "Longest time a compacted log is past its max.compaction.lag.ms",
            cleaner.max_compaction_delay_ms / 1000.0,
        )
        yield gauge(
            "kafka_log_logcleanermanager_time_since_last_run_ms",
            "Since the cleaner last looked for a log to clean",
            max(time.time() * 1000 - cleaner.last_run_ms, 0),
        )
        yield from self._cleaner_partitions(cleaner, logs)

    def _cleaner_partitions(self, cleaner, logs) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        dirty = GaugeMetricFamily(
            "quill_log_cleaner_dirty_ratio", "Dirty share of a compacted log", labels=labels
        )
        last = GaugeMetricFamily(
            "quill_log_cleaner_last_clean_timestamp_seconds",
            "When the cleaner last cleaned a compacted log (0: not since start)",
            labels=labels,
        )
        stuck = GaugeMetricFamily(
            "quill_log_cleaner_uncleanable", "1: the cleaner gave up on it", labels=labels
        )
        # the compacted logs the cleaner looked at last time, and those it gave up on
        for tp in sorted(set(cleaner.dirty_ratios) | cleaner.uncleanable):
            if logs.get_log(*tp) is None:
                continue
            key = [tp[0], str(tp[1])]
            dirty.add_metric(key, cleaner.dirty_ratios.get(tp, 0.0))
            last.add_metric(key, cleaner.last_cleaned_ms.get(tp, 0) / 1000.0)
            stuck.add_metric(key, int(tp in cleaner.uncleanable))
        yield from (dirty, last, stuck)

    # -- kafka.server:type=Produce|Fetch|Request, user=, client-id= ----------------------
    def _quotas(self) -> Iterator[Metric]:
        quotas = self.server.quotas
        window_s = quotas.max_throttle_ms / 1000.0
        now = time.time()
        stats = list(quotas.stats.items())
        for key, sensor, rate_attr in QUOTA_TYPES:
            labels = ["user", "client_id"]
            rate = GaugeMetricFamily(
                f"kafka_server_{sensor}_{rate_attr}", f"{sensor} quota rate", labels=labels
            )
            throttle = GaugeMetricFamily(
                f"kafka_server_{sensor}_throttle_time",
                f"{sensor} throttle time of the last throttled request in the quota window, ms",
                labels=labels,
            )
            throttled = CounterMetricFamily(
                f"quill_quota_{sensor}_throttle_time_ms",
                f"{sensor} throttle time given, ms",
                labels=labels,
            )
            for (k, user, client), st in stats:
                if k != key:
                    continue
                who = [user, client]
                rate.add_metric(who, quotas.measured(k, user, client))
                recent = now - st.last_throttled_at <= window_s
                throttle.add_metric(who, st.last_throttle_ms if recent else 0)
                throttled.add_metric(who, st.throttle_time_ms)
            yield from (rate, throttle, throttled)

    # -- kafka.server:type=ZooKeeperClientMetrics, SessionExpireListener -------------------
    def _zookeeper(self) -> Iterator[Metric]:
        zk = self.metrics.zk
        yield summary(
            "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
            "ZooKeeper request latency, ms",
            [({}, zk.latency)],
        )
        for name, value, doc in (
            ("zookeeperexpires", zk.expires, "ZooKeeper session expiries"),
            ("zookeeperdisconnects", zk.disconnects, "ZooKeeper disconnects"),
            ("zookeepersyncconnects", zk.connects, "ZooKeeper (re)connects"),
        ):
            yield CounterMetricFamily(
                f"kafka_server_sessionexpirelistener_{name}", doc, value=value
            )
        yield gauge(
            "kafka_server_sessionexpirelistener_sessionstate_connected",
            "1 while the ZooKeeper session is connected",
            int(zk.connected),
        )

    # -- kafka.coordinator.group:type=GroupMetadataManager -----------------------------------
    def _groups(self) -> Iterator[Metric]:
        coordinator = self.server.group_coordinator
        groups = list(coordinator.manager.groups.values()) if coordinator else []
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield gauge(prefix + "numgroups", "Groups this broker coordinates", len(groups))
        for name, state in GROUP_STATES:
            count = sum(1 for g in groups if g.state.value == state)
            yield gauge(prefix + name, f"Groups in state {state}", count)
        offsets = sum(len(g.offsets) for g in groups)
        yield gauge(prefix + "numoffsets", "Committed offsets cached", offsets)

    # -- kafka.server:type=FetchSessionCache -------------------------------------------
    def _fetch_sessions(self) -> Iterator[Metric]:
        cache = getattr(self.server, "fetch_sessions", None)
        sessions = list(cache.sessions.values()) if cache is not None else []
        prefix = "kafka_server_fetchsessioncache_"
        yield gauge(prefix + "numincrementalfetchsessions", "Fetch sessions cached", len(sessions))
        yield gauge(
            prefix + "numincrementalfetchpartitionscached",
            "Partitions in the cached fetch sessions",
            sum(len(s.partitions) for s in sessions),
        )
        evictions = CounterMetricFamily(
            prefix + "incrementalfetchsessionevictions",
            "Fetch sessions evicted to make room (IncrementalFetchSessionEvictionsPerSec)",
        )
        evictions.add_metric([], cache.evictions if cache is not None else 0)
        yield evictions

    # -- kafka.network:type=SocketServer, and the event loop ----------------------------------
    def _loop(self) -> Iterator[Metric]:
        loop = self.metrics.loop
        yield gauge(
            "kafka_network_socketserver_networkprocessoravgidle_percent",
            "Share of time the broker's event loop thread was idle (0-1)",
            loop.idle_ratio,
        )
        yield gauge(
            "quill_event_loop_lag_seconds",
            "Longest event-loop delay seen over the last few seconds",
            loop.lag_s,
        )
        connections = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections",
            labels=["listener", "networkProcessor"],
        )
        connections.add_metric(["PLAINTEXT", "0"], len(self.server.sockets.connections))
        yield connections
        yield from self._connection_creation()
        yield from self._authentication()

    def _fetcher_stats(self) -> Iterator[Metric]:
        """kafka.server:type=FetcherStats,name=RequestsPerSec per replica fetcher
        (clientId ReplicaFetcherThread-<fetcher id>-<leader id>), as a counter."""
        family = CounterMetricFamily(
            "kafka_server_fetcherstats_requests",
            "Fetch requests sent by each replica fetcher (num.replica.fetchers per leader)",
            labels=["clientId"],
        )
        fetchers = getattr(self.server, "fetchers", None)
        for fetcher in list(fetchers.fetchers.values()) if fetchers is not None else []:
            family.add_metric([fetcher.name], fetcher.requests)
        yield family

    def _connection_creation(self) -> Iterator[Metric]:
        """KIP-612: connections accepted per listener, their rate and the acceptor's
        last throttle (socket-server-metrics connection-creation-total, and
        connection-accept-rate / connection-accept-throttle-time per listener)."""
        creation = self.server.sockets.quotas.creation
        prefix = "kafka_server_socket_server_metrics_"
        now_ms = time.monotonic() * 1000
        created = CounterMetricFamily(
            prefix + "connection_creation",
            "Connections accepted (connection-creation-total)",
            labels=["listener", "networkProcessor"],
        )
        rate = GaugeMetricFamily(
            prefix + "connection_accept_rate",
            "Connections accepted per second, as the KIP-612 quota measures it",
            labels=["listener"],
        )
        throttle = GaugeMetricFamily(
            prefix + "connection_accept_throttle_time",
            "The acceptor's last wait for max.connection.creation.rate, ms",
            labels=["listener"],
        )
        for listener in sorted(creation.created):
            created.add_metric([listener, "0"], creation.created[listener])
            rate.add_metric([listener], creation.rate(listener).measure(now_ms))
            throttle.add_metric([listener], creation.throttle_ms.get(listener, 0.0))
        yield from (created, rate, throttle)

    def _authentication(self) -> Iterator[Metric]:
        """kafka.server:type=socket-server-metrics,listener=L: SASL authentications and
        KIP-368 re-authentications per listener (one network processor: ours is 0)."""
        securities = getattr(self.server, "listener_security", {}).values()
        stats = [(s.name, s.sasl.stats) for s in securities if s.sasl is not None]
        prefix = "kafka_server_socket_server_metrics_"
        for attr, name in (
            ("successful_authentication", "successful_authentication_total"),
            ("successful_authentication_no_reauth", "successful_authentication_no_reauth_total"),
            ("failed_authentication", "failed_authentication_total"),
            ("successful_reauthentication", "successful_reauthentication_total"),
            ("failed_reauthentication", "failed_reauthentication_total"),
            ("expired_connections_killed", "expired_connections_killed_count"),
        ):
            doc, labels = (
                f"Kafka's {name.replace('_', '-')} of SASL listeners",
                ["listener", "networkProcessor"],
            )
            if name.endswith("_total"):
                family = CounterMetricFamily(prefix + name[: -len("_total")], doc, labels=labels)
            else:
                family = GaugeMetricFamily(prefix + name, doc, labels=labels)
            for listener, stat in stats:
                family.add_metric([listener, "0"], getattr(stat, attr))
            yield family
