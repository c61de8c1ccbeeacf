"""GroupMetadataManager: groups and offsets in memory, and in ``__consumer_offsets``.

As in Kafka, a broker coordinates the groups that hash to the ``__consumer_offsets``
partitions it leads. Becoming leader of one schedules a load: the partition is read
from its start into the cache (meanwhile its groups answer
COORDINATOR_LOAD_IN_PROGRESS); losing leadership unloads its groups. Loads and unloads
run one at a time, in order, on one worker task (Kafka's single-threaded scheduler),
with the partition's leader epoch guarding against stale requests.

Writes go through the ReplicaManager with acks=all: a group's metadata or an offset
commit is acknowledged only once the write is committed, and only then does a
committed offset enter the cache.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from ...log.txn_index import COMMIT, parse_control_key
from ...protocol import records as rec
from ...protocol.errors import ErrorCode, KafkaError
from ..partitions import CoordinatorPartitions
from . import codec
from .codec import GroupKey, MemberRecord, OffsetAndMetadata, OffsetKey
from .config import OFFSETS_TOPIC, GroupCoordinatorConfig
from .group import CommitRecord, GroupMetadata, GroupState, TopicPartition, now_ms
from .member import MemberMetadata

log = logging.getLogger(__name__)
E = ErrorCode

_COMMIT_ERRORS = {
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.message_too_large: E.invalid_commit_offset_size,
    E.record_list_too_large: E.invalid_commit_offset_size,
    E.invalid_fetch_size: E.invalid_commit_offset_size,
}
_GROUP_ERRORS = {
    **_COMMIT_ERRORS,
    E.request_timed_out: E.rebalance_in_progress,
    E.message_too_large: E.unknown_server_error,
    E.record_list_too_large: E.unknown_server_error,
    E.invalid_fetch_size: E.unknown_server_error,
}
INVALID_OFFSET = -1


class GroupMetadataManager:
    def __init__(self, broker_id: int, replicas, config: GroupCoordinatorConfig) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.partitions = CoordinatorPartitions(OFFSETS_TOPIC, replicas, config.load_buffer_size)
        self.config = config
        self.groups: dict[str, GroupMetadata] = {}
        self._tasks: set[asyncio.Task] = set()
        self._queued: dict[int, list[tuple[list, asyncio.Future]]] = {}

    def startup(self) -> None:
        self.partitions.start()

    def shutdown(self) -> None:
        self.partitions.stop()
        for task in self._tasks:
            task.cancel()

    # -- where groups live -----------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return codec.partition_for(group_id, self.config.num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.partitions.owned

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.partitions.loading

    @property
    def is_loading(self) -> bool:
        return bool(self.partitions.loading)

    def group_not_exists(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return self.is_group_local(group_id) and (group is None or group.is_(GroupState.DEAD))

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    # -- writes ------------------------------------------------------------------------------
    def _append(self, partition: int, entries: list[tuple[bytes, bytes | None]], acks: int):
        ts = now_ms()
        batch = rec.build_batch([(key, value, [], ts) for key, value in entries])
        return self.replicas.append(OFFSETS_TOPIC, partition, batch, acks=acks)

    async def _committed(self, partition: int, result) -> ErrorCode:
        """Wait for an acks=all append to be committed; the error, NONE if it was."""
        if result.error != E.none:
            return result.error
        ok = await self.replicas.wait_committed(
            OFFSETS_TOPIC, partition, result.last_offset, self.config.commit_timeout_ms / 1000
        )
        if ok:
            return E.none
        part = self.replicas.partitions.get((OFFSETS_TOPIC, partition))
        return (
            E.request_timed_out if part is not None and part.is_leader else E.not_leader_or_follower
        )

    def _append_soon(self, partition: int, entries: list) -> asyncio.Future:
        """Queue offset commit records for one append per partition per event-loop turn:
        the commits of concurrent requests share a batch, and one wait for it to be
        committed. Resolves to (offset of the first of ``entries``, error)."""
        fut = asyncio.get_running_loop().create_future()
        queue = self._queued.get(partition)
        if queue is None:
            queue = self._queued[partition] = []
            asyncio.get_running_loop().call_soon(self._flush_queued, partition)
        queue.append((entries, fut))
        return fut

    def _flush_queued(self, partition: int) -> None:
        queue = self._queued.pop(partition, [])
        result = self._append(partition, [e for entries, _ in queue for e in entries], -1)

        async def finish() -> None:
            error = await self._committed(partition, result)
            offset = result.base_offset
            for entries, fut in queue:
                if not fut.done():
                    fut.set_result((offset, error))
                offset += len(entries)

        self._spawn(finish())

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def store_group(
        self,
        group: GroupMetadata,
        assignment: dict[str, bytes],
        callback: Callable[[ErrorCode], None],
    ) -> None:
        """Append the group's metadata now; ``callback(error)`` once it is committed."""
        value = codec.group_metadata_value(
            codec.GroupRecord(
                protocol_type=group.protocol_type or "",
                generation=group.generation_id,
                protocol=group.protocol_name,
                leader=group.leader_id,
                current_state_timestamp=group.current_state_timestamp or -1,
                members=[
                    MemberRecord(
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.client_host,
                        m.rebalance_timeout_ms,
                        m.session_timeout_ms,
                        m.metadata(group.protocol_name),
                        assignment[m.member_id],
                    )
                    for m in group.members.values()
                ],
            )
        )
        partition = self.partition_for(group.group_id)
        if not self._has_log(partition):
            callback(E.not_coordinator)
            return
        result = self._append(partition, [(codec.group_metadata_key(group.group_id), value)], -1)

        async def finish() -> None:
            error = await self._committed(partition, result)
            if error != E.none:
                log.info("storing group %s failed: %s", group.group_id, error.name)
            callback(_GROUP_ERRORS.get(error, error))

        self._spawn(finish())

    def _has_log(self, partition: int) -> bool:
        part = self.replicas.partitions.get((OFFSETS_TOPIC, partition))
        return part is not None and part.log is not None

    def metadata_too_large(self, metadata: str | None) -> bool:
        return metadata is not None and len(metadata) > self.config.metadata_max_bytes

    def _offset_records(self, group: GroupMetadata, offsets: dict):
        """(valid offsets, partition, their records, None) or (..., the answer for every
        partition) when none can be written."""
        valid = {tp: om for tp, om in offsets.items() if not self.metadata_too_large(om.metadata)}
        partition = self.partition_for(group.group_id)
        if not valid:
            return valid, partition, [], dict.fromkeys(offsets, E.offset_metadata_too_large)
        if not self._has_log(partition):
            return valid, partition, [], dict.fromkeys(offsets, E.not_coordinator)
        entries = [
            (codec.offset_commit_key(group.group_id, t, p), codec.offset_commit_value(om))
            for (t, p), om in valid.items()
        ]
        return valid, partition, entries, None

    async def store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, ErrorCode]:
        """Append the commits (all but those with oversized metadata) at once, then wait
        for them to be committed before caching and acknowledging them."""
        valid, partition, entries, refused = self._offset_records(group, offsets)
        if refused is not None:
            return refused
        group.prepare_offset_commit(valid)
        first, error = await self._append_soon(partition, entries)
        if not group.is_(GroupState.DEAD):
            for i, (tp, om) in enumerate(valid.items()):
                if error == E.none:
                    group.on_offset_commit_append(tp, CommitRecord(first + i, om))
                else:
                    group.fail_pending_offset_write(tp, om)
        error = _COMMIT_ERRORS.get(error, error)
        return {tp: error if tp in valid else E.offset_metadata_too_large for tp in offsets}

    async def store_txn_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: a transactional batch (the producer's id and epoch) in
        ``__consumer_offsets``; the offsets stay pending until the marker."""
        valid, partition, entries, refused = self._offset_records(group, offsets)
        if refused is not None:
            return refused
        batch = rec.build_batch(
            [(key, value, [], now_ms()) for key, value in entries],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        result = self.replicas.append(OFFSETS_TOPIC, partition, batch, acks=-1, coordinator=True)
        error = await self._committed(partition, result)
        if error == E.none and not group.is_(GroupState.DEAD):
            pending = group.pending_txn_offsets.setdefault(producer_id, {})
            for i, (tp, om) in enumerate(valid.items()):
                pending[tp] = CommitRecord(result.base_offset + i, om)
        error = _COMMIT_ERRORS.get(error, error)
        return {tp: error if tp in valid else E.offset_metadata_too_large for tp in offsets}

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker was written to ``__consumer_offsets-<partition>``."""
        for group in self.groups.values():
            if producer_id in group.pending_txn_offsets:
                if self.partition_for(group.group_id) == partition:
                    group.complete_txn_offsets(producer_id, commit)

    def get_offsets(
        self, group_id: str, require_stable: bool, tps: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[int, int, str, ErrorCode]]:
        """(offset, leader epoch, metadata, error) per partition; all of them for None."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return {tp: (INVALID_OFFSET, -1, "", E.none) for tp in tps or ()}
        out = {}
        for tp in list(tps) if tps is not None else list(group.offsets):
            if require_stable and group.has_pending_commit(tp):
                out[tp] = (INVALID_OFFSET, -1, "", E.unstable_offset_commit)
                continue
            om = group.offset(tp)
            if om is None:
                out[tp] = (INVALID_OFFSET, -1, "", E.none)
            else:
                epoch = -1 if om.leader_epoch is None else om.leader_epoch
                out[tp] = (om.offset, epoch, om.metadata, E.none)
        return out

    # -- loading and unloading -----------------------------------------------------------------
    def schedule_load(self, partition: int, epoch: int, on_loaded) -> None:
        log.info("scheduling the load of %s-%d (epoch %d)", OFFSETS_TOPIC, partition, epoch)
        self.partitions.enqueue(lambda: self._load(partition, epoch, on_loaded))

    def schedule_unload(self, partition: int, epoch: int | None, on_unloaded) -> None:
        async def job() -> None:
            self._unload(partition, epoch, on_unloaded)

        self.partitions.enqueue(job)

    async def _load(self, partition: int, epoch: int, on_loaded) -> None:
        if not self.partitions.update_epoch(partition, epoch):
            log.info("not loading %s-%d at stale epoch %d", OFFSETS_TOPIC, partition, epoch)
            return
        if not self.partitions.begin_load(partition):
            return
        started = time.monotonic()
        try:
            loaded = await self._read_partition(partition, epoch)
            if loaded is not None:
                count = self._install(loaded, on_loaded)
                log.info(
                    "loaded %d groups from %s-%d in %.0f ms",
                    count,
                    OFFSETS_TOPIC,
                    partition,
                    (time.monotonic() - started) * 1000,
                )
        finally:
            self.partitions.finish_load(partition)

    async def _read_partition(self, partition: int, epoch: int):
        """Replay the partition: the last value per key wins; tombstones delete."""
        offsets: dict[tuple[str, str, int], CommitRecord] = {}
        groups: dict[str, codec.GroupRecord] = {}
        removed: set[str] = set()
        txn: dict[int, dict] = {}  # producer id -> offsets awaiting its marker

        def replay(data: bytes, pos: int) -> int:
            return _replay(data, pos, offsets, groups, removed, txn)

        if not await self.partitions.read_from_start(partition, epoch, replay):
            return None
        return offsets, groups, removed, txn

    def _install(self, loaded, on_loaded) -> int:
        offsets, groups, removed, txn = loaded
        by_group: dict[str, dict[TopicPartition, CommitRecord]] = {}
        for (group_id, topic, p), record in offsets.items():
            by_group.setdefault(group_id, {})[(topic, p)] = record
        pending_by_group: dict[str, dict[int, dict]] = {}
        for pid, pending in txn.items():
            for (group_id, topic, p), record in pending.items():
                by_pid = pending_by_group.setdefault(group_id, {})
                by_pid.setdefault(pid, {})[(topic, p)] = record
        count = 0
        extra = [g for g in list(by_group) + list(pending_by_group) if g not in groups]
        for group_id in list(groups) + list(dict.fromkeys(extra)):
            record = groups.get(group_id)
            group = _group_from_record(group_id, record) if record else GroupMetadata(group_id)
            group.offsets.update(by_group.get(group_id, {}))
            group.pending_txn_offsets.update(pending_by_group.get(group_id, {}))
            if self.add_group(group) is group:
                on_loaded(group)
                count += 1
        for group_id in removed - set(groups) - set(by_group):
            if group_id in self.groups:
                log.warning("group %s was deleted in the log but is cached", group_id)
        return count

    def _unload(self, partition: int, epoch: int | None, on_unloaded) -> None:
        if not self.partitions.update_epoch(partition, epoch):
            log.info("not unloading %s-%d at stale epoch %s", OFFSETS_TOPIC, partition, epoch)
            return
        self.partitions.release(partition)
        removed = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in removed:
            on_unloaded(group)
            del self.groups[group.group_id]
        if removed:
            log.info(
                "unloaded %d groups of %s-%d (epoch %s)",
                len(removed),
                OFFSETS_TOPIC,
                partition,
                epoch,
            )

    # -- expiry and deletion ----------------------------------------------------------------------
    def cleanup_group_metadata(
        self, groups: Iterable[GroupMetadata], selector: Callable[[GroupMetadata], dict]
    ) -> int:
        """Remove the offsets ``selector`` picks from each group, and the groups left Empty
        with no offsets; write their tombstones (not waited for: a lost tombstone is
        written again by the next expiry run). Returns the number of offsets removed."""
        removed_count = 0
        for group in list(groups):
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets:
                log.info(
                    "group %s is now Dead (generation %d)", group.group_id, group.generation_id
                )
                group.transition_to(GroupState.DEAD)
            partition = self.partition_for(group.group_id)
            if not self._has_log(partition):
                continue
            tombstones = [(codec.offset_commit_key(group.group_id, t, p), None) for t, p in removed]
            if (
                group.is_(GroupState.DEAD)
                and self.groups.get(group.group_id) is group
                and self.groups.pop(group.group_id)
                and group.generation_id > 0
            ):
                tombstones.append((codec.group_metadata_key(group.group_id), None))
            if tombstones:
                result = self._append(partition, tombstones, 1)
                if result.error != E.none:
                    log.warning("tombstones for group %s: %s", group.group_id, result.error.name)
                    continue
                removed_count += len(removed)
        return removed_count

    def expire_offsets(self) -> int:
        now = now_ms()
        retention = self.config.retention_ms
        count = self.cleanup_group_metadata(
            list(self.groups.values()), lambda g: g.remove_expired_offsets(now, retention)
        )
        if count:
            log.info("removed %d expired offsets", count)
        return count


def _replay(data: bytes, pos: int, offsets: dict, groups: dict, removed: set, txn: dict) -> int:
    """Apply the complete batches in ``data``; returns the next offset to read.
    Transactional offset commits wait in ``txn`` for their producer's marker."""
    view = memoryview(data)
    at = 0
    while at + rec.BATCH_HEADER_SIZE <= len(data):
        header = rec.read_batch_header(view, at)
        if at + header.size > len(data):
            break
        if header.is_control:
            if header.base_offset >= pos:
                kinds = [
                    parse_control_key(r.key)
                    for r in rec.decode_records(view[at : at + header.size])
                ]
                pending = txn.pop(header.producer_id, {})
                if kinds and kinds[0] == COMMIT:
                    for key, record in pending.items():
                        current = offsets.get(key)
                        if current is None or current.batch_offset < record.batch_offset:
                            offsets[key] = record
        elif header.is_transactional:
            pending = txn.setdefault(header.producer_id, {})
            for record in rec.decode_records(view[at : at + header.size]):
                if record.offset >= pos:
                    _apply(record, pending, {}, set())
        else:
            for record in rec.decode_records(view[at : at + header.size]):
                if record.offset >= pos:
                    _apply(record, offsets, groups, removed)
        pos = max(pos, header.next_offset)
        at += header.size
    return pos


def _apply(record, offsets: dict, groups: dict, removed: set) -> None:
    if record.key is None:
        return
    try:
        key = codec.read_key(record.key)
        if isinstance(key, OffsetKey):
            if record.value is None:
                offsets.pop(tuple(key), None)
            else:
                value = codec.read_offset_value(record.value)
                offsets[tuple(key)] = CommitRecord(record.offset, value)
        elif isinstance(key, GroupKey):
            if record.value is None:
                groups.pop(key.group, None)
                removed.add(key.group)
            else:
                groups[key.group] = codec.read_group_value(record.value)
                removed.discard(key.group)
    except (codec.CodecError, KafkaError, UnicodeDecodeError) as exc:
        log.warning("skipping an unreadable record at offset %d: %s", record.offset, exc)


def _group_from_record(group_id: str, g: codec.GroupRecord) -> GroupMetadata:
    state = GroupState.STABLE if g.members else GroupState.EMPTY
    group = GroupMetadata(group_id, state)
    group.generation_id = g.generation
    group.protocol_type = g.protocol_type or None
    group.protocol_name = g.protocol
    group.current_state_timestamp = (
        None if g.current_state_timestamp == -1 else g.current_state_timestamp
    )
    for m in g.members:
        member = MemberMetadata(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout,
            m.session_timeout,
            g.protocol_type,
            [(g.protocol or "", m.subscription)],
            m.assignment,
        )
        group.add(member)
    group.leader_id = g.leader
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
