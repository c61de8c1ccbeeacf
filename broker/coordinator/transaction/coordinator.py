"""TransactionCoordinator: Kafka's InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn
and EndTxn for transactional ids, the markers, and the abort of timed-out transactions.

EndTxn writes PrepareCommit/PrepareAbort and answers; then the markers go to every
partition of the transaction (WriteTxnMarkers to its leader, retried until it takes
them), and CompleteCommit/CompleteAbort is written. A new coordinator that loads a
Prepare* state finishes the job the same way. Requests for an id whose markers are
still being written get CONCURRENT_TRANSACTIONS, which clients retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from ...protocol.errors import ErrorCode
from .config import TransactionConfig
from .metadata import (
    COMPLETE,
    MAX_EPOCH,
    PREPARE,
    TRANSACTION_STATE_TOPIC,
    TransactionMetadata,
    TxnState,
    now_ms,
)
from .state_manager import TransactionStateManager

log = logging.getLogger(__name__)
E = ErrorCode
S = TxnState

TopicPartition = tuple[str, int]
#: (leader id, producer id, epoch, commit, coordinator epoch, partitions) -> errors
MarkerSender = Callable[
    [int, int, int, bool, int, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]
]
_MARKER_RETRY_S = 0.1


class TransactionCoordinator:
    def __init__(
        self,
        broker_id: int,
        replicas,
        config: TransactionConfig,
        producer_ids,
        leader_of: Callable[[str, int], int],
        send_markers: MarkerSender,
    ) -> None:
        self.config = config
        self.manager = TransactionStateManager(broker_id, replicas, config)
        self.producer_ids = producer_ids
        self.leader_of = leader_of
        self.send_markers = send_markers
        self.topic_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self.active = False

    def startup(self) -> None:
        self.manager.startup()
        self._spawn(self._forever(self.config.abort_interval_ms, self.abort_timed_out))
        self._spawn(self._forever(self.config.remove_interval_ms, self.remove_expired))
        self.active = True

    def shutdown(self) -> None:
        self.active = False
        self.manager.shutdown()
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, epoch) -> None:
        if topic != TRANSACTION_STATE_TOPIC or not self.active:
            return
        if is_leader:
            self.manager.schedule_load(partition, epoch, self._on_loaded)
        else:
            self.manager.schedule_unload(partition, epoch)

    def _on_loaded(self, loaded: list[TransactionMetadata]) -> None:
        """Finish what the previous coordinator prepared (Kafka's onTransactionLoaded)."""
        for md in loaded:
            if md.state in PREPARE:
                self._spawn(self._complete(md, md.state == S.PREPARE_COMMIT))

    # -- InitProducerId ----------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> tuple[ErrorCode, int, int]:
        if not transactional_id:
            return E.invalid_request, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return E.invalid_transaction_timeout, -1, -1
        error = self.manager.status(transactional_id)
        if error != E.none:
            return error, -1, -1
        md = self.manager.txns.get(transactional_id)
        if md is None or md.state == S.DEAD:
            new_pid = await self.producer_ids.next_id()
            md = self.manager.txns.get(transactional_id)
            if md is None or md.state == S.DEAD:
                md = TransactionMetadata(transactional_id, new_pid, -1, timeout_ms)
                self.manager.txns[transactional_id] = md
        if md.pending or md.state in PREPARE:
            return E.concurrent_transactions, -1, -1
        if producer_id != -1 and (producer_id, epoch) != (md.producer_id, md.producer_epoch):
            retry = producer_id == md.producer_id and epoch == md.last_epoch >= 0
            if retry and md.state == S.EMPTY:  # the answer to the bump was lost: again
                return E.none, md.producer_id, md.producer_epoch
            return E.producer_fenced, -1, -1
        if md.state == S.ONGOING:
            # fence the old producer: abort its transaction under a bumped epoch
            error = await self._prepare_abort(md, fence=True)
            return (error if error != E.none else E.concurrent_transactions), -1, -1
        new = md.copy(state=S.EMPTY, timeout_ms=timeout_ms, start_ms=-1, last_update_ms=now_ms())
        new.partitions.clear()
        new.last_epoch = md.producer_epoch
        if md.producer_epoch >= MAX_EPOCH - 1:  # epoch exhausted: a new producer id
            new.producer_id = await self.producer_ids.next_id()
            new.producer_epoch = 0
        else:
            new.producer_epoch = md.producer_epoch + 1
        error = await self.manager.transition(md, new)
        if error != E.none:
            return error, -1, -1
        return E.none, md.producer_id, md.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------
    def _check(self, transactional_id: str, producer_id: int, epoch: int):
        """(error, metadata) for a request of a producer that has an id."""
        error = self.manager.status(transactional_id)
        if error != E.none:
            return error, None
        md = self.manager.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return E.invalid_producer_id_mapping, None
        if md.producer_epoch != epoch:
            return E.producer_fenced, None
        if md.pending or md.state in PREPARE or md.state == S.PREPARE_EPOCH_FENCE:
            return E.concurrent_transactions, None
        return E.none, md

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, tps: Iterable[TopicPartition]
    ) -> ErrorCode:
        error, md = self._check(transactional_id, producer_id, epoch)
        if md is None:
            return error
        tps = set(tps)
        if md.state == S.ONGOING and tps <= md.partitions:
            return E.none
        now = now_ms()
        new = md.copy(state=S.ONGOING, last_update_ms=now)
        if md.state != S.ONGOING:
            new.start_ms = now
            new.partitions.clear()
        new.partitions |= tps
        return await self.manager.transition(md, new)

    # -- EndTxn --------------------------------------------------------------------------------
    async def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> ErrorCode:
        error = self.manager.status(transactional_id)
        if error != E.none:
            return error
        md = self.manager.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if md.producer_epoch != epoch:
            return E.producer_fenced
        if md.pending:
            return E.concurrent_transactions
        done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if md.state == done:
            return E.none  # a retry of an EndTxn that went through
        if md.state == prepared:
            return E.concurrent_transactions
        if md.state != S.ONGOING:
            return E.invalid_txn_state
        new = md.copy(state=prepared, last_update_ms=now_ms())
        error = await self.manager.transition(md, new)
        if error == E.none:
            self._spawn(self._complete(md, commit))
        return error

    async def _prepare_abort(self, md: TransactionMetadata, fence: bool) -> ErrorCode:
        new = md.copy(state=S.PREPARE_ABORT, last_update_ms=now_ms())
        if fence and md.producer_epoch < MAX_EPOCH - 1:
            new.producer_epoch = md.producer_epoch + 1
        error = await self.manager.transition(md, new)
        if error == E.none:
            self._spawn(self._complete(md, False))
        return error

    async def _complete(self, md: TransactionMetadata, commit: bool) -> None:
        """Write the markers, then Complete*; give up only if we stop coordinating."""
        txn_id = md.transactional_id
        coordinator_epoch = self.manager.coordinator_epoch(txn_id)
        pending = set(md.partitions)
        while pending:
            if self.manager.status(txn_id) != E.none or md.producer_id < 0:
                return
            if self.manager.coordinator_epoch(txn_id) != coordinator_epoch:
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                by_leader.setdefault(self.leader_of(*tp), []).append(tp)
            results = await asyncio.gather(
                *(
                    self._send(leader, md, commit, coordinator_epoch, tps)
                    for leader, tps in by_leader.items()
                )
            )
            for errors in results:
                for tp, err in errors.items():
                    if err in (E.none, E.unknown_topic_or_partition):
                        pending.discard(tp)  # a deleted topic needs no marker
            if pending:
                await asyncio.sleep(_MARKER_RETRY_S)
        new = md.copy(
            state=S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, last_update_ms=now_ms()
        )
        new.partitions.clear()
        while self.manager.status(txn_id) == E.none:
            if await self.manager.transition(md, new) == E.none:
                log.info("transaction %s %s", txn_id, "committed" if commit else "aborted")
                return
            await asyncio.sleep(_MARKER_RETRY_S)

    async def _send(self, leader, md, commit, coordinator_epoch, tps) -> dict:
        if leader < 0:
            return dict.fromkeys(tps, E.not_leader_or_follower)
        try:
            return await self.send_markers(
                leader, md.producer_id, md.producer_epoch, commit, coordinator_epoch, tps
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure is retried: the task must not die
            log.info("markers to broker %d failed: %r", leader, exc)
            return dict.fromkeys(tps, E.network_exception)

    # -- timeouts ----------------------------------------------------------------------------
    async def _forever(self, interval_ms: int, chore) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await chore()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; will retry", chore.__name__)

    async def remove_expired(self) -> int:
        """Kafka's removeExpiredTransactionalIds: ids idle (Empty or Complete*) for
        transactional.id.expiration.ms get a tombstone; the next InitProducerId for one
        gets a new producer id."""
        deadline = now_ms() - self.config.id_expiration_ms
        count = 0
        for md in list(self.manager.txns.values()):
            idle = md.state == S.EMPTY or md.state in COMPLETE
            if not idle or md.pending or md.last_update_ms > deadline:
                continue
            if self.manager.status(md.transactional_id) != E.none:
                continue
            if await self.manager.remove(md) == E.none:
                log.info("transactional id %s expired", md.transactional_id)
                count += 1
        return count

    async def abort_timed_out(self) -> int:
        """Abort (fencing the producer's epoch, as Kafka does) every ongoing transaction
        older than its timeout; returns how many."""
        now = now_ms()
        count = 0
        for md in list(self.manager.txns.values()):
            if md.state != S.ONGOING or md.pending or now <= md.start_ms + md.timeout_ms:
                continue
            if self.manager.status(md.transactional_id) != E.none:
                continue
            log.info(
                "aborting transaction %s: timed out after %d ms", md.transactional_id, md.timeout_ms
            )
            if await self._prepare_abort(md, fence=True) == E.none:
                count += 1
        return count
