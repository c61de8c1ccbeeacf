"""Every ZooKeeper path Quill uses, with its JSON exactly as Kafka writes it.

One small class per znode (after Kafka's ``kafka.zk.ZkData``): ``path(...)``,
``encode(...) -> bytes`` and ``decode(bytes) -> value``. Nothing here talks to
ZooKeeper; ``broker.zk.client`` does.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(int(time.time() * 1000))


class ClusterZNode:
    path = "/cluster"


class ClusterIdZNode:
    path = ClusterZNode.path + "/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes) -> str:
        return json.loads(data)["id"]

    @staticmethod
    def new_id() -> str:
        """Kafka's cluster ids: a random UUID in URL-safe base64 without padding."""
        return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class BrokersZNode:
    path = "/brokers"


class BrokerIdsZNode:
    path = BrokersZNode.path + "/ids"


class BrokerSequenceIdZNode:
    path = BrokersZNode.path + "/seqid"


#: Kafka's SecurityProtocol names and ids (UpdateMetadata carries the ids)
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


@dataclass
class BrokerInfo:
    """A registered broker. ``endpoints`` are ``LISTENER://host:port``; ``protocols`` maps
    each listener name to its security protocol (``listener_security_protocol_map``);
    ``host``/``port`` are the legacy fields (its first PLAINTEXT endpoint)."""

    id: int
    host: str
    port: int
    endpoints: list[str]
    rack: str | None = None
    timestamp: str = field(default_factory=_now_ms)
    protocols: dict[str, str] = field(default_factory=dict)
    #: Kafka's broker epoch (KIP-380): the czxid of this registration's znode, a new and
    #: larger one each time the broker registers; -1 when not read from ZooKeeper
    epoch: int = -1

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of this broker on the named listener; None if it has none."""
        for uri in self.endpoints:
            name, rest = uri.split("://", 1)
            if name == listener:
                host, port = rest.rsplit(":", 1)
                return host.strip("[]"), int(port)
        return None

    def protocol(self, listener: str) -> str:
        return self.protocols.get(listener, listener)


class BrokerIdZNode:
    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path}/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        names = [ep.split("://", 1)[0] for ep in info.endpoints]
        protocols = {name: info.protocol(name) for name in names}
        body = {
            "listener_security_protocol_map": protocols,
            "endpoints": info.endpoints,
            "jmx_port": -1,
            "features": {},
            "host": info.host,
            "timestamp": info.timestamp,
            "port": info.port,
            "version": 5,
        }
        if info.rack is not None:
            body["rack"] = info.rack
        return _dumps(body)

    @staticmethod
    def decode(broker_id: int, data: bytes, czxid: int = -1) -> BrokerInfo:
        """``czxid``: the znode's creation zxid, the registration's broker epoch."""
        body = json.loads(data)
        endpoints = body.get("endpoints") or [f"PLAINTEXT://{body['host']}:{body['port']}"]
        host, port = body.get("host"), body.get("port")
        if not host or port in (None, -1):
            rest = endpoints[0].split("://", 1)[1]
            host, port = rest.rsplit(":", 1)
        return BrokerInfo(
            id=broker_id,
            host=host,
            port=int(port),
            endpoints=endpoints,
            rack=body.get("rack"),
            timestamp=body.get("timestamp", ""),
            protocols=dict(body.get("listener_security_protocol_map") or {}),
            epoch=czxid,
        )


class TopicsZNode:
    path = BrokersZNode.path + "/topics"


@dataclass
class TopicAssignment:
    """``/brokers/topics/<t>``: partition -> replica list, plus the topic id."""

    partitions: dict[int, list[int]]
    topic_id: str = field(default_factory=lambda: TopicZNode.new_topic_id())
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)


class TopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path}/{topic}"

    @staticmethod
    def new_topic_id() -> str:
        return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        def strkeys(d: dict[int, list[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(d.items())}

        return _dumps(
            {
                "partitions": strkeys(assignment.partitions),
                "topic_id": assignment.topic_id,
                "adding_replicas": strkeys(assignment.adding_replicas),
                "removing_replicas": strkeys(assignment.removing_replicas),
                "version": 3,
            }
        )

    @staticmethod
    def decode(data: bytes) -> TopicAssignment:
        body = json.loads(data)

        def intkeys(d: dict | None) -> dict[int, list[int]]:
            return {int(p): [int(b) for b in r] for p, r in (d or {}).items()}

        return TopicAssignment(
            partitions=intkeys(body.get("partitions")),
            topic_id=body.get("topic_id") or TopicZNode.new_topic_id(),
            adding_replicas=intkeys(body.get("adding_replicas")),
            removing_replicas=intkeys(body.get("removing_replicas")),
        )


def topic_id_bytes(topic_id: str) -> bytes:
    """The 16 bytes of a base64 topic id, as the wire's uuid fields carry it."""
    return base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))


