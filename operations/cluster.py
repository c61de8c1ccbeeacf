"""What the jobs ask of the cluster, as any operator tool would: ZooKeeper reads (through
cluster_client.zk: brokers, assignments, ISRs, config entities) and Kafka requests sent
with the console's protocol socket (cluster_client.wire): AlterPartitionReassignments and
ListPartitionReassignments to the controller, ElectLeaders, DescribeLogDirs for sizes.

Replication throttles are written as kafka-reassign-partitions writes them: the brokers'
`leader/follower.replication.throttled.rate` and the topics'
`leader/follower.replication.throttled.replicas` config entities (znode + change
notification), read-modify-write so other keys stay.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.zk.znodes import ConfigType
from cluster_client import wire, zk
from cluster_client.errors import ClusterUnavailable

Part = tuple[str, int]
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS, ELECT_LEADERS = 45, 46, 43
REQUEST_TIMEOUT_MS = 30000
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICAS_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


# ------------------------------------------------------------------ reading the cluster


def brokers() -> dict[int, dict]:
    """Registered brokers: id -> {host, port, rack}."""
    return {b["id"]: b for b in zk.brokers()}


def assignment(topics: list[str] | None = None) -> dict[Part, list[int]]:
    names = zk.topic_names() if topics is None else topics
    return {(t, p): r for t, parts in zk.assignments(names).items() for p, r in parts.items()}


def isr(parts: list[Part]) -> dict[Part, dict]:
    return zk.partition_states(parts)


def partition_sizes(live: dict[int, dict] | None = None) -> dict[Part, int]:
    """Bytes of each partition: its largest replica (DescribeLogDirs on every broker)."""
    live = brokers() if live is None else live
    calls = {b: (info["host"], info["port"], ()) for b, info in live.items()}
    sizes: dict[Part, int] = {}
    for answer in wire.on_each(calls, wire.describe_log_dirs).values():
        if isinstance(answer, Exception):
            continue
        for part, info in answer["replicas"].items():
            sizes[part] = max(sizes.get(part, 0), info["size"])
    return sizes


def replica_sizes(live: dict[int, dict]) -> dict[tuple[int, Part], int]:
    """(broker, partition) -> bytes of that replica."""
    calls = {b: (info["host"], info["port"], ()) for b, info in live.items()}
    out = {}
    for b, answer in wire.on_each(calls, wire.describe_log_dirs).items():
        if not isinstance(answer, Exception):
            for part, info in answer["replicas"].items():
                out[(b, part)] = info["size"]
    return out


# ------------------------------------------------------------------ controller requests


def _ask(api_key: int, version: int, body: dict, broker_id: int | None = None):
    """One request to the controller (or `broker_id`), answered as kio's response."""
    live = brokers()
    target = zk.controller() if broker_id is None else broker_id
    if target not in live:
        target = next(iter(sorted(live)), None)
    if target is None:
        raise ClusterUnavailable("No broker is registered in ZooKeeper.")
    sock = wire.broker_socket(live[target]["host"], live[target]["port"])
    try:
        return sock.pipeline([wire.request_call(api_key, version, body, "quill-worker")])[0]
    except OSError as exc:
        raise ClusterUnavailable(f"Broker {target} did not answer: {exc}") from exc


def _by_topic(parts) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(parts):
        out.setdefault(t, []).append(p)
    return out


def alter_reassignments(target: dict[Part, list[int] | None]) -> dict[Part, tuple[str, str]]:
    """AlterPartitionReassignments: replicas to move to, or None to cancel (Kafka's
    semantics: back to the original replicas). Returns the failures: part -> (error
    name, message); the request-level error fails every partition."""
    topics = [
        {
            "name": t,
            "partitions": [{"partition_index": p, "replicas": target[(t, p)]} for p in parts],
        }
        for t, parts in _by_topic(target).items()
    ]
    body = {"timeout": REQUEST_TIMEOUT_MS, "topics": topics}
    response = _ask(ALTER_REASSIGNMENTS, 0, body)
    if response.error_code != 0:
        why = (error_name(response.error_code), response.error_message or "")
        return dict.fromkeys(target, why)
    failed = {}
    for t in response.responses:
        for p in t.partitions:
            if p.error_code != 0:
                failed[(t.name, p.partition_index)] = (
                    error_name(p.error_code),
                    p.error_message or "",
                )
    return failed


