"""The admin APIs through librdkafka (confluent_kafka.AdminClient): topics, partitions,
configs, consumer groups and their offsets. Broker errors become OpError sentences,
with the field they concern where the error names one.

Kafka's client rule for a leader or coordinator that moved (NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH, NOT_COORDINATOR and their kin): refresh metadata and retry, with
backoff, a few times. librdkafka's admin client keeps the leaders and leader epochs it
first learnt and answers these errors as they come, so `retried` does it: a fresh
client (fresh metadata: leaders, epochs, coordinators), then the call again; past
ATTEMPTS the error, saying that the leadership is still moving.
"""

from __future__ import annotations

import functools
import logging
import threading
import time

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from cluster_client import clusters
from cluster_client.errors import ClusterUnavailable, NotFound, OpError

TIMEOUT_S = 10.0
# librdkafka's own chatter (reconnects while a broker restarts) stays out of the console's
# log; failures reach operators as OpError sentences.
RDKAFKA_LOG = logging.getLogger("console.librdkafka")
RDKAFKA_LOG.setLevel(logging.CRITICAL)
_lock = threading.Lock()
_admins: dict[str, tuple[AdminClient, str]] = {}  # cluster name -> (client, its bootstrap)

# Broker error -> the form field it concerns.
FIELD_OF = {
    KafkaError.TOPIC_ALREADY_EXISTS: "name",
    KafkaError.TOPIC_EXCEPTION: "name",
    KafkaError.INVALID_PARTITIONS: "partitions",
    KafkaError.INVALID_REPLICATION_FACTOR: "replication_factor",
    KafkaError.INVALID_CONFIG: "configs",
    KafkaError.POLICY_VIOLATION: "configs",
}
# Answers that mean "your metadata is stale": refresh and retry (Kafka's
# InvalidMetadataException and the coordinator errors its clients retry).
STALE_METADATA = frozenset(
    KafkaError(code).name()
    for code in (
        KafkaError.NOT_LEADER_FOR_PARTITION,  # NOT_LEADER_OR_FOLLOWER since Kafka 2.6
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.REPLICA_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    )
)
ATTEMPTS = 5
BACKOFF_S, BACKOFF_MAX_S = 0.1, 1.0  # doubled each attempt (KIP-580's exponential backoff)
SOURCE_NAMES = {
    1: "topic",
    2: "dynamic broker",
    3: "dynamic default",
    4: "static broker",
    5: "default",
    6: "default",
}


def client() -> AdminClient:
    """The current cluster's admin client (one per cluster)."""
    cluster = clusters.current()
    with _lock:
        admin, bootstrap = _admins.get(cluster.name, (None, None))
        if admin is None or bootstrap != cluster.bootstrap:
            admin = AdminClient(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "client.id": "quill-console",
                    "socket.timeout.ms": 8000,
                    "logger": RDKAFKA_LOG,
                    **cluster.client_security,
                }
            )
            _admins[cluster.name] = (admin, cluster.bootstrap)
        return admin


def refresh_metadata() -> None:
    """Forget the current cluster's admin client: the next call bootstraps a fresh one."""
    with _lock:
        _admins.pop(clusters.current().name, None)


def refresh_and_wait(attempt: int) -> None:
    """Before attempt `attempt` + 1: fresh metadata, then the backoff."""
    refresh_metadata()
    time.sleep(min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (attempt - 1)))


def is_stale(exc: OpError) -> bool:
    return exc.errors.get("code") in STALE_METADATA