@dataclass
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1


class TopicPartitionStateZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return TopicPartitionZNode.path(topic, partition) + "/state"

    @staticmethod
    def encode(state: LeaderAndIsr) -> bytes:
        return _dumps(
            {
                "controller_epoch": state.controller_epoch,
                "leader": state.leader,
                "version": 1,
                "leader_epoch": state.leader_epoch,
                "isr": list(state.isr),
            }
        )

    @staticmethod
    def decode(data: bytes, zk_version: int = -1) -> LeaderAndIsr:
        body = json.loads(data)
        return LeaderAndIsr(
            leader=body["leader"],
            leader_epoch=body["leader_epoch"],
            isr=list(body["isr"]),
            controller_epoch=body["controller_epoch"],
            zk_version=zk_version,
        )


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return TopicZNode.path(topic) + "/partitions"


class TopicPartitionZNode:
    """``/brokers/topics/<topic>/partitions/<n>``: no data, the parent of its state."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{partition}"


class ConfigType:
    """Kafka's ConfigType: the entity types under ``/config`` (and in change notifications)."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"
    IP = "ips"
    PERSISTENT = (TOPIC, CLIENT, USER, BROKER)  # created at start-up, as Kafka does

    @staticmethod
    def entity(entity_type: str, name: str) -> str:
        """``topics/orders``: an entity's path below ``/config`` (notifications name it so)."""
        return f"{entity_type}/{name}"


class ConfigEntityZNode:
    """``/config/<type>/<name>``: ``{"version":1,"config":{...}}`` for topics, clients, users."""

    root = "/config"

    @staticmethod
    def type_path(entity_type: str) -> str:
        """``/config/<type>``: the parent of every entity of that ``ConfigType``."""
        return f"{ConfigEntityZNode.root}/{entity_type}"

    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"{ConfigEntityZNode.type_path(entity_type)}/{name}"

    @staticmethod
    def entity(entity_path: str) -> str:
        """``topics/orders``, ``users/alice/clients/app`` or just ``users`` -> its znode."""
        return f"{ConfigEntityZNode.root}/{entity_path}"

    @staticmethod
    def encode(config: dict[str, str]) -> bytes:
        return _dumps({"version": 1, "config": dict(sorted(config.items()))})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        if not data:
            return {}
        return dict(json.loads(data).get("config") or {})


class ConfigEntityChangeNotificationZNode:
    path = ConfigEntityZNode.root + "/changes"
    prefix = "config_change_"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return _dumps({"version": 2, "entity_path": entity_path})


class ControllerZNode:
    path = "/controller"

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dumps({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})

    @staticmethod
    def decode(data: bytes) -> int:
        return int(json.loads(data)["brokerid"])


class ControllerEpochZNode:
    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data)


class AdminZNode:
    path = "/admin"


class DelegationTokenAuthZNode:
    """``/delegation_token``; its ``tokens`` child holds secrets (Kafka's DelegationTokensZNode)."""

    path = "/delegation_token"
    tokens_path = path + "/tokens"


class DeleteTopicsZNode:
    path = AdminZNode.path + "/delete_topics"

    @staticmethod
    def topic_path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


