"""KafkaZkClient: the broker's operations on ZooKeeper, on kazoo.

Blocking calls (kazoo runs its own IO thread); the server calls them from a worker
thread with ``asyncio.to_thread`` or at start-up. Watches fire on kazoo's thread and
must be marshalled to the event loop by the caller.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from .security import ZkCredentials, zk_client
from .znodes import (
    PERSISTENT_PATHS,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    CompactRequestZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    ConfigType,
    ConsumerOffsetZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationZNode,
    LeaderAndIsr,
    LogDirEventNotificationZNode,
    ProducerIdBlockZNode,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
)

log = logging.getLogger(__name__)
MULTI_OPS = 1000  # znodes per multi-op: about 100 KB, well under jute.maxbuffer (1 MB)


class ZkError(RuntimeError):
    pass


class ControllerMovedError(ZkError):
    """A controller's write was refused because ``/controller_epoch`` has moved since it
    was elected: another broker is the controller now (Kafka's ControllerMovedException).
    Its writes check that znode's version in the same multi-op (Kafka's
    expectedControllerEpochZkVersion), so a controller that lost its session and carries
    on with an event it had started cannot overwrite its successor's decisions."""


class _FencedWrite:
    """A controller write sent as a multi-op (check /controller_epoch's version, then set
    the znode): ``get`` gives the new ZnodeStat, or raises BadVersionError/NoNodeError as
    a plain conditional set would, or ControllerMovedError when the check failed."""

    __slots__ = ("result", "path", "fence")

    def __init__(self, result, path: str, fence: int) -> None:
        self.result, self.path, self.fence = result, path, fence

    def get(self):
        check, written = self.result.get()
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            raise ControllerMovedError(
                f"not writing {self.path}: {ControllerEpochZNode.path} is no longer at "
                f"version {self.fence}, so another broker has become the controller"
            )
        if isinstance(written, Exception):
            raise written
        return written


