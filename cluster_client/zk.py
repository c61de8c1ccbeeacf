"""Reading (and, for quotas, writing) Kafka's ZooKeeper paths.

Paths and JSON come from broker.zk.znodes (pure codecs, no broker running). One
KazooClient per cluster (cluster_client.clusters), started on first use; reads of many znodes go out at once
with get_async so a 1,000-partition topic costs one round trip's wait, not 1,000.
"""

from __future__ import annotations

import re
import threading
from dataclasses import asdict

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker.zk.security import zk_client
from broker.zk.znodes import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    ControllerZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
)
from cluster_client import clusters
from cluster_client.errors import ClusterUnavailable, NotFound

_locks_guard = threading.Lock()  # guards _locks only: held for a dict lookup, never for I/O
_locks: dict[str, threading.Lock] = {}  # cluster name -> the lock around its client
_clients: dict[str, tuple[KazooClient, str]] = {}  # cluster name -> (client, its connect)
ZK_TIMEOUT_S = 5.0


def _lock_of(name: str) -> threading.Lock:
    """One lock per cluster: while one cluster's ZooKeeper is down, its connect attempts
    (up to ZK_TIMEOUT_S each) hold up only that cluster's pages, not the others'."""
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


def client() -> KazooClient:
    """The current cluster's ZooKeeper client (one per cluster, started on first use)."""
    cluster = clusters.current()
    with _lock_of(cluster.name):
        zk, connect = _clients.get(cluster.name, (None, None))
        wanted = cluster.zookeeper_connect
        if zk is None or not zk.connected or connect != wanted:
            if zk is not None:
                zk.stop()
                zk.close()
            zk = zk_client(wanted, ZK_TIMEOUT_S, cluster.zookeeper_credentials)
            try:
                zk.start(timeout=ZK_TIMEOUT_S)
            except Exception as exc:  # kazoo raises its own timeout type
                _clients.pop(cluster.name, None)
                raise ClusterUnavailable(f"ZooKeeper at {wanted} did not answer: {exc}") from exc
            _clients[cluster.name] = (zk, wanted)
        return zk


def reset() -> None:
    """Forget the clients (tests point the console at another ZooKeeper)."""
    with _locks_guard:
        names = list(_locks)
    for name in names:
        with _lock_of(name):
            zk, _ = _clients.pop(name, (None, None))
            if zk is not None:
                zk.stop()
                zk.close()


def get_many(paths: list[str]) -> dict[str, bytes | None]:
    """Data of many znodes at once; None for those that do not exist."""
    zk = client()
    pending = [(p, zk.get_async(p)) for p in paths]
    out: dict[str, bytes | None] = {}
    for path, result in pending:
        try:
            out[path] = result.get(timeout=ZK_TIMEOUT_S)[0]
        except NoNodeError:
            out[path] = None
    return out


def children(path: str) -> list[str]:
    try:
        return client().get_children(path)
    except NoNodeError:
        return []


def broker_ids() -> list[int]:
    return sorted(int(b) for b in children(BrokerIdsZNode.path))


def brokers() -> list[dict]:
    """Registered (alive) brokers: id, host, port, rack, endpoints."""
    ids = broker_ids()
    data = get_many([BrokerIdZNode.path(b) for b in ids])
    out = []
    for b in ids:
        raw = data[BrokerIdZNode.path(b)]
        if raw is not None:
            info = asdict(BrokerIdZNode.decode(b, raw))
            info.pop("timestamp", None)
            out.append(info)
    return out


def controller() -> int | None:
    try:
        return ControllerZNode.decode(client().get(ControllerZNode.path)[0])
    except (NoNodeError, ValueError, KeyError):
        return None


def topic_names() -> list[str]:
    return sorted(children(TopicsZNode.path))


def assignments(topics: list[str]) -> dict[str, dict[int, list[int]]]:
    """topic -> partition -> replicas, for topics that exist."""
    data = get_many([TopicZNode.path(t) for t in topics])
    return {
        t: TopicZNode.decode(raw).partitions
        for t in topics
        if (raw := data[TopicZNode.path(t)]) is not None
    }


def assignment(topic: str) -> dict[int, list[int]]:
    found = assignments([topic])
    if topic not in found:
        raise NotFound(f"Topic {topic!r} does not exist.", "topic")
    return found[topic]


def partition_states(parts: list[tuple[str, int]]) -> dict[tuple[str, int], dict]:
    """(topic, partition) -> {leader, leader_epoch, isr}; partitions with no state yet
    (being created) are left out."""
    paths = [TopicPartitionStateZNode.path(t, p) for t, p in parts]
    data = get_many(paths)
    out = {}
    for (t, p), path in zip(parts, paths, strict=True):
        raw = data[path]
        if raw is not None:
            state = TopicPartitionStateZNode.decode(raw)
            out[(t, p)] = {
                "leader": state.leader,
                "leader_epoch": state.leader_epoch,
                "isr": state.isr,
            }
    return out


def entity_config(entity_path: str) -> dict[str, str]:
    """/config/<entity_path>, e.g. topics/orders, users/alice/clients/app-1."""
    try:
        return ConfigEntityZNode.decode(client().get(ConfigEntityZNode.entity(entity_path))[0])
    except NoNodeError:
        return {}


def set_entity_config(entity_path: str, config: dict[str, str]) -> None:
    """Write /config/<entity_path> and a change notification, as kafka-configs does, so
    brokers pick the change up. An empty config is written as {} (Kafka keeps the znode)."""
    zk = client()
    path = ConfigEntityZNode.entity(entity_path)
    data = ConfigEntityZNode.encode(config)
    tx = zk.transaction()
    if zk.exists(path):
        tx.set_data(path, data)
    else:
        zk.ensure_path(path.rsplit("/", 1)[0])
        tx.create(path, data)
    notice = ConfigEntityChangeNotificationZNode
    zk.ensure_path(notice.path)
    tx.create(f"{notice.path}/{notice.prefix}", notice.encode(entity_path), sequence=True)
    results = tx.commit()
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise ClusterUnavailable(f"ZooKeeper refused the change to {path}: {failed[0]!r}")


def entities(entity_type: str) -> list[str]:
    """Names under /config/<entity_type> (users, clients)."""
    return sorted(children(ConfigEntityZNode.entity(entity_type)))


def server_stats() -> dict:
    """ZooKeeper's `srvr` four-letter word, parsed: mode, latency, node count, ..."""
    try:
        text = client().command(b"srvr")
    except Exception as exc:  # noqa: BLE001 - a health probe reports any failure
        return {"ok": False, "error": str(exc)}
    stats = {"ok": True, "connect": clusters.current().zookeeper_connect}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value:
            stats[key.strip().lower().replace(" ", "_").replace("/", "_")] = value.strip()
    if "zookeeper_version" in stats:
        stats["zookeeper_version"], stats["zookeeper_built"] = clean_version(
            stats["zookeeper_version"]
        )
    return stats


def clean_version(srvr_version: str) -> tuple[str, str]:
    """`3.8.0-${mvngit.commit.id}, built on 2023-..` -> ("3.8.0", "2023-.."): the
    release without the build's unexpanded (or commit id) suffix, and the build date."""
    release, _, built = srvr_version.partition(",")
    release = re.sub(r"-(\$\{[^}]*\}|[0-9a-f]{7,40})$", "", release.strip())
    return release, built.strip().removeprefix("built on ").strip()
