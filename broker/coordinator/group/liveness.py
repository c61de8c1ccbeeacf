"""Member liveness for the group coordinator: Heartbeat, LeaveGroup and the session
timers (Kafka's heartbeat purgatory of DelayedHeartbeat, here an asyncio timer per
member on the event loop).

``MemberLiveness`` is a collaborator ``GroupCoordinator`` owns; it calls the
coordinator's public validation and rebalance methods and nothing private.
"""

from __future__ import annotations

import asyncio
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


class MemberLiveness:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self._loop: asyncio.AbstractEventLoop | None = None

    def startup(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    # -- Heartbeat and the heartbeat purgatory --------------------------------------------------
    def heartbeat(self, group_id, member_id, instance_id, generation_id) -> ErrorCode:
        c = self.coordinator
        error = c.validate_group_status(group_id)
        if error is E.coordinator_load_in_progress:
            return E.none  # the group is still loading: answer blindly, as Kafka does
        if error is not None:
            return error
        group = c.manager.get_group(group_id)
        if group is None:
            return E.unknown_member_id
        error = c.validate_member_generation(group, member_id, instance_id, generation_id)
        if error is not None:
            return error
        if group.is_(S.EMPTY):
            return E.unknown_member_id
        self.schedule_heartbeat(group, group.get(member_id))
        return E.rebalance_in_progress if group.is_(S.PREPARING_REBALANCE) else E.none

    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """(Re)start the member's session timer (Kafka's completeAndScheduleNextHeartbeatExpiration)."""
        self.schedule_expiration(group, member.member_id, member.session_timeout_ms)

    def schedule_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int, pending: bool = False
    ) -> None:
        """Expire the member (or the pending member, ``pending``) in ``timeout_ms`` unless
        rescheduled before."""
        old = group.heartbeat_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        group.heartbeat_timers[member_id] = self._loop.call_later(
            timeout_ms / 1000, self._on_expiration, group, member_id, pending
        )

    def _on_expiration(self, group: GroupMetadata, member_id: str, pending: bool) -> None:
        group.heartbeat_timers.pop(member_id, None)
        if group.is_(S.DEAD):
            return
        if pending:
            if member_id in group.pending_members:
                log.info("pending member %s of group %s expired", member_id, group.group_id)
                self.remove_pending_member(group, member_id)
            return
        if group.has(member_id) and not group.get(member_id).satisfied_when_timer_fires():
            log.info("member %s of group %s failed: session timeout", member_id, group.group_id)
            self.remove_member_and_update_group(group, group.get(member_id), "session timeout")

    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        group.invoke_join_callback(member, JoinResult("", E.unknown_member_id))
        group.remove(member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.coordinator.maybe_prepare_rebalance(
                group, f"removing member {member.member_id}: {reason}"
            )
        elif group.is_(S.PREPARING_REBALANCE):
            self.coordinator.try_complete_join(group)

    def remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(S.PREPARING_REBALANCE):
            self.coordinator.try_complete_join(group)

    # -- LeaveGroup -------------------------------------------------------------------------------
    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None, str | None]]):
        """(top-level error, [(member id, instance id, error)]) for (member id, instance id,
        reason) triples. An empty member id with an instance id removes that static
        member (the admin path)."""
        c = self.coordinator
        error = c.validate_group_status(group_id)
        if error is not None:
            return error, []
        group = c.manager.get_group(group_id)
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
                self.remove_pending_member(group, member_id)
            else:
                error = c.validate_current_member(group, member_id, instance_id)
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
        self.remove_member_and_update_group(group, group.get(member_id), "LeaveGroup")
