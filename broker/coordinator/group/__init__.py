"""The group coordinator (Kafka's kafka.coordinator.group): classic consumer groups and
their committed offsets, kept in the compacted internal topic ``__consumer_offsets``.

- ``GroupCoordinator`` (coordinator.py): JoinGroup, SyncGroup, rebalances, static
  membership; asyncio timers for joins and syncs. It owns the collaborators below.
- ``MemberLiveness`` (liveness.py): Heartbeat, LeaveGroup, session timers (Kafka's
  heartbeat purgatory).
- ``GroupAdmin`` (admin.py): OffsetCommit, TxnOffsetCommit, OffsetFetch, DescribeGroups,
  ListGroups, DeleteGroups, OffsetDelete, the offsets of deleted partitions.
- ``GroupMetadataManager`` (metadata_manager.py): the cache, writes (acks=all) and
  loads/unloads as leadership of ``__consumer_offsets`` partitions moves.
- ``GroupMetadata`` / ``MemberMetadata`` (group.py, member.py): the state machine.
- codec.py: Kafka's record formats for ``__consumer_offsets`` and the consumer protocol.
"""

from .codec import OffsetAndMetadata, partition_for
from .config import OFFSETS_TOPIC, GroupCoordinatorConfig
from .coordinator import GroupCoordinator
from .group import GroupMetadata, GroupState, JoinResult, SyncResult

__all__ = [
    "OFFSETS_TOPIC",
    "GroupCoordinator",
    "GroupCoordinatorConfig",
    "GroupMetadata",
    "GroupState",
    "JoinResult",
    "OffsetAndMetadata",
    "SyncResult",
    "partition_for",
]