def list_reassignments() -> dict[Part, dict]:
    """The reassignments in progress: part -> {replicas, adding, removing}."""
    response = _ask(LIST_REASSIGNMENTS, 0, {"timeout": REQUEST_TIMEOUT_MS, "topics": None})
    if response.error_code != 0:
        raise ClusterUnavailable(
            f"ListPartitionReassignments: {error_name(response.error_code)} "
            f"{response.error_message or ''}".strip()
        )
    return {
        (t.name, p.partition_index): {
            "replicas": list(p.replicas),
            "adding": list(p.adding_replicas),
            "removing": list(p.removing_replicas),
        }
        for t in response.topics
        for p in t.partitions
    }


def elect_leaders(parts: list[Part] | None, election_type: int = 0) -> dict[Part, tuple]:
    """ElectLeaders (0 preferred, 1 unclean) for `parts` or every partition: part ->
    (error name, message); NONE for an election done, ELECTION_NOT_NEEDED when the
    preferred leader already leads."""
    topics = None
    if parts is not None:
        topics = [{"topic": t, "partitions": ps} for t, ps in _by_topic(parts).items()]
    body = {
        "election_type": election_type,
        "topic_partitions": topics,
        "timeout": REQUEST_TIMEOUT_MS,
    }
    response = _ask(ELECT_LEADERS, 2, body)
    if response.error_code != 0:
        raise ClusterUnavailable(f"ElectLeaders: {error_name(response.error_code)}")
    return {
        (r.topic, p.partition_id): (error_name(p.error_code), p.error_message or "")
        for r in response.replica_election_results
        for p in r.partition_result
    }


# ------------------------------------------------------------------ throttles


def _broker_entity(broker_id: int) -> str:
    return ConfigType.entity(ConfigType.BROKER, str(broker_id))


def _topic_entity(topic: str) -> str:
    return ConfigType.entity(ConfigType.TOPIC, topic)


def _update_entity(entity: str, set_: dict[str, str], remove: tuple[str, ...] = ()) -> bool:
    current = zk.entity_config(entity)
    new = {k: v for k, v in current.items() if k not in remove}
    new.update(set_)
    if new != current:
        zk.set_entity_config(entity, new)
        return True
    return False


def set_throttles(rate: int, moving: dict[Part, dict]) -> None:
    """`rate` bytes/s on every broker of `moving` (part -> {"from": [..], "to": [..]}):
    the leaders' side throttles the original replicas, the followers' side the new ones
    (as kafka-reassign-partitions does)."""
    involved: set[int] = set()
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    for (t, p), move in sorted(moving.items()):
        involved.update(move["from"], move["to"])
        leader.setdefault(t, []).extend(f"{p}:{b}" for b in move["from"])
        follower.setdefault(t, []).extend(f"{p}:{b}" for b in move["to"] if b not in move["from"])
    for b in sorted(involved):
        _update_entity(_broker_entity(b), dict.fromkeys(RATE_KEYS, str(rate)))
    for t in sorted(set(leader) | set(follower)):
        _update_entity(
            _topic_entity(t),
            {
                REPLICAS_KEYS[0]: ",".join(leader.get(t, [])),
                REPLICAS_KEYS[1]: ",".join(follower.get(t, [])),
            },
        )


def remove_throttles(topics: set[str], broker_ids: set[int]) -> list[str]:
    """Drop every throttle key from these topics and brokers; returns what was changed."""
    changed = []
    for b in sorted(broker_ids):
        if _update_entity(_broker_entity(b), {}, RATE_KEYS):
            changed.append(f"broker {b}")
    for t in sorted(topics):
        if t in zk.topic_names() and _update_entity(_topic_entity(t), {}, REPLICAS_KEYS):
            changed.append(f"topic {t}")
    return changed


def throttles_left(topics: set[str], broker_ids: set[int]) -> dict[str, dict]:
    """Throttle keys still set (for checks and tests): entity -> {key: value}."""
    out = {}
    for b in sorted(broker_ids):
        found = {k: v for k, v in zk.entity_config(_broker_entity(b)).items() if k in RATE_KEYS}
        if found:
            out[_broker_entity(b)] = found
    for t in sorted(topics):
        found = {k: v for k, v in zk.entity_config(_topic_entity(t)).items() if k in REPLICAS_KEYS}
        if found:
            out[_topic_entity(t)] = found
    return out
