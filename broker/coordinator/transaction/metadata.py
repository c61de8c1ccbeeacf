"""A transactional id's state (Kafka's TransactionMetadata and TransactionState)."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field, replace

from .codec import TxnLogValue

TRANSACTION_STATE_TOPIC = "__transaction_state"
NO_PRODUCER_ID = -1
MAX_EPOCH = 32767


class TxnState(enum.IntEnum):
    """Kafka's TransactionState, with the ids it writes to the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


#: Kafka's names of the states (DescribeTransactions, ListTransactions)
STATE_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    #: a transition is being written: other requests get CONCURRENT_TRANSACTIONS
    pending: bool = False
    #: the epoch before the last InitProducerId bump, for its retries (KIP-360; in
    #: memory only, as the log value has no field for it)
    last_epoch: int = -1

    def copy(self, **changes) -> TransactionMetadata:
        return replace(self, partitions=set(self.partitions), **changes)

    def install(self, other: TransactionMetadata) -> None:
        self.producer_id = other.producer_id
        self.producer_epoch = other.producer_epoch
        self.timeout_ms = other.timeout_ms
        self.state = other.state
        self.partitions = set(other.partitions)
        self.start_ms = other.start_ms
        self.last_update_ms = other.last_update_ms
        self.last_epoch = other.last_epoch

    def to_log(self) -> TxnLogValue:
        parts: dict[str, list[int]] | None = None
        if self.state != TxnState.EMPTY:
            parts = {}
            for topic, p in sorted(self.partitions):
                parts.setdefault(topic, []).append(p)
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            int(self.state),
            parts,
            self.last_update_ms,
            self.start_ms,
        )

    @classmethod
    def from_log(cls, transactional_id: str, v: TxnLogValue) -> TransactionMetadata:
        partitions = {(t, p) for t, ids in (v.partitions or {}).items() for p in ids}
        return cls(
            transactional_id,
            v.producer_id,
            v.producer_epoch,
            v.timeout_ms,
            TxnState(v.status),
            partitions,
            v.start_ms,
            v.last_update_ms,
        )
