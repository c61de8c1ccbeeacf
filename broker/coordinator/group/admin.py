"""The group coordinator's offset and admin side: OffsetCommit, OffsetFetch,
DescribeGroups, ListGroups, DeleteGroups and OffsetDelete (Kafka's GroupCoordinator
handleCommitOffsets ... handleDeleteOffsets).

``GroupAdmin`` is a collaborator ``GroupCoordinator`` owns; it calls the coordinator's
public validation methods, its ``GroupMetadataManager`` and its ``MemberLiveness``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from .codec import OffsetAndMetadata
from .group import GroupMetadata, GroupState, TopicPartition

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

log = logging.getLogger(__name__)
E = ErrorCode
S = GroupState
DEAD_SUMMARY = {"group_state": "Dead", "protocol_type": "", "protocol_data": "", "members": []}
EMPTY_SUMMARY = {"group_state": "", "protocol_type": "", "protocol_data": "", "members": []}


class GroupAdmin:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.manager = coordinator.manager

    # -- OffsetCommit ------------------------------------------------------------------------
    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """Validate, append and wait until the commit is committed; an error for every
        partition when the request is refused (nothing is written then)."""
        error = self.coordinator.validate_group_status(group_id, lenient_id=True)
        group = self.manager.get_group(group_id) if error is None else None
        if error is None and group is None:
            if generation_id < 0:  # a group that only stores offsets ("simple" consumer)
                log.info("creating group %s through a manual offset commit", group_id)
                group = self.manager.add_group(GroupMetadata(group_id))
            else:
                error = E.illegal_generation
        if error is None:
            error = self._validate_offset_commit(group, generation_id, member_id, instance_id)
        if error is None and group.is_(S.COMPLETING_REBALANCE):
            error = E.rebalance_in_progress
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            self.coordinator.liveness.schedule_heartbeat(group, group.get(member_id))
        return await self.manager.store_offsets(group, offsets)

    async def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (Kafka's handleTxnCommitOffsets): the group is created if
        needed; a member that names its generation (v3, KIP-447) is checked."""
        error = self.coordinator.validate_group_status(group_id, lenient_id=True)
        group = None
        if error is None:
            group = self.manager.get_group(group_id)
            if group is None:
                group = self.manager.add_group(GroupMetadata(group_id))
            if group.is_(S.DEAD):
                error = E.coordinator_not_available
            elif generation_id >= 0 or member_id or instance_id is not None:
                if member_id and not group.has(member_id):
                    error = E.unknown_member_id
                elif generation_id >= 0 and generation_id != group.generation_id:
                    error = E.illegal_generation
        if error is not None:
            return dict.fromkeys(offsets, error)
        return await self.manager.store_txn_offsets(group, producer_id, producer_epoch, offsets)

    def _validate_offset_commit(self, group, generation_id, member_id, instance_id):
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        if generation_id < 0 and group.is_(S.EMPTY):
            return None  # an admin client, or a consumer without group management
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = self.coordinator.validate_current_member(group, member_id, instance_id)
            if error is not None:
                return error
            return E.illegal_generation if generation_id != group.generation_id else None
        if not group.is_(S.EMPTY):
            return E.unknown_member_id  # only members commit to a non-empty group
        return None

    # -- OffsetFetch ------------------------------------------------------------------------------
    def fetch_offsets(
        self,
        group_id: str,
        require_stable: bool,
        tps: list[TopicPartition] | None,
    ):
        """(error, {tp: (offset, leader epoch, metadata, error)}); all offsets for None."""
        error = self.coordinator.validate_group_status(group_id, lenient_id=True)
        if error is not None:
            return error, {}
        return E.none, self.manager.get_offsets(group_id, require_stable, tps)

    # -- DescribeGroups / ListGroups ----------------------------------------------------------------
    def describe_group(self, group_id: str) -> tuple[ErrorCode, dict]:
        error = self.coordinator.validate_group_status(group_id, lenient_id=True)
        if error is not None:
            return error, EMPTY_SUMMARY
        group = self.manager.get_group(group_id)
        return E.none, group.summary() if group is not None else DEAD_SUMMARY

    def list_groups(self, states: set[str], types: set[str]) -> tuple[ErrorCode, list[dict]]:
        if not self.coordinator.active:
            return E.coordinator_not_available, []
        error = E.coordinator_load_in_progress if self.manager.is_loading else E.none
        states = {s.lower() for s in states}
        if types and "classic" not in {t.lower() for t in types}:
            return error, []
        groups = [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
                "group_type": "classic",
            }
            for g in self.manager.groups.values()
            if not states or g.state.value.lower() in states
        ]
        return error, groups

    # -- DeleteGroups / OffsetDelete -----------------------------------------------------------------
    def _missing_group_error(self, group_id: str) -> ErrorCode:
        return (
            E.group_id_not_found if self.manager.group_not_exists(group_id) else E.not_coordinator
        )

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        doomed = []
        for group_id in group_ids:
            error = self.coordinator.validate_group_status(group_id, lenient_id=True)
            group = self.manager.get_group(group_id) if error is None else None
            if error is not None:
                errors[group_id] = error
            elif group is None or group.is_(S.DEAD):
                errors[group_id] = self._missing_group_error(group_id)
            elif group.is_(S.EMPTY):
                group.transition_to(S.DEAD)
                doomed.append(group)
            else:
                errors[group_id] = E.non_empty_group
        if doomed:
            removed = self.manager.cleanup_group_metadata(
                doomed, lambda g: g.remove_offsets(list(g.offsets))
            )
            log.info(
                "deleted groups %s (%d offsets)", ", ".join(g.group_id for g in doomed), removed
            )
            for group in doomed:
                group.cancel_timers()
                errors[group.group_id] = E.none
        return errors

    def handle_deleted_partitions(self, tps: list[TopicPartition]) -> int:
        """Kafka's handleDeletedPartitions: a deleted topic's committed offsets leave every
        group this broker coordinates, with tombstones in __consumer_offsets."""
        removed = self.manager.cleanup_group_metadata(
            list(self.manager.groups.values()), lambda g: g.remove_offsets(tps)
        )
        if removed:
            topics = ", ".join(sorted({t for t, _ in tps}))
            log.info("removed %d offsets of deleted partitions (topics %s)", removed, topics)
        return removed

    def delete_offsets(
        self, group_id: str, tps: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self.coordinator.validate_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(S.DEAD):
            return self._missing_group_error(group_id), {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(S.EMPTY):
            eligible = list(tps)
        elif group.is_consumer_group:
            eligible = [tp for tp in tps if not group.is_subscribed_to(tp[0])]
            errors = {
                tp: E.group_subscribed_to_topic for tp in tps if group.is_subscribed_to(tp[0])
            }
        else:
            return E.non_empty_group, {}
        if eligible:
            removed = self.manager.cleanup_group_metadata(
                [group], lambda g: g.remove_offsets(eligible)
            )
            log.info("deleted %d offsets of group %s", removed, group_id)
            errors.update(dict.fromkeys(eligible, E.none))
        return E.none, errors
