"""The group coordinator's liveness side: Heartbeat, session timeouts (a timer per
member, Kafka's heartbeat purgatory) and LeaveGroup, mixed into GroupCoordinator."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from .group import GroupMetadata, GroupState, JoinResult
from .member import MemberMetadata

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

log = logging.getLogger(__name__)
E = ErrorCode
S = GroupState


class LivenessMixin:
    # -- heartbeats and session timeouts ----------------------------------------------------------
    def heartbeat(
        self: GroupCoordinator, group_id, member_id, instance_id, generation_id
    ) -> ErrorCode:
        error = self.validate_group_status(group_id)
        if error is E.coordinator_load_in_progress:
            return E.none  # the group is still loading: answer blindly, as Kafka does
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return E.unknown_member_id
        error = self.validate_member_generation(group, member_id, instance_id, generation_id)
        if error is not None:
            return error
        if group.is_(S.EMPTY):
            return E.unknown_member_id
        self._schedule_heartbeat(group, group.get(member_id))
        return E.rebalance_in_progress if group.is_(S.PREPARING_REBALANCE) else E.none

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._schedule_heartbeat_ms(group, member.member_id, member.session_timeout_ms)

    def _schedule_heartbeat_ms(self, group, member_id: str, timeout_ms: int, pending=False) -> None:
        old = group.heartbeat_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        group.heartbeat_timers[member_id] = self._loop.call_later(
            timeout_ms / 1000, self._on_heartbeat_timer, group, member_id, pending
        )

    def _on_heartbeat_timer(self, group: GroupMetadata, member_id: str, pending: bool) -> None:
        group.heartbeat_timers.pop(member_id, None)
        if group.is_(S.DEAD):
            return
        if pending:
            if member_id in group.pending_members:
                log.info("pending member %s of group %s expired", member_id, group.group_id)
                self._remove_pending_member(group, member_id)
            return
        if group.has(member_id) and not group.get(member_id).satisfied_when_timer_fires():
            log.info("member %s of group %s failed: session timeout", member_id, group.group_id)
            self._remove_member_and_update_group(group, group.get(member_id), "session timeout")

    def _remove_member_and_update_group(self, group, member: MemberMetadata, reason: str) -> None:
        group.invoke_join_callback(member, JoinResult("", E.unknown_member_id))
        group.remove(member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- LeaveGroup -------------------------------------------------------------------------------
    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]):
        """(top-level error, [(member id, instance id, error)]) for (member id, instance id,
        reason) triples. An empty member id with an instance id removes that static
        member (the admin path)."""
        error = self.validate_group_status(group_id)
        if error is not None:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return E.none, [(m, i, E.unknown_member_id) for m, i, _ in leaving]
        if group.is_(S.DEAD):
            return E.coordinator_not_available, []
        results = []
        for member_id, instance_id, reason in leaving:
            if member_id == "":
                current = group.static_member_id(instance_id)
                if current is None:
                    results.append((member_id, instance_id, E.unknown_member_id))
                    continue
                self._leave(group, current, reason)
            elif member_id in group.pending_members:
                self._remove_pending_member(group, member_id)
            else:
                error = self.validate_current_member(group, member_id, instance_id)
                if error is not None:
                    results.append((member_id, instance_id, error))
                    continue
                self._leave(group, member_id, reason)
            results.append((member_id, instance_id, E.none))
        return E.none, results

    def _leave(self, group: GroupMetadata, member_id: str, reason: str | None) -> None:
        log.info(
            "member %s left group %s (reason: %s)", member_id, group.group_id, reason or "none"
        )
        self._remove_member_and_update_group(group, group.get(member_id), "LeaveGroup")