class KafkaZkClient:
    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18000,
        credentials: ZkCredentials | None = None,
        set_acl: bool = False,
    ) -> None:
        """``credentials``: the SASL login (broker.zk.security); ``set_acl``: Kafka's
        zookeeper.set.acl, every znode created with secure ACLs."""
        self.connect = connect
        self.zk = zk_client(connect, session_timeout_ms / 1000.0, credentials, set_acl)
        self.sasl = credentials is not None
        self.session_timeout_ms = session_timeout_ms

    # -- lifecycle -----------------------------------------------------------------
    def start(self, timeout_s: float = 30.0) -> None:
        try:
            self.zk.start(timeout=timeout_s)
        except KazooTimeoutError:
            raise ZkError(
                f"Cannot reach ZooKeeper at {self.connect} within "
                f"zookeeper.connection.timeout.ms={timeout_s * 1000:.0f} "
                "(is it running? check zookeeper.connect"
                + (", and the SASL login of java.security.auth.login.config)" if self.sasl else ")")
            ) from None
        for path in PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    def close(self) -> None:
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            log.debug("error closing ZooKeeper client", exc_info=True)

    @property
    def session_id(self) -> int:
        return self.zk.client_id[0] if self.zk.client_id else 0

    # -- offsets of OffsetCommit v0 ------------------------------------------------------
    def set_consumer_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Kafka's KafkaZkClient.setOrCreateConsumerOffset."""
        path = ConsumerOffsetZNode.path(group, topic, partition)
        data = ConsumerOffsetZNode.encode(offset)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)

    def get_consumer_offset(self, group: str, topic: str, partition: int) -> int | None:
        try:
            data, _ = self.zk.get(ConsumerOffsetZNode.path(group, topic, partition))
        except NoNodeError:
            return None
        return ConsumerOffsetZNode.decode(data)

    # -- cluster id and brokers --------------------------------------------------------
    def get_or_create_cluster_id(self) -> str:
        try:
            data, _ = self.zk.get(ClusterIdZNode.path)
            return ClusterIdZNode.decode(data)
        except NoNodeError:
            pass
        new_id = ClusterIdZNode.new_id()
        try:
            self.zk.create(ClusterIdZNode.path, ClusterIdZNode.encode(new_id), makepath=True)
            return new_id
        except NodeExistsError:
            data, _ = self.zk.get(ClusterIdZNode.path)
            return ClusterIdZNode.decode(data)

    def keep_registered(
        self,
        info: BrokerInfo,
        on_lost: Callable[[], None] = lambda: None,
        on_registered: Callable[[int], None] = lambda epoch: None,
    ) -> None:
        """Re-create ``/brokers/ids/<id>`` after a session expiry (ephemerals die with it).

        ``on_lost()`` (kazoo's thread): the session expired, and the registration with it
        (kazoo's LOST). A connection that is merely down is not a lost session: ZooKeeper
        without a quorum expires no session, so a broker cut off from ZooKeeper learns of
        its expiry only once it is back, as Kafka's does. ``on_registered(epoch)``:
        registered again, with the new registration's broker epoch."""
        lost = threading.Event()

        def listener(state) -> None:
            if state == KazooState.LOST:
                lost.set()
                on_lost()
            elif state == KazooState.CONNECTED and lost.is_set():
                lost.clear()
                threading.Thread(
                    target=self._reregister, args=(info, on_registered), daemon=True
                ).start()

        self.zk.add_listener(listener)

    def _reregister(self, info: BrokerInfo, on_registered: Callable[[int], None]) -> None:
        log.warning("ZooKeeper session expired; registering broker %d again", info.id)
        try:
            epoch = self.register_broker(info, wait_s=self.session_timeout_ms / 1000.0 + 5)
        except Exception:
            log.exception("re-registering broker %d failed", info.id)
            return
        on_registered(epoch)

    def register_broker(self, info: BrokerInfo, wait_s: float) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral); returns the broker epoch (KIP-380:
        the znode's czxid).

        A node left by our own previous, crashed process disappears when its session
        expires, so we wait up to ``wait_s`` for that; a node that outlives the wait
        belongs to a live broker with the same id and start-up is refused.
        """
        path = BrokerIdZNode.path(info.id)
        deadline = time.monotonic() + wait_s
        warned = False
        while True:
            try:
                _, stat = self.zk.create(
                    path,
                    BrokerIdZNode.encode(info),
                    ephemeral=True,
                    makepath=True,
                    include_data=True,
                )
                return stat.czxid
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.session_id:
                    return stat.czxid
                if time.monotonic() > deadline:
                    raise ZkError(
                        f"broker.id {info.id} is already registered at {path} by another "
                        "live broker; give this broker a different broker.id"
                    ) from None
                if not warned:
                    log.warning(
                        "%s exists (left by a previous run?); waiting up to %.0fs for its "
                        "ZooKeeper session to expire",
                        path,
                        wait_s,
                    )
                    warned = True
                time.sleep(0.25)

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        try:
            data, stat = self.zk.get(BrokerIdZNode.path(broker_id))
        except NoNodeError:
            return None
        return BrokerIdZNode.decode(broker_id, data, stat.czxid)

    # -- controller ------------------------------------------------------------------
    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Create ``/controller``; on success bump ``/controller_epoch`` and return (the
        epoch, that znode's version after the bump: what the controller's writes check)."""
        try:
            self.zk.create(ControllerZNode.path, ControllerZNode.encode(broker_id), ephemeral=True)
        except NodeExistsError:
            return None
        while True:
            try:
                data, stat = self.zk.get(ControllerEpochZNode.path)
                epoch = ControllerEpochZNode.decode(data) + 1
                written = self.zk.set(
                    ControllerEpochZNode.path, ControllerEpochZNode.encode(epoch), stat.version
                )
                return epoch, written.version
            except NoNodeError:
                try:
                    self.zk.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(1))
                    return 1, 0
                except NodeExistsError:
                    continue
            except BadVersionError:
                continue

    def _set_async(self, path: str, data: bytes, version: int, fence: int | None):
        """A conditional set; with ``fence`` (the /controller_epoch version the writing
        controller was elected at) a multi-op that checks it first (_FencedWrite)."""
        if fence is None:
            return self.zk.set_async(path, data, version)
        txn = self.zk.transaction()
        txn.check(ControllerEpochZNode.path, fence)
        txn.set_data(path, data, version)
        return _FencedWrite(txn.commit_async(), path, fence)

    def get_controller_id(self) -> int | None:
        try:
            data, _ = self.zk.get(ControllerZNode.path)
        except NoNodeError:
            return None
        return ControllerZNode.decode(data)

    # -- topics ------------------------------------------------------------------------
    def get_all_topics(self) -> list[str]:
        return self.zk.get_children(TopicsZNode.path)

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        try:
            data, _ = self.zk.get(TopicZNode.path(topic))
        except NoNodeError:
            return None
        return TopicZNode.decode(data)

    def topic_exists(self, topic: str) -> bool:
        return self.zk.exists(TopicZNode.path(topic)) is not None

    def create_topic(self, topic: str, assignment: TopicAssignment, config: dict[str, str]) -> bool:
        """Write config then assignment in one transaction; False if the topic exists."""
        tx = self.zk.transaction()
        config_path = ConfigEntityZNode.path(ConfigType.TOPIC, topic)
        if self.zk.exists(config_path):
            tx.set_data(config_path, ConfigEntityZNode.encode(config))
        else:
            tx.create(config_path, ConfigEntityZNode.encode(config))
        tx.create(TopicZNode.path(topic), TopicZNode.encode(assignment))
        results = tx.commit()
        if any(isinstance(r, NodeExistsError) for r in results):
            return False
        for r in results:
            if isinstance(r, Exception):
                raise ZkError(f"creating topic {topic} failed: {r!r}")
        return True

    def set_topic_assignment(
        self, topic: str, assignment: TopicAssignment, fence: int | None = None
    ) -> None:
        """Overwrite the assignment (any version); ``fence``: as ``_set_async``."""
        self._set_async(TopicZNode.path(topic), TopicZNode.encode(assignment), -1, fence).get()

    def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            self.zk.create(DeleteTopicsZNode.topic_path(topic), makepath=True)
        except NodeExistsError:
            pass

    def topics_marked_for_deletion(self) -> list[str]:
        return self.zk.get_children(DeleteTopicsZNode.path)

    def delete_topic_znodes(self, topic: str) -> None:
        for path in (
            TopicZNode.path(topic),
            ConfigEntityZNode.path(ConfigType.TOPIC, topic),
            DeleteTopicsZNode.topic_path(topic),
            CompactRequestZNode.topic_path(topic),  # its compaction requests and results
        ):
            try:
                self.zk.delete(path, recursive=True)
            except NoNodeError:
                pass

    # -- partition state -------------------------------------------------------------
    def get_partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        try:
            data, stat = self.zk.get(TopicPartitionStateZNode.path(topic, partition))
        except NoNodeError:
            return None
        return TopicPartitionStateZNode.decode(data, stat.version)

    def create_partition_states(self, topic: str, states: dict[int, LeaderAndIsr]) -> None:
        """Create state znodes as Kafka does: ``partitions``, then each ``partitions/<n>``
        with its ``state``. Those go in multi-ops of MULTI_OPS znodes, several in flight
        (one round trip per batch: thousands of partitions in a second or two); a batch
        that fails because a znode of it exists already is created one znode at a time."""
        self._create_all([(TopicPartitionsZNode.path(topic), b"")])
        nodes = []
        for p, state in states.items():
            nodes.append((TopicPartitionZNode.path(topic, p), b""))
            nodes.append(
                (TopicPartitionStateZNode.path(topic, p), TopicPartitionStateZNode.encode(state))
            )
        batches = [nodes[i : i + MULTI_OPS] for i in range(0, len(nodes), MULTI_OPS)]
        pending = []
        for batch in batches:
            txn = self.zk.transaction()
            for path, data in batch:
                txn.create(path, data)
            pending.append((batch, txn.commit_async()))
        for batch, result in pending:
            if any(isinstance(r, Exception) for r in result.get()):
                self._create_all([(path, b"") for path, _ in batch[0::2]])
                self._create_all(batch[1::2])

    def _create_all(self, nodes: list[tuple[str, bytes]]) -> None:
        """Pipelined creates; a znode that exists already is left as it is."""
        pending = [(path, self.zk.create_async(path, data)) for path, data in nodes]
        for path, result in pending:
            try:
                result.get()
            except NodeExistsError:
                log.debug("%s already exists", path)

    def get_topic_partition_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        """The states of the partitions of ``topic`` that have one (pipelined reads of
        the ``partitions`` children only: none at all for a new topic)."""
        try:
            children = self.zk.get_children(TopicPartitionsZNode.path(topic))
        except NoNodeError:
            return {}
        found = self.get_partition_states([(topic, int(c)) for c in children if c.isdigit()])
        return {p: state for (_t, p), state in found.items()}

    def get_partition_states(
        self, items: list[tuple[str, int]]
    ) -> dict[tuple[str, int], LeaderAndIsr]:
        """Many state znodes at once, pipelined; missing ones are left out."""
        pending = [(key, self.zk.get_async(TopicPartitionStateZNode.path(*key))) for key in items]
        states = {}
        for key, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            states[key] = TopicPartitionStateZNode.decode(data, stat.version)
        return states

    def update_partition_states(
        self, states: dict[tuple[str, int], LeaderAndIsr], fence: int | None = None
    ) -> dict[tuple[str, int], int | None]:
        """Conditional writes, pipelined: new version per partition, None where lost.
        ``fence``: the writing controller's /controller_epoch version (``_set_async``);
        ControllerMovedError once every answer is in, if any write was refused by it."""
        pending = [
            (
                key,
                self._set_async(
                    TopicPartitionStateZNode.path(*key),
                    TopicPartitionStateZNode.encode(state),
                    state.zk_version,
                    fence,
                ),
            )
            for key, state in states.items()
        ]
        out = {}
        moved = None
        for key, result in pending:
            try:
                out[key] = result.get().version
            except (BadVersionError, NoNodeError):
                out[key] = None
            except ControllerMovedError as exc:
                out[key], moved = None, exc
        if moved is not None:
            raise moved
        return out

    def update_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, fence: int | None = None
    ) -> int | None:
        """Conditional write on ``state.zk_version``; returns the new version or None.
        ``fence``: as update_partition_states."""
        return self.update_partition_states({(topic, partition): state}, fence)[(topic, partition)]

    def notify_isr_change(self, partitions: list[tuple[str, int]]) -> None:
        """One /isr_change_notification/isr_change_<seq> naming ``partitions``."""
        path = f"{IsrChangeNotificationZNode.path}/{IsrChangeNotificationZNode.prefix}"
        self.zk.create(
            path, IsrChangeNotificationZNode.encode(partitions), sequence=True, makepath=True
        )

    def read_isr_change_notifications(self, children: list[str]) -> set[tuple[str, int]]:
        """The union of the partitions the notifications ``children`` name (pipelined
        reads; one gone already or unreadable is skipped)."""
        base = IsrChangeNotificationZNode.path
        pending = [(c, self.zk.get_async(f"{base}/{c}")) for c in children]
        keys: set[tuple[str, int]] = set()
        for child, result in pending:
            try:
                keys |= IsrChangeNotificationZNode.decode(result.get()[0])
            except NoNodeError:
                continue
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring malformed ISR change notification %s/%s", base, child)
        return keys

    def delete_isr_change_notifications(self, children: list[str]) -> None:
        base = IsrChangeNotificationZNode.path
        for result in [self.zk.delete_async(f"{base}/{c}") for c in children]:
            try:
                result.get()
            except NoNodeError:
                pass

    def notify_log_dir_failure(self, broker_id: int) -> None:
        """/log_dir_event_notification/log_dir_event_<seq>: a log dir of ours is offline."""
        path = f"{LogDirEventNotificationZNode.path}/{LogDirEventNotificationZNode.prefix}"
        self.zk.create(
            path, LogDirEventNotificationZNode.encode(broker_id), sequence=True, makepath=True
        )

    # -- configs ---------------------------------------------------------------------
    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        try:
            data, _ = self.zk.get(ConfigEntityZNode.path(entity_type, name))
        except NoNodeError:
            return {}
        return ConfigEntityZNode.decode(data)

    def config_children(self, entity_path: str) -> list[str]:
        """Names under ``/config/<entity_path>`` (``users``, ``clients``, ``users/u/clients``)."""
        try:
            return sorted(self.zk.get_children(ConfigEntityZNode.entity(entity_path)))
        except NoNodeError:
            return []

    def quota_entity_paths(self) -> list[str]:
        """Every client quota entity: ``clients/c``, ``users/u``, ``users/u/clients/c``."""
        client, user_type = ConfigType.CLIENT, ConfigType.USER
        paths = [ConfigType.entity(client, c) for c in self.config_children(client)]
        for user in self.config_children(user_type):
            user_path = ConfigType.entity(user_type, user)
            paths.append(user_path)
            under = f"{user_path}/{client}"
            paths += [ConfigType.entity(under, c) for c in self.config_children(under)]
        return paths

    def set_entity_config(self, entity_type: str, name: str, config: dict[str, str]) -> None:
        path = ConfigEntityZNode.path(entity_type, name)
        data = ConfigEntityZNode.encode(config)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)
        self.zk.create(
            f"{ConfigEntityChangeNotificationZNode.path}/{ConfigEntityChangeNotificationZNode.prefix}",
            ConfigEntityChangeNotificationZNode.encode(f"{entity_type}/{name}"),
            sequence=True,
            makepath=True,
        )

    # -- producer ids ------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """Claim the next block of producer ids with a versioned write (retry on race)."""
        path = ProducerIdBlockZNode.path
        size = ProducerIdBlockZNode.block_size
        while True:
            data, stat = self.zk.get(path)
            start = ProducerIdBlockZNode.decode(data)[1] + 1 if data else 0
            end = start + size - 1
            try:
                self.zk.set(path, ProducerIdBlockZNode.encode(broker_id, start, end), stat.version)
                return start, end
            except BadVersionError:
                continue
