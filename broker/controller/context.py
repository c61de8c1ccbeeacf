"""ControllerContext: the controller's picture of the cluster, and the requests it sends.

Loaded from ZooKeeper when a broker becomes controller, refreshed for exactly the
partitions and topics the controller changed (or leaders reported through
/isr_change_notification). From it the controller builds LeaderAndIsr for the
replicas of changed partitions, StopReplica for replicas that lost a partition, and
UpdateMetadata with the changed partitions (or all of them) for every live broker.
"""

from __future__ import annotations

from ..zk.client import KafkaZkClient
from ..zk.znodes import (
    SECURITY_PROTOCOL_IDS,
    BrokerIdsZNode,
    BrokerInfo,
    LeaderAndIsr,
    TopicAssignment,
    topic_id_bytes,
)

TopicPartition = tuple[str, int]
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete
EPOCH_DURING_DELETE = -2  # Kafka's LeaderAndIsr.EpochDuringDelete


class ControllerContext:
    def __init__(self, zk: KafkaZkClient, listener: str = "PLAINTEXT") -> None:
        self.zk = zk
        self.listener = listener  # inter.broker.listener.name: how brokers reach each other
        self.brokers: dict[int, BrokerInfo] = {}
        self.assign: dict[str, TopicAssignment] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        # Kafka's shuttingDownBrokerIds: asked for a controlled shutdown, still registered;
        # they lead nothing new and are left out of ISRs
        self.shutting_down: set[int] = set()

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        self.brokers, self.assign, self.states = {}, {}, {}
        self.refresh_brokers()
        self.refresh_topics(self.zk.get_all_topics())

    def refresh_brokers(self) -> tuple[set[int], set[int]]:
        """(joined, left) since the last look. A broker registered again meanwhile (a
        restart quicker than the watch, or a session that expired: a new registration
        timestamp or broker epoch) counts as joined,
        as Kafka's bouncedBrokerIds: it needs the full metadata and its LeaderAndIsr."""
        ids = {int(b) for b in self.zk.zk.get_children(BrokerIdsZNode.path)}
        left = set(self.brokers) - ids
        for broker_id in left:
            del self.brokers[broker_id]
        joined = set()
        for broker_id in ids:
            info = self.zk.get_broker(broker_id)
            old = self.brokers.get(broker_id)
            if info is not None and (
                old is None or old.timestamp != info.timestamp or old.epoch != info.epoch
            ):
                self.brokers[broker_id] = info
                joined.add(broker_id)
        return joined, left

    def refresh_topics(self, topics) -> dict[int, list[TopicPartition]]:
        """Re-read assignments and states of ``topics``; returns, per broker, the
        partitions it no longer replicates (reassigned away, or the topic deleted)."""
        dropped: dict[int, list[TopicPartition]] = {}
        for topic in topics:
            old = self.assign.get(topic)
            new = self.zk.get_topic_assignment(topic)
            old_parts = old.partitions if old else {}
            new_parts = new.partitions if new else {}
            for partition, replicas in old_parts.items():
                for broker in set(replicas) - set(new_parts.get(partition, [])):
                    dropped.setdefault(broker, []).append((topic, partition))
            if new is None:
                self.assign.pop(topic, None)
                for partition in old_parts:
                    self.states.pop((topic, partition), None)
            else:
                self.assign[topic] = new
                # only the partitions that have a state znode: none yet for a new topic
                for partition, state in self.zk.get_topic_partition_states(topic).items():
                    self.states[(topic, partition)] = state
        return dropped

    def refresh_states(self, keys) -> None:
        keys = [k for k in keys if k[0] in self.assign]
        for key, state in self.zk.get_partition_states(keys).items():
            self.states[key] = state

    # -- requests ----------------------------------------------------------------------------
    def replicas(self, key: TopicPartition) -> list[int]:
        assignment = self.assign.get(key[0])
        return list(assignment.partitions.get(key[1], [])) if assignment else []

    def leader_and_isr(self, keys, controller_id: int, epoch: int) -> dict[int, dict]:
        """One LeaderAndIsr v4 body per live broker that replicates any of ``keys``."""
        by_broker: dict[int, dict[str, list[dict]]] = {}
        leaders = set()
        for key in keys:
            state = self.states.get(key)
            assignment = self.assign.get(key[0])
            if state is None or assignment is None:
                continue
            leaders.add(state.leader)
            entry = _partition_entry(key[1], state, self.replicas(key))
            entry["adding_replicas"] = list(assignment.adding_replicas.get(key[1], []))
            entry["removing_replicas"] = list(assignment.removing_replicas.get(key[1], []))
            for broker in self.replicas(key):
                if broker in self.brokers:
                    by_broker.setdefault(broker, {}).setdefault(key[0], []).append(entry)
        live_leaders = []  # as Kafka: the live leaders of the partitions in the request
        for b in sorted(leaders & set(self.brokers)):
            host, port = self.brokers[b].endpoint(self.listener) or (None, -1)
            live_leaders.append({"broker_id": b, "host_name": host, "port": port})
        return {
            broker: {
                "controller_id": controller_id,
                "controller_epoch": epoch,
                "topic_states": [
                    {"topic_name": t, "partition_states": ps} for t, ps in sorted(topics.items())
                ],
                "live_leaders": live_leaders,
            }
            for broker, topics in by_broker.items()
        }

    def update_metadata(
        self,
        controller_id: int,
        epoch: int,
        keys=None,
        deleted: dict[TopicPartition, str] | None = None,
    ) -> dict:
        """An UpdateMetadata v7 body: every live broker and the partitions ``keys`` (every
        partition when None), and ``deleted`` ({partition: topic id}) with Kafka's
        deletion sentinel leader -2, as Kafka's sendUpdateMetadataRequest(brokers,
        partitions) and LeaderDuringDelete."""
        if keys is None:
            keys = [(t, p) for t, a in self.assign.items() for p in a.partitions]
        deleted = deleted or {}
        topic_ids = {t: topic_id for (t, _p), topic_id in deleted.items()}
        by_topic: dict[str, list[dict]] = {}
        sent = set()
        for key in sorted(keys):
            state = self.states.get(key)
            replicas = self.replicas(key)
            if state is not None and replicas:
                entry = _partition_entry(key[1], state, replicas)
                entry["offline_replicas"] = [b for b in replicas if b not in self.brokers]
                by_topic.setdefault(key[0], []).append(entry)
                sent.add(key)
        for key in sorted(set(deleted) - sent):  # unless created again meanwhile
            by_topic.setdefault(key[0], []).append(_deleted_entry(key[1], epoch))
        topics = []
        for name, partitions in sorted(by_topic.items()):
            assignment = self.assign.get(name)
            topic_id = assignment.topic_id if assignment else topic_ids[name]
            topics.append(
                {
                    "topic_name": name,
                    "topic_id": topic_id_bytes(topic_id),
                    "partition_states": partitions,
                }
            )
        brokers = []
        for broker_id, info in sorted(self.brokers.items()):
            endpoints = []
            for uri in info.endpoints:
                listener, rest = uri.split("://", 1)
                host, port = rest.rsplit(":", 1)
                protocol = SECURITY_PROTOCOL_IDS.get(info.protocol(listener), 0)
                endpoints.append(
                    {
                        "port": int(port),
                        "host": host,
                        "listener": listener,
                        "security_protocol": protocol,
                    }
                )
            brokers.append({"id": broker_id, "endpoints": endpoints, "rack": info.rack})
        return {
            "controller_id": controller_id,
            "controller_epoch": epoch,
            "topic_states": topics,
            "live_brokers": brokers,
        }

    @staticmethod
    def stop_replica(keys, controller_id: int, epoch: int, delete: bool = True) -> dict:
        by_topic: dict[str, list[dict]] = {}
        for topic, partition in keys:
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "leader_epoch": EPOCH_DURING_DELETE,
                    "delete_partition": delete,
                }
            )
        return {
            "controller_id": controller_id,
            "controller_epoch": epoch,
            "topic_states": [
                {"topic_name": t, "partition_states": ps} for t, ps in by_topic.items()
            ],
        }


def _partition_entry(partition: int, state: LeaderAndIsr, replicas) -> dict:
    """The fields LeaderAndIsr and UpdateMetadata partition states share."""
    return {
        "partition_index": partition,
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
        "zk_version": state.zk_version,
        "replicas": list(replicas),
    }


def _deleted_entry(partition: int, controller_epoch: int) -> dict:
    """A deleted partition in UpdateMetadata: Kafka's LeaderDuringDelete (-2)."""
    deleting = LeaderAndIsr(LEADER_DURING_DELETE, EPOCH_DURING_DELETE, [], controller_epoch, 0)
    return {**_partition_entry(partition, deleting, []), "offline_replicas": []}
