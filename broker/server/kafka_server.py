"""KafkaServer: wires the broker together, starts it, runs its chores, stops it.

Start-up order follows Kafka's: load the logs (recovering after an unclean stop),
connect to ZooKeeper, learn the cluster id, open the listeners, start the metadata
sync and the controller elector, and register ``/brokers/ids/<id>`` last, so that a
registered broker is a broker that answers.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time

from ..client.connection import BrokerConnection
from ..controller.channel import ControllerChannel
from ..controller.controller import Controller
from ..coordinator.group import GroupCoordinator, GroupCoordinatorConfig
from ..coordinator.producer_id import ProducerIdManager
from ..coordinator.transaction import TransactionConfig, TransactionCoordinator
from ..log.config import LogConfig
from ..log.manager import LogManager
from ..metrics.http import MetricsServer
from ..metrics.registry import BrokerMetrics
from ..protocol.errors import ErrorCode, KafkaError
from ..quota.manager import ClientQuotaManager
from ..replica.fetcher import ReplicaFetcherManager
from ..replica.isr_propagation import IsrChangePropagation
from ..replica.manager import ReplicaManager
from ..replica.partition import Partition, PartitionState
from ..replica.selector import selector_for
from ..replica.throttle import UNTHROTTLED
from ..security.authorizer import AclAuthorizer
from ..security.credential_cache import CredentialCache
from ..zk.client import KafkaZkClient
from ..zk.znodes import BrokerInfo, ConfigType, LeaderAndIsr
from .apis import SUPPORTED, KafkaApis
from .cluster_sync import ClusterSync
from .compaction import CompactionRequests
from .config import BrokerConfig, parse_listener
from .connection_quotas import ConnectionQuotas, CreationRates, RequestMemoryPool
from .dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig, is_password, listener_rates
from .dynamic_listener import ListenerSslUpdater
from .fetch_session import FetchSessionCache
from .heap import HeapFreezer
from .listener_security import inter_broker_security, listener_securities
from .metadata_cache import MetadataCache
from .network import SocketServer
from .quotas import QuotaConfigSync

log = logging.getLogger(__name__)
# one ControlledShutdown attempt: Kafka's controller.socket.timeout.ms default (30 s)
CONTROLLED_SHUTDOWN_REQUEST_TIMEOUT_S = 30.0


class KafkaServer:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.dynamic = DynamicBrokerConfig(config.broker_id, config.raw)
        self.default_log_config = self.dynamic.log_config()
        self.topic_overrides: dict[str, dict[str, str]] = {}
        self.controller_epoch_seen = 0  # the newest controller this broker has heard from
        #: KIP-380: the czxid of our /brokers/ids/<id> registration (-1 before it); the
        #: controller's requests carry it, and older ones are refused (STALE_BROKER_EPOCH)
        self.broker_epoch = -1
        #: our ZooKeeper session (and registration) is gone and not made again yet
        self.zk_session_lost = False
        self.metadata_ready = asyncio.Event()  # set by the first UpdateMetadata
        self.cache = MetadataCache(config.broker_id)
        self.zk = KafkaZkClient(
            config["zookeeper.connect"],
            config["zookeeper.session.timeout.ms"],
            config.zookeeper_credentials,
            config["zookeeper.set.acl"],
        )
        self.logs: LogManager | None = None
        self.replicas: ReplicaManager | None = None
        self.heap: HeapFreezer | None = None
        self.cluster_sync: ClusterSync | None = None
        self.controller: Controller | None = None
        self.producer_ids = ProducerIdManager(self.zk, config.broker_id)
        self.isr_changes = IsrChangePropagation(self.zk.notify_isr_change)
        self._isr_propagation: asyncio.Task | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.quotas = ClientQuotaManager(
            config["quota.window.num"], config["quota.window.size.seconds"]
        )
        self.sockets = SocketServer(
            KafkaApis(self).handle,
            max_request_size=config["socket.request.max.bytes"],
            queued_max_requests=config["queued.max.requests"],
            send_buffer=config["socket.send.buffer.bytes"],
            receive_buffer=config["socket.receive.buffer.bytes"],
            quotas=ConnectionQuotas(
                config["max.connections"], config["max.connections.per.ip"], config.ip_overrides
            ),
            memory_pool=RequestMemoryPool(config["queued.max.request.bytes"]),
            max_idle_ms=config["connections.max.idle.ms"],
            failed_authentication_delay_ms=config["connection.failed.authentication.delay.ms"],
        )
        self.authorizer = AclAuthorizer.from_config(config)  # None: no authorization at all
        self.credential_cache = CredentialCache()  # SCRAM users, from /config/users
        self.listener_security = listener_securities(config, self.credential_cache)
        self.inter_broker_security = inter_broker_security(config)
        self.listener_ssl = ListenerSslUpdater(config, self.listener_security)
        self.sockets.quotas.creation = CreationRates(
            config["quota.window.num"], config["quota.window.size.seconds"] * 1000
        )
        # KIP-227, for followers and consumers
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.bound_ports: list[int] = []
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        names = {key: spec[0] for key, spec in SUPPORTED.items()}
        self.metrics = BrokerMetrics(self, names, enabled=config["quill.metrics.port"] > 0)
        self.metrics_server: MetricsServer | None = None
        if self.metrics.enabled:
            self.sockets.observe = self.metrics.requests.observe
            self.sockets.take_parked_ns = self.metrics.purgatory.take_parked_ns
            self.metrics.zk.instrument(self.zk.zk)

    # -- topic configs -------------------------------------------------------------------
    def topic_log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_props(
            self.topic_overrides.get(topic, {}), defaults=self.default_log_config
        )

    def on_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        if self.topic_overrides.get(topic) == overrides:
            return
        self.topic_overrides[topic] = overrides
        try:
            config = self.topic_log_config(topic)
        except KafkaError as exc:
            log.error("ignoring invalid config of topic %s: %s", topic, exc.message)
            return
        self.replicas.update_topic_config(topic, config)

    def broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """Where to reach a broker: its endpoint on inter.broker.listener.name."""
        info = self.cache.brokers.get(broker_id)
        return info.endpoint(self.config.endpoints.inter_broker) if info is not None else None

    def _in_metadata(self, topic: str, index: int) -> bool:
        """Whether the metadata cache knows the partition (Kafka answers
        NOT_LEADER_OR_FOLLOWER for those the ReplicaManager does not host yet)."""
        meta = self.cache.topics.get(topic)
        return meta is not None and index in meta.replicas

    async def _write_isr(self, part: Partition, new_isr: list[int], st: PartitionState) -> bool:
        """Conditional write of a new ISR to the partition's state znode (leader only),
        on the zk version of ``st``, the state the ISR was computed from."""
        proposed = LeaderAndIsr(
            st.leader, st.leader_epoch, new_isr, st.controller_epoch, st.zk_version
        )
        version = await asyncio.to_thread(
            self.zk.update_partition_state, part.topic, part.index, proposed
        )
        if version is None:
            log.info(
                "%s-%d: ISR update lost a race (zk version %d); waiting for the new state",
                part.topic,
                part.index,
                st.zk_version,
            )
            return False
        current = part.state  # a same-epoch state may have replaced `st` meanwhile: the
        # written ISR is still ZooKeeper's, and the HW must count every broker in it
        if current is st or (
            current is not None
            and current.leader_epoch == st.leader_epoch
            and current.zk_version < version
        ):
            current.isr, current.zk_version = list(new_isr), version
        part.pending_isr = None
        self.isr_changes.record(part.topic, part.index)  # told to the controller in batches
        return True

    # -- metadata from the controller ----------------------------------------------------
    def metadata_updated(self) -> None:
        self.metadata_ready.set()
        if self.cluster_sync is not None:
            self.cluster_sync.notify()

    async def wait_metadata(self, timeout_s: float = 10.0) -> None:
        """Right after start-up, until the controller's first UpdateMetadata arrives."""
        if not self.metadata_ready.is_set():
            try:
                await asyncio.wait_for(self.metadata_ready.wait(), timeout_s)
            except TimeoutError:
                log.warning("no UpdateMetadata from a controller yet; answering from what is known")

    async def controller_id(self) -> int:
        """The controller to name in Metadata and DescribeCluster (ClusterSync.controller_id)."""
        if self.cluster_sync is None:
            return self.cache.controller_id
        return await self.cluster_sync.controller_id()

    # -- dynamic broker configs (KIP-226) ----------------------------------------------------
    def on_broker_config(self, entity: str, config: dict[str, str]) -> None:
        """/config/brokers/<id> or <default> changed (a watch, or read at start-up)."""
        if self.dynamic.update(entity, config):
            log.info(
                "dynamic broker config now: broker %s, cluster default %s",
                {
                    k: "[hidden]" if is_password(k) else v
                    for k, v in self.dynamic.per_broker.items()
                },
                self.dynamic.default,
            )
            self._apply_dynamic()

    def _load_dynamic(self) -> None:
        """At start-up, before the logs load: both levels from ZooKeeper (zk thread)."""
        for entity in (str(self.config.broker_id), DEFAULT_ENTITY):
            self.dynamic.update(entity, self.zk.get_entity_config(ConfigType.BROKER, entity))

    def _apply_dynamic(self) -> None:
        """Put the effective dynamic configs to work, as Kafka's reconfigurables do."""
        dyn = self.dynamic
        old, self.default_log_config = self.default_log_config, dyn.log_config()
        if self.controller is not None:
            self.controller.set_unclean_default(
                self.default_log_config.unclean_leader_election_enable
            )
        self.sockets.quotas.reconfigure(
            dyn.value("max.connections"),
            dyn.value("max.connections.per.ip"),
            dyn.value("max.connections.per.ip.overrides"),
        )
        self.listener_ssl.apply(dyn.per_broker)
        endpoints = self.config.endpoints
        self.sockets.quotas.creation.reconfigure(
            dyn.value("max.connection.creation.rate"),
            listener_rates(dyn.merged()),
            endpoints.inter_broker if len(endpoints.bind) > 1 else None,
        )
        if self.logs is None or self.replicas is None:
            return
        self.logs.default_config = self.default_log_config
        self.logs.cleaner.backoff_ms = dyn.value("log.cleaner.backoff.ms")
        self.logs.cleaner.dedupe_buffer_size = dyn.value("log.cleaner.dedupe.buffer.size")
        self.logs.cleaner.io_max_bytes_per_second = dyn.value("log.cleaner.io.max.bytes.per.second")
        self.logs.recovery_threads = max(1, dyn.value("num.recovery.threads.per.data.dir"))
        self.fetchers.resize(dyn.value("num.replica.fetchers"))
        for key, quota in (
            ("leader.replication.throttled.rate", self.replicas.leader_quota),
            ("follower.replication.throttled.rate", self.replicas.follower_quota),
        ):
            value, _source = dyn.get(key)
            quota.rate = int(value) if value is not None else UNTHROTTLED
        if self.default_log_config != old:  # topics without an override take the new default
            topics = {tp[0] for tp, _ in self.logs.all_logs()} | set(self.topic_overrides)
            for topic in sorted(topics):
                try:
                    self.replicas.update_topic_config(topic, self.topic_log_config(topic))
                except KafkaError as exc:
                    log.error("topic %s keeps its config: %s", topic, exc.message)

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.config
        started = time.monotonic()
        loop = self._loop = asyncio.get_running_loop()
        log.info("starting broker %d", cfg.broker_id)
        await asyncio.to_thread(self.zk.start, cfg.zookeeper_connection_timeout_ms / 1000.0)
        cluster_id = await asyncio.to_thread(self.zk.get_or_create_cluster_id)
        self.cache.cluster_id = cluster_id
        if self.authorizer is not None:  # before the listeners open: no request goes unchecked
            await asyncio.to_thread(self.authorizer.start, self.zk.zk)
        await asyncio.to_thread(self._load_dynamic)  # the logs load with the dynamic defaults
        props = dict(self.dynamic.merged(), **{"log.dirs": ",".join(cfg.log_dirs)})
        self.logs = await asyncio.to_thread(
            LogManager.from_broker_props, props, broker_id=cfg.broker_id, cluster_id=cluster_id
        )
        self.logs.failure_channel.on_failure(
            lambda log_dir, reason: loop.call_soon_threadsafe(self._on_log_dir_failure, log_dir)
        )
        self.fetchers = ReplicaFetcherManager(
            cfg.broker_id, cfg, self.broker_endpoint, self.inter_broker_security
        )
        self.replicas = ReplicaManager(
            cfg.broker_id,
            self.logs,
            self.topic_log_config,
            self.fetchers,
            self._write_isr,
            self._in_metadata,
        )
        self.replicas.replica_selector = selector_for(cfg["replica.selector.class"])
        self.replicas.live_broker = lambda b: self.cache.brokers.get(b)  # replaced on updates
        self._apply_dynamic()
        self.heap = HeapFreezer(loop)
        self.replicas.on_partitions_changed = self.heap.partitions_changed
        self.group_coordinator = GroupCoordinator(
            cfg.broker_id, self.replicas, GroupCoordinatorConfig.from_broker(cfg)
        )
        self.group_coordinator.startup()
        self.replicas.on_leadership_change(self.group_coordinator.on_leadership_change)
        from .handlers.txn import TransactionMarkerChannel

        self.txn_markers = TransactionMarkerChannel(self)
        self.txn_coordinator = TransactionCoordinator(
            cfg.broker_id,
            self.replicas,
            TransactionConfig.from_broker(cfg),
            self.producer_ids,
            self.cache.leader_of,
            self.txn_markers.send,
        )
        self.txn_coordinator.startup()
        self.replicas.on_leadership_change(self.txn_coordinator.on_leadership_change)
        # quotas and SCRAM credentials loaded before any listener opens: a client's first
        # login to a starting broker must not be refused for credentials not read yet
        await asyncio.to_thread(
            QuotaConfigSync(self.zk, self.quotas, loop, self.credential_cache).start
        )
        bound_ports = {}
        for endpoint in cfg.endpoints.bind:
            bound = await self.sockets.listen(
                endpoint.host, endpoint.port, endpoint.name, self.listener_security[endpoint.name]
            )
            self.bound_ports.append(bound)
            bound_ports[endpoint.name] = bound
            log.info("listening on %s://%s:%d", endpoint.name, endpoint.host, bound)
        registered = cfg.endpoints.registered(bound_ports)
        self.cluster_sync = ClusterSync(
            self.zk, self.cache, self.replicas, loop, self.on_topic_config, self.on_broker_config
        )
        await asyncio.to_thread(self.cluster_sync.start)
        await asyncio.to_thread(CompactionRequests(self.zk, self.logs, cfg.broker_id, loop).start)
        await self._start_metrics(parse_listener(cfg.listeners[0])[1])
        self.controller = Controller(
            self.zk,
            cfg.broker_id,
            channel=ControllerChannel(loop, cfg.broker_id, self.inter_broker_security),
            unclean_default=self.default_log_config.unclean_leader_election_enable,
            auto_rebalance=cfg["auto.leader.rebalance.enable"],
            imbalance_interval_s=cfg["leader.imbalance.check.interval.seconds"],
            imbalance_percentage=cfg["leader.imbalance.per.broker.percentage"],
            listener=cfg.endpoints.inter_broker,
            election_timer=self.metrics.leader_elections.time,  # LeaderElectionRateAndTimeMs
        )
        # Kafka's legacy host/port fields: the PLAINTEXT endpoint, else null and -1
        legacy = next((e for e in registered if e.security_protocol == "PLAINTEXT"), None)
        info = BrokerInfo(
            cfg.broker_id,
            legacy.host if legacy is not None else None,
            legacy.port if legacy is not None else -1,
            [e.uri for e in registered],
            rack=cfg["broker.rack"],
            protocols={e.name: e.security_protocol for e in registered},
        )
        await asyncio.to_thread(self._register, info, cfg["zookeeper.session.timeout.ms"])
        self.zk.keep_registered(info, self._on_session_lost, self._on_registered)
        self.controller.start()
        self._isr_propagation = asyncio.ensure_future(self.isr_changes.run())
        self.heap.freeze()  # what start-up made lives as long as the broker
        log.info(
            "broker %d started in %.2fs (cluster id %s, %d partition logs)",
            cfg.broker_id,
            time.monotonic() - started,
            cluster_id,
            sum(1 for _ in self.logs.all_logs()),
        )

    def _register(self, info: BrokerInfo, session_timeout_ms: int) -> None:
        """(a thread) Register at /brokers/ids/<id>; the broker epoch is known before the
        controller can send a request carrying it."""
        self._on_registered(self.zk.register_broker(info, session_timeout_ms / 1000.0 + 5))

    def _on_registered(self, epoch: int) -> None:
        """(any thread) Registered with broker epoch ``epoch`` (KIP-380)."""
        self.broker_epoch, self.zk_session_lost = epoch, False
        log.info("registered broker %d (broker epoch %d)", self.config.broker_id, epoch)

    def _on_session_lost(self) -> None:
        """(kazoo's thread) Our ZooKeeper session expired, our registration with it: the
        controller has moved our leaderships to others, or is doing so. Stop leading
        until it has spoken to our next registration (issue 27: no zombie leader)."""
        self.zk_session_lost = True
        if not self._stop.is_set():
            self._loop.call_soon_threadsafe(self._fence_leaders)

    def _fence_leaders(self) -> None:
        if self.replicas is None or self._stop.is_set():
            return
        fenced = self.replicas.fence_leaders()
        log.warning(
            "ZooKeeper session lost: broker %d stops leading %d partition(s) until it has "
            "registered again and the controller's LeaderAndIsr says so",
            self.config.broker_id,
            fenced,
        )

    async def _start_metrics(self, listener_host: str) -> None:
        """The Prometheus endpoint (``quill.metrics.port``), and the event-loop monitor."""
        if not self.metrics.enabled:
            return
        host = self.config["quill.metrics.host"]
        self.metrics_server = MetricsServer(self.metrics.render)
        port = await self.metrics_server.start(
            listener_host if host is None else host, self.config["quill.metrics.port"]
        )
        self.metrics.loop.start()
        log.info("metrics endpoint on port %d", port)

    def _on_log_dir_failure(self, log_dir) -> None:
        """Kafka's ReplicaManager.handleLogDirFailure: stop following the dir's
        partitions, tell the controller through ZooKeeper, and stop the broker when no
        log dir is left."""
        gone = self.replicas.on_log_dir_offline(log_dir)
        log.error("log dir %s offline: %d partition(s) there stop serving", log_dir, len(gone))
        if not self.logs.online_dirs:
            log.error("all log dirs (%s) have failed; shutting down", self.config.log_dirs)
            self.stop()
            return
        task = asyncio.ensure_future(
            asyncio.to_thread(self.zk.notify_log_dir_failure, self.config.broker_id)
        )
        task.add_done_callback(
            lambda t: (
                t.cancelled()
                or t.exception() is None
                or log.error("cannot notify the controller: %r", t.exception())
            )
        )

    async def run(self) -> None:
        await self.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        chores = asyncio.ensure_future(self._chores())
        await self._stop.wait()
        log.info("shutting down broker %d", self.config.broker_id)
        chores.cancel()
        await self.shutdown()

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away before we stop (SIGTERM)."""
        started = time.monotonic()
        await self.fetchers.shutdown()  # stop following, so no leader takes us back into an ISR
        deadline = started + 30.0
        retries = self.config["controlled.shutdown.max.retries"]
        backoff_s = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        for attempt in range(1, retries + 1):
            try:  # a busy controller must not hold the shutdown: each attempt is bounded
                remaining = await asyncio.wait_for(
                    self._request_controlled_shutdown(), CONTROLLED_SHUTDOWN_REQUEST_TIMEOUT_S
                )
            except Exception as exc:  # noqa: BLE001 - the controller may be moving: retry
                log.info("controlled shutdown attempt failed (%r); retrying", exc)
                remaining = None
            if remaining == []:
                await self._wait_leaderships_gone(deadline)
                log.info("controlled shutdown done in %.2fs", time.monotonic() - started)
                return
            if remaining:
                log.info(
                    "controlled shutdown attempt %d/%d: %d partition(s) still led here",
                    attempt,
                    retries,
                    len(remaining),
                )
            if attempt < retries:
                await asyncio.sleep(backoff_s)
        log.warning(
            "controlled shutdown did not complete after %d attempts; stopping anyway", retries
        )

    async def _request_controlled_shutdown(self) -> list | None:
        controller_id = self.cache.controller_id
        if controller_id == self.config.broker_id and self.controller.is_active:
            return await asyncio.wrap_future(
                self.controller.submit(
                    "controlled_shutdown", self.config.broker_id, self.broker_epoch
                )
            )
        endpoint = self.broker_endpoint(controller_id)
        if endpoint is None:
            return None
        conn = BrokerConnection(
            *endpoint,
            client_id=f"broker-{self.config.broker_id}",
            security=self.inter_broker_security,
        )
        await conn.connect()
        try:
            resp = await conn.request(
                7,
                3,
                {"broker_id": self.config.broker_id, "broker_epoch": self.broker_epoch},
                timeout_s=CONTROLLED_SHUTDOWN_REQUEST_TIMEOUT_S,
            )
        finally:
            await conn.close()
        if resp.error_code != ErrorCode.none:
            return None
        return [(r.topic_name, r.partition_index) for r in resp.remaining_partitions]

    async def _wait_leaderships_gone(self, deadline: float) -> None:
        """Until our cache shows the moves, so clients get NOT_LEADER from here, not data."""
        while time.monotonic() < deadline:
            led = [
                p
                for p in self.replicas.partitions.values()
                if p.is_leader
                and p.state is not None
                and len(p.state.replicas) > 1
                and any(b != self.config.broker_id and self.cache.alive(b) for b in p.state.isr)
            ]
            if not led:
                return
            try:
                await asyncio.wait_for(
                    self.cluster_sync.changed.wait(), deadline - time.monotonic()
                )
            except TimeoutError:
                return

    async def shutdown(self) -> None:
        if self.config["controlled.shutdown.enable"] and self.cluster_sync is not None:
            await self._controlled_shutdown()
        if self.controller is not None:
            self.controller.stop()
            if self.controller.channel is not None:
                await self.controller.channel.aclose()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if self.txn_coordinator is not None:
            self.txn_coordinator.shutdown()
            await self.txn_markers.close()
        await self.fetchers.shutdown()
        await self.sockets.close()
        for security in self.listener_security.values():
            security.close()
        if self._isr_propagation is not None:
            self._isr_propagation.cancel()
            await self.isr_changes.maybe_propagate(force=True)
        if self.metrics_server is not None:
            self.metrics.loop.stop()
            await self.metrics_server.close()
        await asyncio.to_thread(self.zk.close)
        if self.heap is not None:
            self.heap.close()
        if self.logs is not None:
            self.logs.close()
        log.info("broker %d stopped cleanly", self.config.broker_id)

    def stop(self) -> None:
        self._stop.set()

    async def _chores(self) -> None:
        """Flush by time, retention, deletions, checkpoints: whatever is due, each tick."""
        tick_s = min(
            0.5,
            self.config["log.retention.check.interval.ms"] / 1000.0,
            self.config["replica.lag.time.max.ms"] / 4000.0,
        )
        while True:
            await asyncio.sleep(tick_s)
            try:
                due: list[str] = []
                self.logs.tick(checkpoints=due)
                self.replicas.shrink_lagging_isrs(self.config["replica.lag.time.max.ms"])
                if due:  # checkpoint files: computed and written off the event loop
                    self.logs.fail_dirs(await asyncio.to_thread(self.logs.checkpoint_job(due)))
            except Exception:
                log.exception("log maintenance failed; will retry")