class ProducerIdBlockZNode:
    """``/latest_producer_id_block``: blocks of 1000 producer ids handed out in turn."""

    path = "/latest_producer_id_block"
    block_size = 1000

    @staticmethod
    def encode(broker_id: int, start: int, end: int) -> bytes:
        return _dumps(
            {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
        )

    @staticmethod
    def decode(data: bytes) -> tuple[int, int]:
        body = json.loads(data)
        return int(body["block_start"]), int(body["block_end"])


class PreferredReplicaElectionZNode:
    path = AdminZNode.path + "/preferred_replica_election"

    @staticmethod
    def encode(partitions: list[tuple[str, int]]) -> bytes:
        return _dumps(
            {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        )

    @staticmethod
    def decode(data: bytes) -> list[tuple[str, int]]:
        return [(p["topic"], int(p["partition"])) for p in json.loads(data).get("partitions", [])]


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: the reassignments in progress, Kafka's JSON
    ``{"version":1,"partitions":[{"topic","partition","replicas"}]}``."""

    path = AdminZNode.path + "/reassign_partitions"

    @staticmethod
    def encode(pending: dict[tuple[str, int], list[int]]) -> bytes:
        return _dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": t, "partition": p, "replicas": list(r)}
                    for (t, p), r in sorted(pending.items())
                ],
            }
        )

    @staticmethod
    def decode(data: bytes) -> dict[tuple[str, int], list[int]]:
        return {
            (p["topic"], int(p["partition"])): [int(b) for b in p["replicas"]]
            for p in json.loads(data).get("partitions", [])
        }


@dataclass
class CompactRequest:
    """A "compact now" request (Quill's; Kafka has no API for it)."""

    id: str
    partitions: list[int] | None = None  # None: every partition of the topic
    roll: bool = True
    clean: bool = True  # False: only report the cleaner's standing figures


class CompactRequestZNode:
    """``/admin/compact/<topic>``: ``{"version":1,"partitions":[...]|null,"id":..,"roll":true,
    "clean":true}`` (``clean: false`` asks only for the cleaner's standing figures),
    watched by every broker; each broker hosting a replica of those partitions compacts
    it now and writes ``results/<broker id>`` below (see docs/internal-interfaces.md)."""

    path = AdminZNode.path + "/compact"

    @staticmethod
    def topic_path(topic: str) -> str:
        return f"{CompactRequestZNode.path}/{topic}"

    @staticmethod
    def encode(request: CompactRequest) -> bytes:
        return _dumps(
            {
                "version": 1,
                "partitions": request.partitions,
                "id": request.id,
                "roll": request.roll,
                "clean": request.clean,
            }
        )

    @staticmethod
    def decode(data: bytes) -> CompactRequest:
        body = json.loads(data)
        parts = body.get("partitions")
        return CompactRequest(
            id=str(body.get("id") or ""),
            partitions=None if parts is None else [int(p) for p in parts],
            roll=bool(body.get("roll", True)),
            clean=bool(body.get("clean", True)),
        )


class CompactResultZNode:
    """``/admin/compact/<topic>/results/<broker id>``: what one broker's compaction did,
    ``{"version":1,"id":..,"broker":..,"finished_ms":..,"partitions":[{...}]}``."""

    @staticmethod
    def results_path(topic: str) -> str:
        return CompactRequestZNode.topic_path(topic) + "/results"

    @staticmethod
    def path(topic: str, broker_id: int) -> str:
        return f"{CompactResultZNode.results_path(topic)}/{broker_id}"

    @staticmethod
    def encode(request_id: str, broker_id: int, finished_ms: int, partitions: list[dict]) -> bytes:
        return _dumps(
            {
                "version": 1,
                "id": request_id,
                "broker": broker_id,
                "finished_ms": finished_ms,
                "partitions": partitions,
            }
        )

    @staticmethod
    def decode(data: bytes) -> dict:
        return json.loads(data)


class IsrChangeNotificationZNode:
    path = "/isr_change_notification"
    prefix = "isr_change_"

    @staticmethod
    def encode(partitions: list[tuple[str, int]]) -> bytes:
        return _dumps(
            {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
        )

    @staticmethod
    def decode(data: bytes) -> set[tuple[str, int]]:
        return {(p["topic"], int(p["partition"])) for p in json.loads(data)["partitions"]}


class LogDirEventNotificationZNode:
    """A broker's log dir went offline (Kafka's LogDirEventNotificationZNode); the
    controller reads, acts on and deletes each sequential child."""

    path = "/log_dir_event_notification"
    prefix = "log_dir_event_"
    LOG_DIR_FAILURE = 1

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dumps(
            {
                "version": 1,
                "broker": broker_id,
                "event": LogDirEventNotificationZNode.LOG_DIR_FAILURE,
            }
        )

    @staticmethod
    def decode(data: bytes) -> int:
        """The broker id of the event."""
        return int(json.loads(data)["broker"])


class AclZNodes:
    """ACLs as Kafka's AclAuthorizer keeps them (ZkData's ZkAclStore and ResourceZNode).

    Literal patterns live at ``/kafka-acl/<ResourceType>/<name>``, prefixed ones at
    ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``; each holds
    ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
    "operation":"Read","host":"*"}]}``. ``<ResourceType>`` is Kafka's camel-case name
    (Topic, Group, Cluster, TransactionalId, DelegationToken, User).
    """

    literal_root = "/kafka-acl"
    extended_root = "/kafka-acl-extended"

    @classmethod
    def store_root(cls, pattern_type: str) -> str:
        """``LITERAL`` -> /kafka-acl; ``PREFIXED`` -> /kafka-acl-extended/prefixed."""
        if pattern_type == "LITERAL":
            return cls.literal_root
        return f"{cls.extended_root}/{pattern_type.lower()}"

    @classmethod
    def type_path(cls, pattern_type: str, resource_type: str) -> str:
        return f"{cls.store_root(pattern_type)}/{resource_type}"

    @classmethod
    def path(cls, pattern_type: str, resource_type: str, name: str) -> str:
        return f"{cls.store_root(pattern_type)}/{resource_type}/{name}"

    @staticmethod
    def encode(acls: list[dict]) -> bytes:
        return _dumps({"version": 1, "acls": acls})

    @staticmethod
    def decode(data: bytes | None) -> list[dict]:
        if not data:
            return []
        return list(json.loads(data).get("acls") or [])


class AclChangeZNodes:
    """ACL change notifications: sequential ``acl_changes_NNNNNNNNNN`` children.

    Literal changes go under ``/kafka-acl-changes`` as the text ``TOPIC:name`` (Kafka's
    LiteralAclChangeStore: the Java enum name, a colon, the resource name); prefixed
    ones under ``/kafka-acl-extended-changes`` as ``{"version":1,"resourceType":"TOPIC",
    "name":..,"patternType":"PREFIXED"}`` (ExtendedAclChangeStore).
    """

    literal_path = "/kafka-acl-changes"
    extended_path = "/kafka-acl-extended-changes"
    prefix = "acl_changes_"
    #: Kafka's AclAuthorizer purges notifications older than this (changeExpirationMs)
    expiration_ms = 15 * 60 * 1000

    @classmethod
    def path_for(cls, pattern_type: str) -> str:
        return cls.literal_path if pattern_type == "LITERAL" else cls.extended_path

    @staticmethod
    def encode(resource_type: str, name: str, pattern_type: str) -> bytes:
        """``resource_type``/``pattern_type`` are Kafka's enum names (TOPIC, PREFIXED)."""
        if pattern_type == "LITERAL":
            return f"{resource_type}:{name}".encode()
        return _dumps(
            {"version": 1, "resourceType": resource_type, "name": name, "patternType": pattern_type}
        )

    @staticmethod
    def decode(data: bytes) -> tuple[str, str, str]:
        """(resource type, name, pattern type) as the writer put them (any case)."""
        text = data.decode()
        if text.startswith("{"):
            body = json.loads(text)
            return body["resourceType"], body["name"], body["patternType"]
        resource_type, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return resource_type, name, "LITERAL"


# Paths Kafka creates at start so every other path has a parent.
class ConsumerOffsetZNode:
    """An offset committed with OffsetCommit v0 (Kafka before 0.8.2 kept them here; Kafka
    3.x in ZooKeeper mode still stores and serves v0 commits so): the offset as text."""

    @staticmethod
    def path(group: str, topic: str, partition: int) -> str:
        return f"/consumers/{group}/offsets/{topic}/{partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        return str(offset).encode()

    @staticmethod
    def decode(data: bytes) -> int:
        return int(data.decode())


PERSISTENT_PATHS = [
    BrokerIdsZNode.path,
    TopicsZNode.path,
    BrokerSequenceIdZNode.path,
    ConfigEntityChangeNotificationZNode.path,
    *(ConfigEntityZNode.type_path(t) for t in ConfigType.PERSISTENT),
    DeleteTopicsZNode.path,
    IsrChangeNotificationZNode.path,
    ProducerIdBlockZNode.path,
    LogDirEventNotificationZNode.path,
    AclZNodes.literal_root,
    AclZNodes.extended_root + "/prefixed",
    AclChangeZNodes.literal_path,
    AclChangeZNodes.extended_path,
]

# Kafka's ZkData.SecureRootPaths: every top-level path Kafka owns, the roots that
# zookeeper.set.acl and the security migration tool (quill-zookeeper-security-migration)
# secure recursively.
SECURE_ROOT_PATHS = [
    AdminZNode.path,
    BrokersZNode.path,
    ClusterZNode.path,
    ConfigEntityZNode.root,
    ControllerZNode.path,
    ControllerEpochZNode.path,
    IsrChangeNotificationZNode.path,
    ProducerIdBlockZNode.path,
    LogDirEventNotificationZNode.path,
    DelegationTokenAuthZNode.path,
    AclZNodes.literal_root,
    AclChangeZNodes.literal_path,
    AclZNodes.extended_root,
    AclChangeZNodes.extended_path,
]
# Kafka's ZkData.SensitiveRootPaths: znodes below these hold secrets (SCRAM credentials,
# broker passwords, delegation tokens) and get no world access at all.
SENSITIVE_ROOT_PATHS = [
    ConfigEntityZNode.entity("users"),
    ConfigEntityZNode.entity("brokers"),
    DelegationTokenAuthZNode.tokens_path,
]
