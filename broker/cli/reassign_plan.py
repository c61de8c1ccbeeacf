"""The pure parts of quill-reassign-partitions: Kafka's JSON files, the throttle lists
and the texts, as Kafka's ReassignPartitionsCommand has them. No network here.
"""

from __future__ import annotations

import json

from .common import CliError

TopicPartition = tuple[str, int]
ANY_LOG_DIR = "any"

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_LEVEL_THROTTLES = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_LEVEL_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current "
    "reassignment."
)
YOU_MUST_RUN_VERIFY_PERIODICALLY = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure "
    "the throttle is removed."
)


def tp_str(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def plural(items) -> str:
    return "" if len(items) == 1 else "s"


def _duplicates(items) -> list:
    seen, dup = set(), []
    for item in items:
        if item in seen and item not in dup:
            dup.append(item)
        seen.add(item)
    return dup


def _load(text: str, what: str) -> dict:
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise CliError("INVALID_REQUEST", f"The {what} is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise CliError("INVALID_REQUEST", f"The {what} must be a JSON object.")
    return body


def parse_topics_to_move(text: str) -> list[str]:
    """``{"topics":[{"topic":"foo"}],"version":1}`` -> ["foo"]."""
    body = _load(text, "topics-to-move JSON")
    try:
        topics = [str(t["topic"]) for t in body["topics"]]
    except (KeyError, TypeError):
        raise CliError(
            "INVALID_REQUEST",
            'The topics-to-move JSON must look like {"topics":[{"topic":"foo"}],"version":1}.',
        ) from None
    dup = _duplicates(topics)
    if dup:
        raise CliError(
            "INVALID_REQUEST", f"List of topics to reassign contains duplicate entries: {dup}"
        )
    return topics


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise CliError(
            "INVALID_REQUEST", f"Invalid --broker-list {text!r}: expected 1,2,3."
        ) from None
    dup = _duplicates(brokers)
    if dup:
        raise CliError("INVALID_REQUEST", f"Broker list contains duplicate entries: {dup}")
    return brokers


def parse_reassignment(text: str) -> dict[TopicPartition, list[int]]:
    """Kafka's reassignment JSON -> {(topic, partition): replicas}, validated as Kafka's
    parseExecuteAssignmentArgs does. Log dirs other than "any" are refused: Quill has no
    AlterReplicaLogDirs."""
    body = _load(text, "reassignment JSON")
    try:
        entries = [
            ((str(p["topic"]), int(p["partition"])), [int(b) for b in p["replicas"]], p)
            for p in body["partitions"]
        ]
    except (KeyError, TypeError, ValueError):
        raise CliError(
            "INVALID_REQUEST",
            'The reassignment JSON must look like {"version":1,"partitions":[{"topic":"foo",'
            '"partition":0,"replicas":[1,2]}]}.',
        ) from None
    if not entries:
        raise CliError("INVALID_REQUEST", "Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas, _ in entries):
        raise CliError("INVALID_REQUEST", "Partition replica list cannot be empty")
    dup = _duplicates(tp for tp, _, _ in entries)
    if dup:
        raise CliError(
            "INVALID_REQUEST",
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(tp_str(tp) for tp in dup),
        )
    bad = [(tp, replicas) for tp, replicas, _ in entries if _duplicates(replicas)]
    if bad:
        raise CliError(
            "INVALID_REQUEST",
            "Partition replica lists may not contain duplicate entries: "
            + ", ".join(f"{tp_str(tp)} contains {_duplicates(r)}" for tp, r in bad),
        )
    for tp, replicas, raw in entries:
        dirs = raw.get("log_dirs")
        if dirs is not None and (len(dirs) != len(replicas) or set(dirs) - {ANY_LOG_DIR}):
            raise CliError(
                "INVALID_REQUEST",
                f'{tp_str(tp)}: log_dirs other than "any" are not supported (Quill\'s brokers '
                "have no AlterReplicaLogDirs).",
            )
    return {tp: replicas for tp, replicas, _ in entries}


def format_reassignment(parts: dict[TopicPartition, list[int]]) -> str:
    """Kafka's formatAsReassignmentJson: sorted by topic then partition, log dirs "any"."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "replicas": list(replicas),
                    "log_dirs": [ANY_LOG_DIR] * len(replicas),
                }
                for (t, p), replicas in sorted(parts.items())
            ],
        },
        separators=(",", ":"),
    )


# -- throttles (Kafka's calculateProposedMoveMap and friends) ----------------------------------


def move_map(
    ongoing: dict[TopicPartition, tuple[list[int], list[int], list[int]]],
    proposed: dict[TopicPartition, list[int]],
    current: dict[TopicPartition, list[int]],
) -> dict[TopicPartition, tuple[set[int], set[int]]]:
    """(sources, destinations) per moving partition: ongoing reassignments (replicas minus
    adding, adding) and the proposed ones (current replicas, new replicas not among them)."""
    moves = {
        tp: ({b for b in replicas if b not in adding}, set(adding))
        for tp, (replicas, adding, _removing) in ongoing.items()
    }
    for tp, replicas in proposed.items():
        sources = moves[tp][0] if tp in moves else set(current.get(tp, []))
        if not sources:
            raise CliError(
                "INVALID_REQUEST",
                f"Trying to reassign a topic partition {tp_str(tp)} with 0 replicas",
            )
        moves[tp] = (sources, set(replicas) - sources)
    return moves


def topic_throttles(moves) -> dict[str, dict[str, str]]:
    """topic -> {leader.replication.throttled.replicas: "p:b,...", follower...: "p:b,..."}."""
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for (topic, p), (sources, destinations) in moves.items():
        leader.setdefault(topic, set()).update(f"{p}:{b}" for b in sources)
        follower.setdefault(topic, set()).update(
            f"{p}:{b}" for b in destinations if b not in sources
        )
    return {
        topic: {
            LEADER_REPLICAS: ",".join(sorted(leader[topic])),
            FOLLOWER_REPLICAS: ",".join(sorted(follower.get(topic, ()))),
        }
        for topic in leader
    }


def reassigning_brokers(moves) -> list[int]:
    return sorted({b for sources, destinations in moves.values() for b in sources | destinations})


# -- texts --------------------------------------------------------------------------------------


def current_assignment_text(current: dict[TopicPartition, list[int]]) -> str:
    return (
        f"Current partition replica assignment\n\n{format_reassignment(current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )


def status_text(states: dict[TopicPartition, tuple[list[int], list[int], bool]]) -> str:
    """Kafka's partitionReassignmentStatesToString; states: (current, target, done)."""
    lines = ["Status of partition reassignment:"]
    for tp in sorted(states):
        current, target, done = states[tp]
        if not done:
            lines.append(f"Reassignment of partition {tp_str(tp)} is still in progress.")
        elif current == target:
            lines.append(f"Reassignment of partition {tp_str(tp)} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp_str(tp)}, but replica set is "
                f"{','.join(map(str, current))} rather than {','.join(map(str, target))}."
            )
    return "\n".join(lines)


def listing_text(ongoing: dict[TopicPartition, tuple[list[int], list[int], list[int]]]) -> str:
    """Kafka's curReassignmentsToString."""
    lines = []
    for tp in sorted(ongoing):
        replicas, adding, removing = ongoing[tp]
        line = f"{tp_str(tp)}: replicas: {','.join(map(str, replicas))}."
        if adding:
            line += f" adding: {','.join(map(str, adding))}."
        if removing:
            line += f" removing: {','.join(map(str, removing))}."
        lines.append(line)
    if not lines:
        return "No partition reassignments found."
    return "Current partition reassignments:\n" + "\n".join(lines)
