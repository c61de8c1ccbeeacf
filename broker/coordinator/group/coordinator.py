"""GroupCoordinator: membership of classic groups (Kafka's GroupCoordinator), on asyncio.

JoinGroup and SyncGroup responses are callbacks the coordinator invokes when the
rebalance gets there; Kafka's purgatories are asyncio timers on the event loop:
per member a heartbeat (session) timer, per group a join timer (the rebalance
timeout, or group.initial.rebalance.delay.ms for a new group, stretched while members
keep arriving) and a sync timer (members that do not SyncGroup in time are removed).

Everything here runs on the event loop and never awaits between checking and changing
a group, which is what Kafka's group lock gives it. The coordinator owns three
collaborators: ``manager`` (``GroupMetadataManager``: the cache and __consumer_offsets),
``liveness`` (``MemberLiveness``: Heartbeat, LeaveGroup and the heartbeat purgatory)
and ``admin`` (``GroupAdmin``: offsets, descriptions and deletions). They call the
public methods here (validation, ``maybe_prepare_rebalance``, ``try_complete_join``).
"""

from __future__ import annotations

import asyncio
import logging

from ...protocol.errors import ErrorCode
from .admin import GroupAdmin
from .config import OFFSETS_TOPIC, GroupCoordinatorConfig
from .group import GroupMetadata, GroupState, JoinResult, SyncResult
from .liveness import MemberLiveness
from .member import MemberMetadata
from .metadata_manager import GroupMetadataManager

