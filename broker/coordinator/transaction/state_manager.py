"""TransactionStateManager: transactional ids in memory and in ``__transaction_state``.

As for groups, a broker coordinates the transactional ids that hash to the partitions
of ``__transaction_state`` it leads. Becoming leader schedules a load (meanwhile those
ids answer COORDINATOR_LOAD_IN_PROGRESS); losing leadership unloads them. Loads and
unloads run in order on one worker task, guarded by the partition's leader epoch,
which is also the coordinator epoch written into the markers.

Every state transition is appended with acks=all and becomes the cached state only
once it is committed (Kafka's pending state and completeTransitionTo).
"""

from __future__ import annotations

import logging
import time

from ...protocol import records as rec
from ...protocol.errors import ErrorCode, KafkaError
from ..partitions import CoordinatorPartitions
from . import codec
from .config import TransactionConfig
from .metadata import TRANSACTION_STATE_TOPIC, TransactionMetadata, TxnState

log = logging.getLogger(__name__)
E = ErrorCode

_APPEND_ERRORS = {  # Kafka's TransactionStateManager.appendTransactionToLog
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.message_too_large: E.unknown_server_error,
    E.record_list_too_large: E.unknown_server_error,
}


class TransactionStateManager:
    def __init__(self, broker_id: int, replicas, config: TransactionConfig) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.partitions = CoordinatorPartitions(
            TRANSACTION_STATE_TOPIC, replicas, config.load_buffer_size
        )
        self.config = config
        self.txns: dict[str, TransactionMetadata] = {}

    def startup(self) -> None:
        self.partitions.start()

    def shutdown(self) -> None:
        self.partitions.stop()

    def partition_for(self, transactional_id: str) -> int:
        return codec.partition_for(transactional_id, self.config.num_partitions)

    @property
    def is_loading(self) -> bool:
        """Some partition of __transaction_state is still loading."""
        return bool(self.partitions.loading)

    def status(self, transactional_id: str) -> ErrorCode:
        """NONE if this broker coordinates the id now, else why not."""
        partition = self.partition_for(transactional_id)
        if partition in self.partitions.loading:
            return E.coordinator_load_in_progress
        if partition not in self.partitions.owned:
            return E.not_coordinator
        return E.none

    def coordinator_epoch(self, transactional_id: str) -> int:
        return self.partitions.epochs.get(self.partition_for(transactional_id), -1)

    # -- writes ------------------------------------------------------------------------------
    async def transition(self, md: TransactionMetadata, new: TransactionMetadata) -> ErrorCode:
        """Write ``new`` for ``md``'s id; install it in ``md`` once committed."""
        md.pending = True
        try:
            error = await self._append(md.transactional_id, new)
            if error == E.none:
                md.install(new)
            else:
                log.info(
                    "transaction %s: writing %s failed: %s",
                    md.transactional_id,
                    new.state.name,
                    error.name,
                )
            return error
        finally:
            md.pending = False

    async def remove(self, md: TransactionMetadata) -> ErrorCode:
        """Expire an idle transactional id: a tombstone, then forget it."""
        md.pending = True
        try:
            error = await self._append(md.transactional_id, None)
            if error == E.none and self.txns.get(md.transactional_id) is md:
                md.state = TxnState.DEAD
                del self.txns[md.transactional_id]
            return error
        finally:
            md.pending = False

    async def _append(self, transactional_id: str, new: TransactionMetadata | None) -> ErrorCode:
        partition = self.partition_for(transactional_id)
        epoch = self.partitions.epochs.get(partition)
        if partition not in self.partitions.owned:
            return E.not_coordinator
        value = None if new is None else codec.value_bytes(new.to_log())
        batch = rec.build_batch(
            [(codec.key_bytes(transactional_id), value, [], int(time.time() * 1000))]
        )
        result = self.replicas.append(TRANSACTION_STATE_TOPIC, partition, batch, acks=-1)
        if result.error != E.none:
            return _APPEND_ERRORS.get(result.error, result.error)
        ok = await self.replicas.wait_committed(
            TRANSACTION_STATE_TOPIC,
            partition,
            result.last_offset,
            self.config.write_timeout_ms / 1000,
        )
        if self.partitions.epochs.get(partition) != epoch or partition not in self.partitions.owned:
            return E.not_coordinator  # leadership moved while we waited
        if not ok:
            part = self.replicas.partitions.get((TRANSACTION_STATE_TOPIC, partition))
            return E.coordinator_not_available if part and part.is_leader else E.not_coordinator
        return E.none

    # -- loading and unloading ---------------------------------------------------------------
    def schedule_load(self, partition: int, epoch: int, on_loaded) -> None:
        log.info(
            "scheduling the load of %s-%d (epoch %d)", TRANSACTION_STATE_TOPIC, partition, epoch
        )
        self.partitions.enqueue(lambda: self._load(partition, epoch, on_loaded))

    def schedule_unload(self, partition: int, epoch: int | None) -> None:
        async def job() -> None:
            self._unload(partition, epoch)

        self.partitions.enqueue(job)

    async def _load(self, partition: int, epoch: int, on_loaded) -> None:
        if not self.partitions.update_epoch(partition, epoch):
            return
        if not self.partitions.begin_load(partition):
            return
        loaded = None
        try:
            loaded = await self._read_partition(partition, epoch)
            if loaded is not None:
                for txn_id, value in loaded.items():
                    self.txns[txn_id] = TransactionMetadata.from_log(txn_id, value)
                log.info(
                    "loaded %d transactional ids from %s-%d",
                    len(loaded),
                    TRANSACTION_STATE_TOPIC,
                    partition,
                )
        finally:
            self.partitions.finish_load(partition)
        if loaded is not None:
            on_loaded([self.txns[t] for t in loaded if t in self.txns])

    async def _read_partition(self, partition: int, epoch: int):
        found: dict[str, codec.TxnLogValue] = {}
        if not await self.partitions.read_from_start(
            partition, epoch, lambda d, p: _replay(d, p, found)
        ):
            return None
        return found

    def _unload(self, partition: int, epoch: int | None) -> None:
        if not self.partitions.update_epoch(partition, epoch):
            return
        self.partitions.release(partition)
        for txn_id in [t for t in self.txns if self.partition_for(t) == partition]:
            del self.txns[txn_id]
        log.info("unloaded %s-%d", TRANSACTION_STATE_TOPIC, partition)


def _replay(data: bytes, pos: int, found: dict) -> int:
    view = memoryview(data)
    at = 0
    while at + rec.BATCH_HEADER_SIZE <= len(data):
        header = rec.read_batch_header(view, at)
        if at + header.size > len(data):
            break
        if not header.is_control:
            for record in rec.decode_records(view[at : at + header.size]):
                if record.offset < pos or record.key is None:
                    continue
                try:
                    txn_id = codec.read_key(record.key)
                    if record.value is None:
                        found.pop(txn_id, None)
                    else:
                        found[txn_id] = codec.read_value(record.value)
                except (codec.CodecError, KafkaError, UnicodeDecodeError, ValueError) as exc:
                    log.warning("skipping an unreadable record at %d: %s", record.offset, exc)
        pos = max(pos, header.next_offset)
        at += header.size
    return pos
