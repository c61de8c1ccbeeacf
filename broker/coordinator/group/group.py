"""GroupMetadata: the state of one classic group (Kafka's GroupMetadata).

States and their allowed predecessors are Kafka's:

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- any

The group also caches its committed offsets; an offset enters the cache only once the
record holding it is committed in ``__consumer_offsets`` (until then it is pending).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from .codec import CodecError, OffsetAndMetadata, subscription_topics
from .member import MemberMetadata

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
TopicPartition = tuple[str, int]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS = {
    _S.EMPTY: {_S.PREPARING_REBALANCE},
    _S.PREPARING_REBALANCE: {_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY},
    _S.COMPLETING_REBALANCE: {_S.PREPARING_REBALANCE},
    _S.STABLE: {_S.COMPLETING_REBALANCE},
    _S.DEAD: set(_S),
}


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """A cached offset and the log offset of the record that wrote it (Kafka keeps the
    batch's; commits of concurrent requests may share a batch here)."""

    batch_offset: int | None
    offset: OffsetAndMetadata


@dataclass(slots=True)
class JoinResult:
    member_id: str
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[dict] | None = None
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.offsets: dict[TopicPartition, CommitRecord] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        #: TxnOffsetCommit: per producer id, offsets that wait for its COMMIT marker
        self.pending_txn_offsets: dict[int, dict[TopicPartition, CommitRecord]] = {}
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False
        # asyncio timers (Kafka's purgatories): per member, the join and the sync wait
        self.heartbeat_timers: dict[str, asyncio.TimerHandle] = {}
        self.join_timer: asyncio.TimerHandle | None = None
        self.join_is_initial = False
        self.sync_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, generation="
            f"{self.generation_id}, members={list(self.members)})"
        )

    # -- state ---------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"Group {self.group_id} should be in one of "
                f"{sorted(s.value for s in VALID_PREVIOUS[state])} before moving to "
                f"{state.value}; it is {self.state.value}"
            )
        self.state = state
        self.current_state_timestamp = now_ms()

    @property
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # -- members -------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata, callback=None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} is already in")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocols)
        member.awaiting_join = callback
        if member.is_awaiting_join:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocols)
            if member.is_awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        timer = self.heartbeat_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        if self.get(self.leader_id).is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                log.info(
                    "group %s: leader %s did not rejoin in time; %s is the new leader",
                    self.group_id,
                    self.leader_id,
                    member_id,
                )
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        member = self.members.pop(old_id)
        # fence a duplicate instance awaiting a response right away
        self.invoke_join_callback(member, JoinResult(old_id, ErrorCode.fenced_instance_id))
        self.invoke_sync_callback(member, SyncResult(ErrorCode.fenced_instance_id))
        member.member_id = new_id
        self.members[new_id] = member
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        timer = self.heartbeat_timers.pop(old_id, None)
        if timer is not None:
            timer.cancel()
        return member

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    def update_member(
        self, member: MemberMetadata, protocols, rebalance_ms: int, session_ms: int, callback
    ) -> None:
        self.supported_protocols.subtract(member.protocols)
        member.supported_protocols = list(protocols)
        self.supported_protocols.update(member.protocols)
        member.rebalance_timeout_ms = rebalance_ms
        member.session_timeout_ms = session_ms
        if callback is not None and not member.is_awaiting_join:
            self.num_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self.num_awaiting_join -= 1
        member.awaiting_join = callback

    def invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> None:
        if member.awaiting_join is not None:
            callback, member.awaiting_join = member.awaiting_join, None
            self.num_awaiting_join -= 1
            callback(result)

    def invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        if member.awaiting_sync is None:
            return False
        callback, member.awaiting_sync = member.awaiting_sync, None
        callback(result)
        return True

    # -- protocols -----------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """The protocol every member supports with the most first-choice votes (ties go
        to the first one voted for, as Kafka's groupBy/maxBy happens to do)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=votes.__getitem__)

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[p] == n for p in protocols
        )

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics |= subscription_topics(m.metadata(self.protocol_name))
        except (CodecError, ValueError):
            log.warning("group %s: cannot parse the consumer subscriptions", self.group_id)
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[dict]:
        return [
            {
                "member_id": member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata(self.protocol_name),
            }
            for member_id, m in self.members.items()
        ]

    # -- offsets ---------------------------------------------------------------------------
    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        record = self.offsets.get(tp)
        return record.offset if record is not None else None

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, record: CommitRecord) -> None:
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.batch_offset < record.batch_offset:
                self.offsets[tp] = record
        if self.pending_offset_commits.get(tp) == record.offset:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, om: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == om:
            del self.pending_offset_commits[tp]

    def remove_offsets(self, tps) -> dict[TopicPartition, OffsetAndMetadata]:
        removed = {}
        for tp in list(tps):
            self.pending_offset_commits.pop(tp, None)
            record = self.offsets.pop(tp, None)
            if record is not None:
                removed[tp] = record.offset
        return removed

    def remove_expired_offsets(self, now: int, retention_ms: int) -> dict:
        """Kafka's removeExpiredOffsets: all offsets of a group Empty for the retention
        period; unsubscribed topics' offsets of a stable consumer group; and, for a
        group that only stores offsets, each offset retention_ms after its commit."""

        def expired(base_ts, subscribed: set[str] = frozenset()) -> list[TopicPartition]:
            out = []
            for tp, record in self.offsets.items():
                if tp[0] in subscribed or tp in self.pending_offset_commits:
                    continue
                om = record.offset
                if om.expire_timestamp is None:
                    if now - base_ts(om) >= retention_ms:
                        out.append(tp)
                elif now >= om.expire_timestamp:
                    out.append(tp)
            return out

        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            doomed = expired(lambda om: state_ts if state_ts is not None else om.commit_timestamp)
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_(GroupState.STABLE)
        ):
            doomed = expired(lambda om: om.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            doomed = expired(lambda om: om.commit_timestamp)
        else:
            doomed = []
        return {tp: self.offsets.pop(tp).offset for tp in doomed}

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def has_pending_commit(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits or any(
            tp in offsets for offsets in self.pending_txn_offsets.values()
        )

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> int:
        """A COMMIT marker makes the producer's offsets the committed ones (unless a
        later plain commit already replaced them); ABORT drops them. Kafka's
        completePendingTxnOffsetCommit. Returns how many were made visible."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return 0
        for tp, record in pending.items():
            current = self.offsets.get(tp)
            if (
                current is None
                or current.batch_offset is None
                or (record.batch_offset is not None and current.batch_offset < record.batch_offset)
            ):
                self.offsets[tp] = record
        return len(pending)

    # -- descriptions ------------------------------------------------------------------------
    def summary(self) -> dict:
        stable = self.is_(GroupState.STABLE)
        return {
            "group_state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol_data": (self.protocol_name or "") if stable else "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(self.protocol_name) if stable else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in self.members.values()
            ],
        }

    def cancel_timers(self) -> None:
        for timer in self.heartbeat_timers.values():
            timer.cancel()
        self.heartbeat_timers.clear()
        for timer in (self.join_timer, self.sync_timer):
            if timer is not None:
                timer.cancel()
        self.join_timer = self.sync_timer = None
