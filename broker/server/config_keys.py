"""The broker's configuration keys: Kafka's names, how each value is parsed, its default.

``KEYS`` is the table ``BrokerConfig`` (config.py) reads a ``server.properties`` with;
the listener modules (listeners.py, listener_security.py) and dynamic configs read it
too, so it sits below all of them: this module imports nothing of the server's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..replica.selector import selector_for

LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration value that the broker cannot start with."""


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError("expected true or false")


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    minimum: int | None = None
    sensitive: bool = False  # Kafka's PASSWORD type: DescribeConfigs shows no value


def _int(text: str) -> int:
    return int(text.strip())


def _replica_selector(text: str) -> str | None:
    """One of the selector classes Kafka ships that we have (replica/selector.py)."""
    selector_for(text)  # ValueError naming the ones we have
    return text.strip() or None


KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        Key("broker.id", _int, -1, "Unique id of this broker in the cluster", 0),
        Key("broker.rack", str, None, "Rack of this broker, for rack-aware replica placement"),
        Key("listeners", _list, ["PLAINTEXT://127.0.0.1:9092"], "Listener URIs"),
        Key("advertised.listeners", _list, None, "Listener URIs published in ZooKeeper"),
        Key(
            "listener.security.protocol.map",
            str,
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "Listener name -> security protocol",
        ),
        Key("inter.broker.listener.name", str, None, "Listener brokers use to talk to each other"),
        Key("security.inter.broker.protocol", str, None, "Used when the listener name is unset"),
        Key("log.dirs", _list, None, "Directories holding the partition logs"),
        Key("log.dir", _list, ["/tmp/kafka-logs"], "Used when log.dirs is not set"),
        Key("zookeeper.connect", str, None, "host:port[,host:port][/chroot] of ZooKeeper"),
        Key("zookeeper.session.timeout.ms", _int, 18000, "ZooKeeper session timeout", 1),
        Key(
            "zookeeper.connection.timeout.ms",
            _int,
            None,
            "Time to wait for ZooKeeper at start (default: zookeeper.session.timeout.ms)",
            1,
        ),
        Key("zookeeper.set.acl", _bool, False, "Create znodes with secure ACLs (SASL login)"),
        Key(
            "java.security.auth.login.config",
            str,
            None,
            "JAAS file whose Client section logs in to ZooKeeper (Kafka's JVM property)",
        ),
        Key("zookeeper.sasl.clientconfig", str, "Client", "JAAS section for ZooKeeper"),
        Key("num.partitions", _int, 1, "Default partition count of auto-created topics", 1),
        Key("default.replication.factor", _int, 1, "Default replication factor", 1),
        Key("auto.create.topics.enable", _bool, True, "Create topics on first Metadata request"),
        Key("delete.topic.enable", _bool, True, "Allow DeleteTopics"),
        Key("socket.request.max.bytes", _int, 104857600, "Largest request accepted", 1),
        Key("socket.send.buffer.bytes", _int, 102400, "SO_SNDBUF (-1: OS default)"),
        Key("socket.receive.buffer.bytes", _int, 102400, "SO_RCVBUF (-1: OS default)"),
        Key("log.segment.bytes", _int, 1073741824, "Segment size before roll", 14),
        Key("log.roll.ms", _int, None, "Segment age before roll"),
        Key("log.roll.hours", _int, 168, "Segment age before roll, hours", 1),
        Key("log.retention.ms", _int, None, "Retention by time"),
        Key("log.retention.minutes", _int, None, "Retention by time, minutes"),
        Key("log.retention.hours", _int, 168, "Retention by time, hours"),
        Key("log.retention.bytes", _int, -1, "Retention by size per partition"),
        Key("log.retention.check.interval.ms", _int, 300000, "How often retention runs", 1),
        Key("log.index.interval.bytes", _int, 4096, "Bytes between offset index entries", 0),
        Key("log.index.size.max.bytes", _int, 10485760, "Max index file size", 4),
        Key("log.flush.interval.messages", _int, LONG_MAX, "Messages before fsync", 1),
        Key("log.flush.interval.ms", _int, None, "Time before fsync"),
        Key("log.flush.scheduler.interval.ms", _int, LONG_MAX, "Flush check interval"),
        Key("log.flush.offset.checkpoint.interval.ms", _int, 60000, "Checkpoint interval", 0),
        Key("log.message.timestamp.type", str, "CreateTime", "CreateTime or LogAppendTime"),
        Key("log.cleanup.policy", _list, ["delete"], "delete and/or compact"),
        Key("message.max.bytes", _int, 1048588, "Largest record batch accepted", 0),
        Key("compression.type", str, "producer", "Broker-side compression"),
        Key("compression.gzip.level", _int, -1, "gzip level when the broker compresses"),
        Key("compression.lz4.level", _int, 9, "lz4 level when the broker compresses"),
        Key("compression.zstd.level", _int, 3, "zstd level when the broker compresses"),
        Key("min.insync.replicas", _int, 1, "Minimum ISR for acks=all", 1),
        Key("unclean.leader.election.enable", _bool, False, "Allow out-of-sync leaders"),
        Key("offsets.topic.replication.factor", _int, 3, "RF of __consumer_offsets", 1),
        Key("offsets.topic.num.partitions", _int, 50, "Partitions of __consumer_offsets", 1),
        Key(
            "group.initial.rebalance.delay.ms", _int, 3000, "Delay of a new group's first rebalance"
        ),
        Key(
            "group.min.session.timeout.ms", _int, 6000, "Shortest session timeout a member may ask"
        ),
        Key("group.max.session.timeout.ms", _int, 1800000, "Longest session timeout allowed"),
        Key("group.max.size", _int, 2147483647, "Most members a group may have", 1),
        Key(
            "offsets.topic.segment.bytes", _int, 104857600, "Segment size of __consumer_offsets", 1
        ),
        Key("offsets.load.buffer.size", _int, 5242880, "Read size when loading offsets", 1),
        Key("offsets.retention.minutes", _int, 10080, "Offsets of an empty group expire after", 1),
        Key("offsets.retention.check.interval.ms", _int, 600000, "How often offsets expire", 1),
        Key("offsets.commit.timeout.ms", _int, 5000, "Wait for an offset commit's replication", 1),
        Key("offset.metadata.max.bytes", _int, 4096, "Largest metadata of a committed offset"),
        Key(
            "num.recovery.threads.per.data.dir",
            _int,
            1,
            "Threads per log dir loading and recovering logs at start-up",
            1,
        ),
        Key(
            "log.flush.start.offset.checkpoint.interval.ms",
            _int,
            60000,
            "How often log start offsets are checkpointed",
            0,
        ),
        Key(
            "producer.id.expiration.check.interval.ms",
            _int,
            600000,
            "How often idle producer ids expire",
            1,
        ),
        Key("log.cleaner.enable", _bool, True, "Run the log cleaner (compaction)"),
        Key("log.cleaner.backoff.ms", _int, 15000, "Sleep of the cleaner when nothing is dirty", 0),
        Key("log.cleaner.dedupe.buffer.size", _int, 134217728, "Memory of the cleaner's key map"),
        Key(
            "log.cleaner.io.max.bytes.per.second",
            float,
            1.7976931348623157e308,  # Kafka's Double.MAX_VALUE: no throttle
            "Bytes/s the cleaner reads plus writes, on average",
        ),
        Key("log.cleaner.delete.retention.ms", _int, 86400000, "Tombstone retention (compact)"),
        Key("log.cleaner.min.cleanable.ratio", float, 0.5, "Dirty ratio that triggers cleaning"),
        Key("log.cleaner.min.compaction.lag.ms", _int, 0, "Records younger are not compacted"),
        Key("log.cleaner.max.compaction.lag.ms", _int, LONG_MAX, "Records older are compacted"),
        Key("replica.lag.time.max.ms", _int, 30000, "Time before a lagging follower leaves ISR", 1),
        Key("replica.fetch.max.bytes", _int, 1048576, "Bytes per partition a follower fetches", 1),
        Key("replica.fetch.wait.max.ms", _int, 500, "Longest a follower fetch waits", 0),
        Key("replica.fetch.response.max.bytes", _int, 10485760, "Largest follower fetch", 1),
        Key(
            "replica.selector.class",
            _replica_selector,
            None,
            "KIP-392: where consumers with client.rack read (RackAwareReplicaSelector)",
        ),
        Key(
            "replica.high.watermark.checkpoint.interval.ms", _int, 5000, "HW checkpoint interval", 1
        ),
        Key("controlled.shutdown.enable", _bool, True, "Move leaderships away before stopping"),
        Key(
            "auto.leader.rebalance.enable",
            _bool,
            True,
            "Move leadership back to preferred replicas",
        ),
        Key(
            "leader.imbalance.check.interval.seconds",
            _int,
            300,
            "How often imbalance is checked",
            1,
        ),
        Key(
            "leader.imbalance.per.broker.percentage", _int, 10, "Allowed share of moved leaders", 0
        ),
        Key("controlled.shutdown.max.retries", _int, 3, "Controlled shutdown attempts", 1),
        Key("controlled.shutdown.retry.backoff.ms", _int, 5000, "Pause between attempts", 0),
        Key("fetch.max.bytes", _int, 57671680, "Largest fetch response", 0),
        Key(
            "max.incremental.fetch.session.cache.slots",
            _int,
            1000,
            "Incremental fetch sessions (KIP-227) the broker keeps at most",
            0,
        ),
        Key(
            "queued.max.requests",
            _int,
            500,
            "Requests queued per connection before reading pauses",
            1,
        ),
        Key("quota.window.num", _int, 11, "Samples a client quota rate is measured over", 2),
        Key("quota.window.size.seconds", _int, 1, "Length of each client quota sample", 1),
        Key("connections.max.idle.ms", _int, 600000, "Idle connections are closed after this"),
        Key(
            "connection.failed.authentication.delay.ms",
            _int,
            100,
            "A connection that failed authentication is closed this much later",
            0,
        ),
        Key("max.connections", _int, 2**31 - 1, "Connections the broker holds at most", 0),
        Key("max.connections.per.ip", _int, 2**31 - 1, "Connections one address may hold", 0),
        Key("max.connections.per.ip.overrides", str, "", "host:count,... per-address limits"),
        Key("queued.max.request.bytes", _int, -1, "Bytes of requests read, not answered"),
        Key("transactional.id.expiration.ms", _int, 604800000, "Transactional id expiry"),
        Key(
            "transaction.state.log.num.partitions", _int, 50, "Partitions of __transaction_state", 1
        ),
        Key("transaction.state.log.replication.factor", _int, 3, "RF of __transaction_state", 1),
        Key("transaction.state.log.min.isr", _int, 2, "min.insync.replicas of the txn log", 1),
        Key("transaction.state.log.segment.bytes", _int, 104857600, "Txn log segment size", 1),
        Key("transaction.state.log.load.buffer.size", _int, 5242880, "Txn log load read size", 1),
        Key("transaction.max.timeout.ms", _int, 900000, "Longest transaction timeout allowed", 1),
        Key(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            _int,
            3600000,
            "How often idle transactional ids expire",
            1,
        ),
        Key(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            _int,
            10000,
            "How often timed-out transactions are aborted",
            1,
        ),
        Key("producer.id.expiration.ms", _int, 86400000, "Idle producer id expiry"),
        Key("authorizer.class.name", str, "", "kafka.security.authorizer.AclAuthorizer or acl"),
        Key("super.users", str, "", "Principals every ACL lets through: User:a;User:b"),
        Key("allow.everyone.if.no.acl.found", _bool, False, "Allow a resource without ACLs"),
        # security (listener_security.py): each may also be set per listener as
        # listener.name.<listener>.<key>, and <mechanism>.sasl.jaas.config only that way
        Key("sasl.enabled.mechanisms", _list, ["GSSAPI"], "SASL mechanisms SASL listeners offer"),
        Key(
            "sasl.mechanism.inter.broker.protocol", str, "GSSAPI", "SASL mechanism between brokers"
        ),
        Key("connections.max.reauth.ms", _int, 0, "KIP-368 re-authentication (0: off)", 0),
        # OAUTHBEARER's OIDC validation (KIP-768); also as listener.name.<l>.oauthbearer.<key>
        Key("sasl.oauthbearer.jwks.endpoint.url", str, None, "https:, http: or file: JWKS"),
        Key("sasl.oauthbearer.jwks.endpoint.refresh.ms", _int, 3600000, "JWKS refresh", 1),
        Key("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _int, 100, "JWKS retry", 0),
        Key("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _int, 10000, "Its cap", 0),
        Key("sasl.oauthbearer.expected.issuer", str, None, "The iss tokens must have"),
        Key("sasl.oauthbearer.expected.audience", _list, None, "An aud tokens must have"),
        Key("sasl.oauthbearer.sub.claim.name", str, "sub", "The claim naming the principal"),
        Key("sasl.oauthbearer.scope.claim.name", str, "scope", "The claim with the scopes"),
        Key("sasl.oauthbearer.clock.skew.seconds", _int, 30, "Allowed clock skew", 0),
        Key("ssl.keystore.type", str, "JKS", "JKS, PKCS12 or PEM"),
        Key("ssl.keystore.location", str, None, "Keystore file: the private key and its chain"),
        Key(
            "ssl.keystore.password",
            str,
            None,
            "Password of a JKS or PKCS12 keystore",
            sensitive=True,
        ),
        Key(
            "ssl.keystore.certificate.chain",
            str,
            None,
            "PEM certificate chain (text)",
            sensitive=True,
        ),
        Key("ssl.keystore.key", str, None, "PEM private key (text)", sensitive=True),
        Key("ssl.key.password", str, None, "Password of the private key", sensitive=True),
        Key("ssl.truststore.type", str, "JKS", "JKS, PKCS12 or PEM"),
        Key("ssl.truststore.location", str, None, "Truststore file: the trusted CA certificates"),
        Key("ssl.truststore.password", str, None, "Password of the truststore", sensitive=True),
        Key(
            "ssl.truststore.certificates",
            str,
            None,
            "PEM trusted CA certificates (text)",
            sensitive=True,
        ),
        Key("ssl.client.auth", str, "none", "none, requested or required (mTLS)"),
        Key("ssl.principal.mapping.rules", str, "DEFAULT", "Certificate DN -> principal name"),
        Key(
            "ssl.endpoint.identification.algorithm",
            str,
            "https",
            "https: brokers check each other's host names ('' to skip)",
        ),
        Key(
            "ssl.allow.dn.changes",
            _bool,
            False,
            "A dynamic keystore update may change the certificate's subject DN",
        ),
        Key(
            "ssl.allow.san.changes",
            _bool,
            False,
            "A dynamic keystore update may change the certificate's subjectAltNames",
        ),
        Key(
            "password.encoder.secret",
            str,
            None,
            "Secret that encrypts dynamic password configs in ZooKeeper",
            sensitive=True,
        ),
        Key(
            "num.replica.fetchers",
            _int,
            1,
            "Fetchers (connections) per source broker; partitions hashed across them",
            1,
        ),
        Key(
            "max.connection.creation.rate",
            _int,
            2**31 - 1,
            "Connections accepted per second, broker-wide (KIP-612)",
            0,
        ),
        Key("quill.metrics.port", _int, 0, "Port of the Prometheus endpoint (0: none)", 0),
        Key("quill.metrics.host", str, None, "Address of that endpoint (the listener's host)"),
    ]
}


def parse_listener(uri: str) -> tuple[str, str, int]:
    """``PLAINTEXT://host:9092`` -> ("PLAINTEXT", "host", 9092)."""
    try:
        name, rest = uri.split("://", 1)
        host, port = rest.rsplit(":", 1)
        port_no = int(port)
    except ValueError:
        raise ConfigError(
            f"Invalid listener {uri!r}: expected NAME://host:port, e.g. PLAINTEXT://0.0.0.0:9092"
        ) from None
    if not 0 <= port_no <= 65535:
        raise ConfigError(f"Invalid listener {uri!r}: port out of range")
    return name, host.strip("[]"), port_no