log = logging.getLogger(__name__)
E = ErrorCode
S = GroupState
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupCoordinator:
    def __init__(self, broker_id: int, replicas, config: GroupCoordinatorConfig) -> None:
        self.broker_id = broker_id
        self.config = config
        self.manager = GroupMetadataManager(broker_id, replicas, config)
        self.liveness = MemberLiveness(self)
        self.admin = GroupAdmin(self)
        self.active = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expiry: asyncio.Task | None = None
        self.offsets_topic_lock = asyncio.Lock()  # one creation of __consumer_offsets at a time

    # -- lifecycle -----------------------------------------------------------------------
    def startup(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.liveness.startup(self._loop)
        self.manager.startup()
        self._expiry = asyncio.ensure_future(self._expire_offsets_forever())
        self.active = True

    def shutdown(self) -> None:
        self.active = False
        if self._expiry is not None:
            self._expiry.cancel()
        self.manager.shutdown()
        for group in self.manager.groups.values():
            group.cancel_timers()

    async def _expire_offsets_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.retention_check_interval_ms / 1000)
            try:
                self.manager.expire_offsets()
            except Exception:
                log.exception("offset expiry failed; will retry")

    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, epoch) -> None:
        """ReplicaManager callback: load or unload the groups of an offsets partition."""
        if topic != OFFSETS_TOPIC or not self.active:
            return
        if is_leader:
            log.info("elected group coordinator for %s-%d (epoch %d)", topic, partition, epoch)
            self.manager.schedule_load(partition, epoch, self._on_group_loaded)
        else:
            self.manager.schedule_unload(partition, epoch, self._on_group_unloaded)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.max_size:
            self._prepare_rebalance(group, "freshly-loaded group is over capacity")
        for member in group.members.values():
            self.liveness.schedule_heartbeat(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(S.DEAD)
        if previous is S.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.invoke_join_callback(member, JoinResult(member.member_id, E.not_coordinator))
        elif previous in (S.STABLE, S.COMPLETING_REBALANCE):
            for member in group.members.values():
                group.invoke_sync_callback(member, SyncResult(E.not_coordinator))
        group.pending_sync_members.clear()
        group.cancel_timers()

    # -- validation -------------------------------------------------------------------------
    def validate_group_status(self, group_id: str | None, lenient_id: bool = False):
        """Kafka's validateGroupStatus; ``lenient_id``: "" is a valid group id (offset
        APIs, DescribeGroups, DeleteGroups)."""
        if group_id is None or (not lenient_id and not group_id):
            return E.invalid_group_id
        if not self.active:
            return E.coordinator_not_available
        if self.manager.is_group_loading(group_id):
            return E.coordinator_load_in_progress
        if not self.manager.is_group_local(group_id):
            return E.not_coordinator
        return None

    @staticmethod
    def validate_current_member(group: GroupMetadata, member_id: str, instance_id: str | None):
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return E.unknown_member_id
            if current != member_id:
                log.info(
                    "member %s of instance %s is fenced by %s", member_id, instance_id, current
                )
                return E.fenced_instance_id
            return None
        return None if group.has(member_id) else E.unknown_member_id

    # -- JoinGroup ----------------------------------------------------------------------------
    def join_group(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        supports_skip_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        callback,
    ) -> None:
        error = self.validate_group_status(group_id)
        if error is None and not (
            self.config.min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            error = E.invalid_session_timeout
        is_unknown = member_id == ""
        group = self.manager.get_group(group_id) if error is None else None
        if error is None and group is None:
            if is_unknown:
                group = self.manager.add_group(GroupMetadata(group_id))
            else:
                error = E.unknown_member_id
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        args = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type)
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            callback(JoinResult("", E.group_max_size_reached))
        elif group.is_(S.DEAD):
            callback(JoinResult(member_id, E.coordinator_not_available))
        elif not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinResult(member_id, E.inconsistent_group_protocol))
        elif is_unknown:
            self._new_member_join(
                group, instance_id, require_known_member_id, supports_skip_assignment,
                args, protocols, callback,
            )  # fmt: skip
        else:
            self._current_member_join(group, member_id, instance_id, args, protocols, callback)
        if group.is_(S.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.is_(S.PREPARING_REBALANCE):
            return (
                group.has(member_id) and group.get(member_id).is_awaiting_join
            ) or group.num_awaiting_join < self.config.max_size
        return group.has(member_id) or group.size < self.config.max_size

    def _new_member_join(
        self, group, instance_id, require_known, skip_ok, args, protocols, callback
    ) -> None:
        new_id = group.generate_member_id(args[0], instance_id)
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                log.info(
                    "static member %s of group %s rejoins as %s (was %s)",
                    instance_id,
                    group.group_id,
                    new_id,
                    old_id,
                )
                self._update_static_member(
                    group, old_id, new_id, instance_id, protocols, args, callback, skip_ok
                )
            else:
                self._add_member_and_rebalance(
                    group, new_id, instance_id, args, protocols, callback
                )
        elif require_known:
            group.add_pending_member(new_id)
            self.liveness.schedule_expiration(group, new_id, args[3], pending=True)
            callback(JoinResult(new_id, E.member_id_required))
        else:
            self._add_member_and_rebalance(group, new_id, None, args, protocols, callback)

    def _current_member_join(self, group, member_id, instance_id, args, protocols, callback):
        _client_id, _host, rebalance_ms, session_ms, _ptype = args
        if member_id in group.pending_members:
            if instance_id is not None:
                callback(JoinResult(member_id, E.unknown_member_id))
                return
            self._add_member_and_rebalance(group, member_id, None, args, protocols, callback)
            return
        error = self.validate_current_member(group, member_id, instance_id)
        if error is not None:
            callback(JoinResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_ms, session_ms, callback
            )
        elif state is S.COMPLETING_REBALANCE and member.matches(protocols):
            # the member lost the JoinGroup response: give the current generation again
            callback(self._join_result(group, member_id, group.is_leader(member_id)))
        elif state is S.COMPLETING_REBALANCE:
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_ms, session_ms, callback
            )
        elif state is S.STABLE and (group.is_leader(member_id) or not member.matches(protocols)):
            # the leader may rejoin to have metadata changes (new partitions) reassigned
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_ms, session_ms, callback
            )
        elif state is S.STABLE:
            callback(self._join_result(group, member_id, False))
        else:
            log.warning("member %s rejoins group %s in state %s", member_id, group.group_id, state)
            callback(JoinResult(member_id, E.unknown_member_id))

    @staticmethod
    def _join_result(group, member_id: str, with_members: bool, leader=None, skip=False):
        return JoinResult(
            member_id=member_id,
            error=E.none,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id if leader is None else leader,
            members=group.current_member_metadata() if with_members else [],
            skip_assignment=skip,
        )

    def _add_member_and_rebalance(self, group, member_id, instance_id, args, protocols, callback):
        client_id, host, rebalance_ms, session_ms, protocol_type = args
        member = MemberMetadata(
            member_id, instance_id, client_id, host, rebalance_ms, session_ms,
            protocol_type, list(protocols),
        )  # fmt: skip
        member.is_new = True
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # a new member cannot heartbeat yet: expire it if it never completes the join
        self.liveness.schedule_expiration(group, member_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_ms, session_ms, cb):
        group.update_member(member, protocols, rebalance_ms, session_ms, cb)
        self.maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _update_static_member(
        self, group, old_id, new_id, instance_id, protocols, args, callback, skip_ok
    ) -> None:
        rebalance_ms, session_ms = args[2], args[3]
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.liveness.schedule_heartbeat(group, member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, protocols, rebalance_ms, session_ms, callback)
        if group.is_(S.STABLE):
            if group.select_protocol() != group.protocol_name:
                self.maybe_prepare_rebalance(group, f"static member {instance_id} changed protocol")
                return
            assignment = {m.member_id: m.assignment for m in group.members.values()}

            def stored(error: ErrorCode) -> None:
                if error != E.none:
                    log.warning("could not persist static member %s: %s", instance_id, error.name)
                    group.update_member(member, old[0], old[1], old[2], None)
                    restored = group.replace_static_member(instance_id, new_id, old_id)
                    self.liveness.schedule_heartbeat(group, restored)
                    result = self._join_result(group, "", False, leader=current_leader)
                    result.error = error
                    callback(result)
                    return
                leader = group.is_leader(new_id)
                if skip_ok:  # JoinGroup v9: the leader keeps its role but skips assigning
                    result = self._join_result(group, new_id, leader, skip=leader)
                else:  # the old leader id keeps a restarted leader from reassigning
                    result = self._join_result(group, new_id, False, leader=current_leader)
                group.invoke_join_callback(member, result)

            self.manager.store_group(group, assignment, stored)
        elif group.is_(S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"static member {instance_id} rejoined while syncing")

    # -- rebalancing ------------------------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Start a rebalance if the group's state allows one (Kafka's maybePrepareRebalance)."""
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._propagate_assignment_error(group, E.rebalance_in_progress)
        self._remove_sync_expiration(group)
        was_empty = group.is_(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group %s (generation %d, %s-%d): %s",
            group.group_id,
            group.generation_id,
            OFFSETS_TOPIC,
            self.manager.partition_for(group.group_id),
            reason,
        )
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self._schedule_join(group, delay, (delay, remaining))
        else:
            self._schedule_join(group, group.rebalance_timeout_ms, None)
            self.try_complete_join(group)

    def _schedule_join(self, group, delay_ms: int, initial: tuple[int, int] | None) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
        group.join_is_initial = initial is not None
        group.join_timer = self._loop.call_later(
            delay_ms / 1000, self._on_join_timer, group, initial
        )

    def try_complete_join(self, group: GroupMetadata) -> None:
        """Complete the rebalance now if every member has rejoined (Kafka's
        checkAndComplete on the group's DelayedJoin)."""
        if group.join_timer is not None and not group.join_is_initial:
            if group.has_all_members_joined:
                group.join_timer.cancel()
                group.join_timer = None
                self._on_complete_join(group)

    def _on_join_timer(self, group: GroupMetadata, initial) -> None:
        group.join_timer = None
        if initial is not None:
            delay, remaining = initial
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                configured = self.config.initial_rebalance_delay_ms
                self._schedule_join(
                    group,
                    min(configured, remaining),
                    (min(configured, remaining), max(remaining - delay, 0)),
                )
                return
        self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: member %s did not rejoin", group.group_id, member.member_id)
                group.remove(member.member_id)
        if group.is_(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s cannot complete the rebalance: no member rejoined", group.group_id)
            self._schedule_join(group, group.rebalance_timeout_ms, None)
            self.try_complete_join(group)
            return
        group.init_next_generation()
        if group.is_(S.EMPTY):
            log.info("group %s is now empty (generation %d)", group.group_id, group.generation_id)

            def stored(error: ErrorCode) -> None:
                if error != E.none:
                    log.warning(
                        "could not write the empty group %s: %s", group.group_id, error.name
                    )

            self.manager.store_group(group, {}, stored)
            return
        log.info(
            "stabilized group %s generation %d with %d members (protocol %s)",
            group.group_id,
            group.generation_id,
            group.size,
            group.protocol_name,
        )
        for member in list(group.members.values()):
            result = self._join_result(group, member.member_id, group.is_leader(member.member_id))
            group.invoke_join_callback(member, result)
            self.liveness.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    # -- SyncGroup ----------------------------------------------------------------------------
    def sync_group(
        self, group_id, generation_id, member_id, protocol_type, protocol_name, instance_id,
        assignments: dict[str, bytes], callback,
    ) -> None:  # fmt: skip
        error = self.validate_group_status(group_id)
        if error is E.coordinator_load_in_progress:
            error = E.rebalance_in_progress  # the rebalance state was lost: rejoin
        group = self.manager.get_group(group_id) if error is None else None
        if error is None and group is None:
            error = E.unknown_member_id
        if error is None:
            error = self._validate_sync(
                group, generation_id, member_id, protocol_type, protocol_name, instance_id
            )
        if error is None and group.is_(S.EMPTY):
            error = E.unknown_member_id
        if error is None and group.is_(S.PREPARING_REBALANCE):
            error = E.rebalance_in_progress
        if error is not None:
            callback(SyncResult(error))
            return
        member = group.get(member_id)
        if group.is_(S.STABLE):
            self._remove_pending_sync_member(group, member_id)
            callback(
                SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name)
            )
            self.liveness.schedule_heartbeat(group, member)
            return
        member.awaiting_sync = callback
        self._remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            assignment = {m: assignments.get(m, b"") for m in group.members}
            generation = group.generation_id
            log.info(
                "assignment from leader %s of group %s generation %d (%d members)",
                member_id,
                group_id,
                generation,
                group.size,
            )

            def stored(error: ErrorCode) -> None:
                if not group.is_(S.COMPLETING_REBALANCE) or group.generation_id != generation:
                    return
                if error != E.none:
                    self._propagate_assignment_error(group, error)
                    self.maybe_prepare_rebalance(
                        group, f"storing the assignment failed: {error.name}"
                    )
                    return
                for m in group.members.values():
                    m.assignment = assignment.get(m.member_id, b"")
                self._propagate_assignment(group, E.none)
                group.transition_to(S.STABLE)

            self.manager.store_group(group, assignment, stored)

    def validate_member_generation(self, group, member_id, instance_id, generation_id):
        """Kafka's validateHeartbeat: a live group, a current member (and instance), and
        its generation."""
        if group.is_(S.DEAD):
            return E.coordinator_not_available
        error = self.validate_current_member(group, member_id, instance_id)
        if error is not None:
            return error
        return E.illegal_generation if generation_id != group.generation_id else None

    def _validate_sync(self, group, generation_id, member_id, ptype, pname, instance_id):
        error = self.validate_member_generation(group, member_id, instance_id, generation_id)
        if error is not None:
            return error
        if ptype is not None and ptype != group.protocol_type:
            return E.inconsistent_group_protocol
        if pname is not None and pname != group.protocol_name:
            return E.inconsistent_group_protocol
        return None

    def _propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == E.none
        for member in list(group.members.values()):
            result = SyncResult(
                error,
                member.assignment,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
            )
            if group.invoke_sync_callback(member, result):
                self.liveness.schedule_heartbeat(group, member)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
        group.sync_timer = self._loop.call_later(
            group.rebalance_timeout_ms / 1000, self._on_sync_timer, group, group.generation_id
        )

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self._remove_pending_sync_member(group, "")

    def _on_sync_timer(self, group: GroupMetadata, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation_id or group.state not in (
            S.COMPLETING_REBALANCE,
            S.STABLE,
        ):
            return
        late = list(group.pending_sync_members)
        if late:
            for member_id in late:
                group.remove(member_id)
            self._prepare_rebalance(group, f"removing {late}: no SyncGroup in time")
