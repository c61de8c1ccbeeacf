"""Replica assignment for new topics and partitions, as Kafka's AdminUtils does it.

Spec 003 section 4: replica j of partition i goes on broker (i + j + start) mod n.
Kafka's refinement, kept here: the first replica of partition i is on broker
(start + i) mod n, and the followers are shifted by a per-round increment so that
replicas of consecutive partitions do not all follow the same leader.
"""

from __future__ import annotations

import random

from ..protocol.errors import ErrorCode, KafkaError


def assign_replicas(
    brokers: list[int],
    partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    start_index: int | None = None,
    next_shift: int | None = None,
) -> dict[int, list[int]]:
    """partition -> replica list (first is the preferred leader)."""
    if partitions <= 0:
        raise KafkaError(
            ErrorCode.invalid_partitions, "Number of partitions must be larger than 0."
        )
    if replication_factor <= 0:
        raise KafkaError(
            ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."
        )
    n = len(brokers)
    if replication_factor > n:
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {replication_factor} larger than available brokers: {n}.",
        )
    ordered = sorted(brokers)
    start = random.randrange(n) if start_index is None else start_index
    shift = random.randrange(n) if next_shift is None else next_shift
    current = start_partition
    result: dict[int, list[int]] = {}
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[_replica_index(first, shift, j, n)])
        result[current] = replicas
        current += 1
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    step = 1 + (shift + j) % (n - 1)
    return (first + step) % n
