"""Shared by the security tests: SCRAM users written to ZooKeeper as kafka-configs
writes them, broker listener settings, and client round trips. Certificates come from
the stack's own CA code (``quill_stack/tls.py``: ``tls.issue(dir, "alice", ou="eng")``).
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from broker.security.scram_credentials import ScramCredential
from broker.zk.znodes import ConfigEntityChangeNotificationZNode, ConfigEntityZNode

PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule"


def sasl_listener_cluster(
    cluster_factory, mechanisms: str, plain_users: dict[str, str] | None = None, **config
):
    """One broker with a PLAINTEXT listener (tests' admin path) and a SASL_PLAINTEXT one
    offering ``mechanisms``; PLAIN users from the listener's JAAS config. The cluster
    gains ``sasl_port`` and ``sasl_bootstrap``. A new group's first rebalance is not
    delayed (Kafka's 3 s default only makes each subscribing test wait)."""
    from quill_stack import ports

    sasl_port = ports.free_ports(1)[0]
    listeners = lambda _b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    )
    settings = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": mechanisms,
        "group.initial.rebalance.delay.ms": "0",
    }
    if plain_users:
        settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = jaas(
            PLAIN_JAAS, **{f"user_{u}": p for u, p in plain_users.items()}
        )
    cluster = cluster_factory(1, **(settings | config))
    cluster.sasl_port = sasl_port
    cluster.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    return cluster


def internal_listener(
    n_brokers: int, protocol: str = "SASL_PLAINTEXT"
) -> tuple[dict, dict[int, int]]:
    """Broker settings for brokers 1..n: a PLAINTEXT listener (the tests' clients) and
    an INTERNAL one of ``protocol`` the brokers talk on; and each broker's INTERNAL port."""
    from quill_stack import ports

    internal = dict(zip(range(1, n_brokers + 1), ports.free_ports(n_brokers), strict=True))
    listeners = lambda b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal[b]}"
    )
    settings = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{protocol}",
        "inter.broker.listener.name": "INTERNAL",
    }
    return settings, internal


def plain_inter_broker(
    n_brokers: int, password: str = "broker-secret"
) -> tuple[dict, dict[int, int]]:
    """``internal_listener`` over SASL_PLAINTEXT, the brokers the PLAIN user ``broker``."""
    settings, internal = internal_listener(n_brokers)
    return {
        **settings,
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": jaas(
            PLAIN_JAAS, username="broker", password=password, user_broker=password
        ),
    }, internal


def jaas(module: str, **options: str) -> str:
    """``module required k="v" ...;`` as Kafka's sasl.jaas.config values are written."""
    opts = " ".join(f'{k}="{v}"' for k, v in options.items())
    return f"{module} required {opts};"


def set_scram_user(zk, user: str, password: str, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512")):
    """Write ``/config/users/<user>`` in Kafka's stored form and a change notification,
    as ``kafka-configs --alter --add-config SCRAM-SHA-512=[password=...]`` does."""
    path = ConfigEntityZNode.path("users", user)
    config = {}
    if zk.exists(path):
        config = ConfigEntityZNode.decode(zk.get(path)[0])
    for mechanism in mechanisms:
        config[mechanism] = ScramCredential.from_password(mechanism, password).to_config_value()
    _write_user(zk, user, config)


def delete_scram_user(zk, user: str) -> None:
    _write_user(zk, user, {})


def set_user_quota(zk, user: str, **quotas: int) -> None:
    """``producer_byte_rate=...`` etc. in ``/config/users/<user>``, credentials kept."""
    path = ConfigEntityZNode.path("users", user)
    config = ConfigEntityZNode.decode(zk.get(path)[0]) if zk.exists(path) else {}
    config.update({k: str(v) for k, v in quotas.items()})
    _write_user(zk, user, config)


def _write_user(zk, user: str, config: dict) -> None:
    path = ConfigEntityZNode.path("users", user)
    data = ConfigEntityZNode.encode(config)
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)
    notice = ConfigEntityChangeNotificationZNode
    zk.create(
        f"{notice.path}/{notice.prefix}",
        notice.encode(f"users/{user}"),
        sequence=True,
        makepath=True,
    )


def round_trip(conf: dict, topic: str, values: list[bytes], group: str) -> list[tuple[int, bytes]]:
    """Produce ``values`` with confluent-kafka, consume them back from the start as
    ``group``: their (offset, value) pairs in the order read."""
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and not set(values) <= {v for _, v in got}:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return [(o, v) for o, v in got if v in values]


def logs_in(conf: dict, timeout: float = 8.0) -> bool:
    """Whether a client with ``conf`` fetches metadata: False at librdkafka's first
    authentication error (its error_cb; it would retry a refused login until the
    timeout) or when nothing answers within ``timeout``."""
    errors = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
            return True
        except KafkaException:
            admin.poll(0)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
    return False


def first_error(conf: dict, timeout: float = 30.0) -> str:
    """The first error librdkafka reports for a client with ``conf`` (its error_cb)."""
    errors = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not errors:
        producer.poll(0.2)
    assert errors, "no error reported"
    return errors[0].str()
