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


def rack_alternated(brokers: dict[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn (Kafka's getRackAlternatedBrokerList)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(brokers.items()):
        by_rack.setdefault(rack, []).append(broker)
    racks = sorted(by_rack)
    out: list[int] = []
    while len(out) < len(brokers):
        for rack in racks:
            if by_rack[rack]:
                out.append(by_rack[rack].pop(0))
    return out


def assign_replicas_rack_aware(
    brokers: dict[int, str],
    partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    start_index: int | None = None,
    next_shift: int | None = None,
) -> dict[int, list[int]]:
    """Kafka's rack-aware placement: the same walk over a rack-alternated broker list,
    skipping a broker whose rack (or itself) already holds a replica of the partition
    until every rack (or broker) has one."""
    n = len(brokers)
    if replication_factor > n:
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {replication_factor} larger than available brokers: {n}.",
        )
    ordered = rack_alternated(brokers)
    n_racks = len(set(brokers.values()))
    start = random.randrange(n) if start_index is None else start_index
    shift = random.randrange(n) if next_shift is None else next_shift
    result: dict[int, list[int]] = {}
    current = start_partition
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start) % n
        leader = ordered[first]
        replicas, racks = [leader], {brokers[leader]}
        k = 0
        while len(replicas) < replication_factor:
            candidate = ordered[_replica_index(first, shift, k, n)]
            k += 1
            rack = brokers[candidate]
            if candidate in replicas:
                continue
            if rack in racks and len(racks) < n_racks:
                continue
            replicas.append(candidate)
            racks.add(rack)
        result[current] = replicas
        current += 1
    return result
