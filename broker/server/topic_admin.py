"""Creating, growing and deleting topics: validation, assignment, ZooKeeper writes.

Shared by CreateTopics, CreatePartitions, DeleteTopics and Metadata's auto-creation.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING

from ..controller.assignment import assign_replicas, assign_replicas_rack_aware
from ..log.config import LogConfig
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.internal_topics import refusal
from ..zk.znodes import TopicAssignment
from .metadata_cache import INTERNAL_TOPICS

if TYPE_CHECKING:
    from .kafka_server import KafkaServer

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise KafkaError(
            ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty"
        )
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def _check_assignment(
    server: KafkaServer, manual: dict[int, list[int]], first_partition: int
) -> None:
    live = set(server.cache.brokers)
    sizes = {len(r) for r in manual.values()}
    if len(sizes) > 1:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "All partitions must have the same replication factor",
        )
    for partition, replicas in manual.items():
        if partition != first_partition + sorted(manual).index(partition):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment, "Partitions must be consecutive from 0"
            )
        if len(set(replicas)) != len(replicas):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Duplicate brokers in the replicas of partition {partition}",
            )
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Unknown broker(s) {unknown} in the replicas of partition {partition}",
            )


def _assign(server: KafkaServer, partitions: int, rf: int, first: int) -> dict[int, list[int]]:
    """Kafka's placement over the live brokers; rack-aware when every broker has a rack."""
    brokers = server.cache.brokers
    racks = {b: info.rack for b, info in brokers.items()}
    if racks and all(r is not None for r in racks.values()):
        return assign_replicas_rack_aware(racks, partitions, rf, start_partition=first)
    return assign_replicas(sorted(brokers), partitions, rf, start_partition=first)


async def create_topic(
    server: KafkaServer,
    name: str,
    num_partitions: int,
    replication_factor: int,
    *,
    manual: dict[int, list[int]] | None = None,
    configs: dict[str, str] | None = None,
    validate_only: bool = False,
    timeout_ms: int = 30000,
) -> tuple[str, int, int, LogConfig]:
    """Validate and create; returns (topic id, partitions, rf, config). Raises KafkaError."""
    validate_topic_name(name)
    await server.wait_metadata()
    if name in server.cache.topics or await asyncio.to_thread(server.zk.topic_exists, name):
        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    configs = dict(configs or {})
    config = LogConfig.from_props(configs, defaults=server.default_log_config)
    if manual:
        if num_partitions != -1 or replication_factor != -1:
            raise KafkaError(
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        _check_assignment(server, manual, 0)
        assignment = manual
    else:
        if num_partitions == -1:
            num_partitions = server.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = server.config["default.replication.factor"]
        assignment = _assign(server, num_partitions, replication_factor, 0)
    topic = TopicAssignment(partitions=assignment)
    rf = len(next(iter(assignment.values())))
    if validate_only:
        return topic.topic_id, len(assignment), rf, config
    created = await asyncio.to_thread(server.zk.create_topic, name, topic, configs)
    if not created:
        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    await wait_for_leaders(server, name, len(assignment), timeout_ms)
    return topic.topic_id, len(assignment), rf, config


async def wait_for_leaders(
    server: KafkaServer, name: str, partitions: int, timeout_ms: int
) -> bool:
    """Wait until this broker's cache has a state for every partition (or time out)."""
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
    while True:
        meta = server.cache.topics.get(name)
        if meta is not None and len(meta.states) >= partitions:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            await asyncio.wait_for(server.cluster_sync.changed.wait(), remaining)
        except TimeoutError:
            return False


async def add_partitions(
    server: KafkaServer,
    name: str,
    count: int,
    manual: list[list[int]] | None,
    *,
    validate_only: bool,
    timeout_ms: int,
) -> None:
    meta = server.cache.topics.get(name)
    if meta is None:
        raise KafkaError(
            ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        )
    if meta.is_internal:
        raise KafkaError(ErrorCode.invalid_request, refusal(name, "add partitions to"))
    current = len(meta.replicas)
    if count < current:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"Topic currently has {current} partitions, which is higher than the requested {count}.",
        )
    if count == current:
        raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {current} partitions.")
    rf = len(next(iter(meta.replicas.values())))
    if manual:
        if len(manual) != count - current:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Increasing the number of partitions by {count - current} but {len(manual)} "
                "assignments provided.",
            )
        new = {current + i: list(r) for i, r in enumerate(manual)}
        _check_assignment(server, new, current)
    else:
        new = _assign(server, count - current, rf, current)
    if validate_only:
        return
    assignment = await asyncio.to_thread(server.zk.get_topic_assignment, name)
    if assignment is None:
        raise KafkaError(
            ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        )
    assignment.partitions.update(new)
    await asyncio.to_thread(server.zk.set_topic_assignment, name, assignment)
    await wait_for_leaders(server, name, count, timeout_ms)


async def delete_topic(server: KafkaServer, name: str, timeout_ms: int) -> None:
    if not server.config["delete.topic.enable"]:
        raise KafkaError(
            ErrorCode.topic_deletion_disabled,
            "Topic deletion is disabled (delete.topic.enable=false).",
        )
    if name in INTERNAL_TOPICS:
        raise KafkaError(ErrorCode.invalid_topic_exception, refusal(name, "delete"))
    if name not in server.cache.topics:
        raise KafkaError(
            ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        )
    await asyncio.to_thread(server.zk.mark_topic_for_deletion, name)
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
    while name in server.cache.topics:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise KafkaError(
                ErrorCode.request_timed_out, f"Deletion of {name} is still in progress."
            )
        try:
            await asyncio.wait_for(server.cluster_sync.changed.wait(), remaining)
        except TimeoutError:
            pass