def retried(fn):
    """Call `fn`; on a stale-metadata answer refresh metadata, back off and call again,
    ATTEMPTS times in all (every call wrapped so is idempotent)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return fn(*args, **kwargs)
            except OpError as exc:
                if not is_stale(exc):
                    raise
                if attempt == ATTEMPTS:
                    raise OpError(
                        f"{exc.message} (still so after {ATTEMPTS} attempts with fresh "
                        f"metadata: the leadership is moving; try again in a few seconds)",
                        status=503,
                        code=exc.errors["code"],
                    ) from exc
            refresh_and_wait(attempt)

    return call


def wait_result(future, what: str):
    """Wait for one admin future; turn its error into an OpError."""
    try:
        return future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is None:
            raise OpError(f"{what} failed: {exc}") from exc
        code = err.code()
        text = err.str() or err.name()
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise NotFound(f"{what}: no such topic or partition.", "topic") from exc
        if code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
            raise ClusterUnavailable(f"{what}: the cluster did not answer ({text}).") from exc
        raise OpError(f"{what}: {text}", FIELD_OF.get(code), code=err.name()) from exc
    except TimeoutError as exc:
        raise ClusterUnavailable(f"{what}: no answer within {TIMEOUT_S:.0f} s.") from exc


# ---------------------------------------------------------------- topics


def create_topic(name: str, partitions: int, rf: int, configs: dict, validate_only=False):
    new = NewTopic(name, num_partitions=partitions, replication_factor=rf, config=configs)
    fs = client().create_topics([new], validate_only=validate_only, operation_timeout=TIMEOUT_S)
    wait_result(fs[name], f"Creating topic {name!r}")


def delete_topic(name: str):
    fs = client().delete_topics([name], operation_timeout=TIMEOUT_S)
    wait_result(fs[name], f"Deleting topic {name!r}")


def create_partitions(name: str, total: int, validate_only=False):
    fs = client().create_partitions([NewPartitions(name, total)], validate_only=validate_only)
    wait_result(fs[name], f"Adding partitions to {name!r}")


@retried
def topic_configs(name: str) -> list[dict]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = wait_result(
        client().describe_configs([resource])[resource], f"Reading {name!r} configs"
    )
    return _config_rows(entries)


def _incremental(set_: dict[str, str], delete: list[str]) -> list[ConfigEntry]:
    """IncrementalAlterConfigs operations: SET each of set_, DELETE each of delete."""
    return [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()
    ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]


@retried
def alter_topic_configs(name: str, set_: dict[str, str], delete: list[str], validate_only=False):
    ops = _incremental(set_, delete)
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=ops)
    fs = client().incremental_alter_configs([resource], validate_only=validate_only)
    wait_result(fs[resource], f"Changing {name!r} configs")


@retried
def offsets(parts: list[tuple[str, int]], spec: str | int) -> dict[tuple[str, int], int]:
    """Offsets from the leaders: spec 'earliest', 'latest' or a timestamp in ms (the
    first offset at or after it; the log end when there is none)."""
    if not parts:
        return {}
    if spec == "earliest":
        s = OffsetSpec.earliest()
    elif spec == "latest":
        s = OffsetSpec.latest()
    else:
        s = OffsetSpec.for_timestamp(int(spec))
    fs = client().list_offsets({TopicPartition(t, p): s for t, p in parts})
    out = {}
    for tp, fut in fs.items():
        offset = wait_result(fut, f"Listing offsets of {tp.topic}-{tp.partition}").offset
        out[(tp.topic, tp.partition)] = offset
    if spec not in ("earliest", "latest"):  # -1: no record at or after the timestamp
        missing = [p for p, o in out.items() if o < 0]
        out.update(offsets(missing, "latest"))
    return out


# ---------------------------------------------------------------- consumer groups


@retried
def list_groups() -> list[dict]:
    result = wait_result(client().list_consumer_groups(), "Listing consumer groups")
    groups = [
        {"group_id": g.group_id, "state": _state(g.state), "simple": g.is_simple_consumer_group}
        for g in result.valid
    ]
    return sorted(groups, key=lambda g: g["group_id"])


def _state(state) -> str:
    name = getattr(state, "name", str(state))
    return {
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }.get(name, name.title())


def describe_group(group_id: str) -> dict:
    return describe_groups([group_id])[group_id]


@retried
def describe_groups(group_ids: list[str]) -> dict[str, dict]:
    if not group_ids:
        return {}
    fs = client().describe_consumer_groups(list(group_ids))
    return {gid: _group(gid, wait_result(f, f"Describing group {gid!r}")) for gid, f in fs.items()}


def _group(group_id: str, g) -> dict:
    members = [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "host": m.host,
            "assignment": sorted(
                (tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])
            ),
        }
        for m in g.members
    ]
    coordinator = g.coordinator.id if g.coordinator is not None else None
    return {
        "group_id": group_id,
        "state": _state(g.state),
        "protocol": g.partition_assignor,
        "coordinator": coordinator,
        "members": members,
    }


@retried
def group_offsets(group_id: str) -> dict[tuple[str, int], int]:
    request = [ConsumerGroupTopicPartitions(group_id)]
    fs = client().list_consumer_group_offsets(request)
    return _committed(wait_result(fs[group_id], f"Reading offsets of group {group_id!r}"))


def groups_offsets(group_ids: list[str]) -> dict[str, dict[tuple[str, int], int] | OpError]:
    """Committed offsets of many groups: every OffsetFetch is sent before any answer is
    awaited (librdkafka takes one group per request), so N groups cost one round trip,
    not N. A group whose offsets could not be read maps to its OpError; one whose
    coordinator moved is asked again with fresh metadata (as `retried`)."""
    out: dict = {}
    ask = list(group_ids)
    for attempt in range(1, ATTEMPTS + 1):
        fs = {
            gid: client().list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)])[gid]
            for gid in ask
        }
        for gid, f in fs.items():
            try:
                out[gid] = _committed(wait_result(f, f"Reading offsets of group {gid!r}"))
            except OpError as exc:
                out[gid] = exc
        ask = [g for g in ask if isinstance(out[g], OpError) and is_stale(out[g])]
        if not ask or attempt == ATTEMPTS:
            return out
        refresh_and_wait(attempt)
    return out


def _committed(result) -> dict[tuple[str, int], int]:
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.topic_partitions
        if tp.error is None and tp.offset >= 0
    }


@retried
def alter_group_offsets(group_id: str, new: dict[tuple[str, int], int]):
    tps = [TopicPartition(t, p, o) for (t, p), o in sorted(new.items())]
    fs = client().alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id, tps)])
    result = wait_result(fs[group_id], f"Resetting offsets of group {group_id!r}")
    failed = [tp for tp in result.topic_partitions if tp.error is not None]
    if failed:
        err = failed[0].error
        raise OpError(
            f"The coordinator refused offsets for {failed[0].topic}-"
            f"{failed[0].partition}: {err.str() or err.name()}",
            code=err.name(),
        )


@retried
def delete_group(group_id: str):
    fs = client().delete_consumer_groups([group_id])
    wait_result(fs[group_id], f"Deleting group {group_id!r}")


# ---------------------------------------------------------------- broker configs (KIP-226)

DEFAULT_BROKER = ""  # DescribeConfigs / IncrementalAlterConfigs name of /config/brokers/<default>


def _config_rows(entries: dict) -> list[dict]:
    return [
        {
            "name": e.name,
            "value": e.value,
            "source": SOURCE_NAMES.get(int(e.source), str(e.source)),
            "is_default": bool(e.is_default),
            "read_only": bool(e.is_read_only),
            "sensitive": bool(e.is_sensitive),
        }
        for e in sorted(entries.values(), key=lambda e: e.name)
    ]


def broker_configs(broker: str) -> list[dict]:
    """A broker's configs (static, dynamic, defaults), or with DEFAULT_BROKER the
    cluster-wide dynamic defaults; read_only marks what only server.properties sets."""
    resource = ConfigResource(ResourceType.BROKER, broker)
    what = f"Reading broker {broker} configs" if broker else "Reading the cluster default configs"
    return _config_rows(wait_result(client().describe_configs([resource])[resource], what))
