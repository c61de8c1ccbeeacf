"""Leader elections the controller runs on demand: preferred replica and unclean.

Pure decisions over a partition's assignment, state and the live brokers; the
controller does the ZooKeeper writes. Error codes are Kafka's ElectLeaders codes.
"""

from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..zk.znodes import LeaderAndIsr

PREFERRED, UNCLEAN = 0, 1


def elect(
    election_type: int,
    replicas: list[int],
    state: LeaderAndIsr,
    live: set[int],
    controller_epoch: int,
) -> tuple[ErrorCode, str | None, LeaderAndIsr | None]:
    """(error, message, new state or None) for one partition."""
    if election_type == PREFERRED:
        preferred = replicas[0]
        if state.leader == preferred:
            return ErrorCode.election_not_needed, "Leader is already the preferred replica.", None
        if preferred not in live or preferred not in state.isr:
            return (
                ErrorCode.preferred_leader_not_available,
                f"Failed to elect leader: preferred replica {preferred} is not alive or not in the ISR {state.isr}.",
                None,
            )
        leader, isr = preferred, state.isr
    elif election_type == UNCLEAN:
        if state.leader in live:
            return ErrorCode.election_not_needed, "The partition has a live leader.", None
        candidates = [b for b in state.isr if b in live] or [b for b in replicas if b in live]
        if not candidates:
            return ErrorCode.eligible_leaders_not_available, "No live replica can lead.", None
        leader = candidates[0]
        isr = [b for b in state.isr if b in live] or [leader]
    else:
        return ErrorCode.invalid_request, f"Unknown election type {election_type}.", None
    return (
        ErrorCode.none,
        None,
        LeaderAndIsr(leader, state.leader_epoch + 1, list(isr), controller_epoch, state.zk_version),
    )


def imbalanced(
    assignments: dict[tuple[str, int], list[int]],
    leaders: dict[tuple[str, int], int],
    percentage: int,
) -> list[tuple[str, int]]:
    """Partitions to move back to their preferred leader, for every broker whose share of
    preferred partitions it does not lead exceeds ``leader.imbalance.per.broker.percentage``."""
    by_broker: dict[int, list[tuple[str, int]]] = {}
    for tp, replicas in assignments.items():
        by_broker.setdefault(replicas[0], []).append(tp)
    moves = []
    for broker, tps in by_broker.items():
        not_led = [tp for tp in tps if leaders.get(tp) != broker]
        if tps and len(not_led) * 100 > percentage * len(tps):
            moves.extend(not_led)
    return moves
