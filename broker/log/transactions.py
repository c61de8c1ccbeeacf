"""The transactional parts of a Log (Kafka's UnifiedLog appendAsLeader with
AppendOrigin.COORDINATOR for markers, the last stable offset, collectAbortedTxns), as
a mixin so log.py stays about segments and offsets."""

from __future__ import annotations

from broker.log.append import LogAppendInfo
from broker.log.segment import now_ms as wall_clock_ms
from broker.log.txn_index import (
    ABORT,
    AbortedTxn,
    control_key,
    control_value,
    parse_control_key,
)
from broker.protocol.records import (
    BatchHeader,
    assign_offsets,
    build_batch,
    decode_records,
    validate_produce,
)

__all__ = ["LogTransactions"]


class LogTransactions:
    """Needs the Log's producer_state, txn_index, config, leader_epoch_cache, log_end_offset,
    _hw, log_start_offset, active_segment and _append."""

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int = 0,
        now_ms: int | None = None,
    ) -> LogAppendInfo:
        """Append a COMMIT or ABORT control batch for ``producer_id`` (WriteTxnMarkers,
        Kafka's appendAsLeader with AppendOrigin.COORDINATOR) and close its transaction."""
        self.producer_state.check_marker(producer_id, producer_epoch)
        now = wall_clock_ms() if now_ms is None else now_ms
        records = bytearray(
            build_batch(
                [(control_key(commit), control_value(coordinator_epoch), [], now)],
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                is_transactional=True,
                is_control=True,
            )
        )
        headers = validate_produce(
            records,
            max_message_bytes=max(self.config.max_message_bytes, len(records)),
            allow_control=True,
        )
        info = assign_offsets(records, headers, self.log_end_offset, leader_epoch)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, info.first_offset)
        offset = info.first_offset
        self._append(records, offset, offset, info.max_timestamp, offset, now)
        self._complete_txn(producer_id, producer_epoch, coordinator_epoch, commit, offset, now)
        self.producer_state.map_end_offset = self.log_end_offset
        return LogAppendInfo(
            offset, offset, info.max_timestamp, offset, -1, self.log_start_offset, 1
        )

    def _complete_txn(
        self, pid: int, epoch: int, coordinator_epoch: int, commit: bool, offset: int, ts: int
    ) -> None:
        first = self.producer_state.complete_txn(pid, epoch, coordinator_epoch, ts)
        if not commit and first is not None:
            unstable = self.producer_state.first_unstable_offset()
            lso = offset if unstable is None else min(unstable, offset)
            self.txn_index.append(
                self.active_segment.base_offset, AbortedTxn(pid, first, offset, lso)
            )

    def _replay_control(self, records, header: BatchHeader) -> None:
        """A replicated marker: close the transaction, index it if it aborted."""
        view = memoryview(records)[header.position : header.position + header.size]
        kinds = [parse_control_key(r.key) for r in decode_records(view)]
        commit = bool(kinds) and kinds[0] != ABORT
        self._complete_txn(
            header.producer_id,
            header.producer_epoch,
            -1,
            commit,
            header.base_offset,
            header.max_timestamp,
        )

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of the oldest open transaction, high watermark)."""
        unstable = self.producer_state.first_unstable_offset()
        return self._hw if unstable is None else min(unstable, self._hw)

    def collect_aborted(self, start: int, upper: int) -> list[AbortedTxn]:
        return self.txn_index.collect(start, upper)
