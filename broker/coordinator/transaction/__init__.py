"""The transaction coordinator (KIP-98): transactional ids in ``__transaction_state``,
their state machine, and the COMMIT/ABORT markers it writes to the partitions."""

from .config import TransactionConfig
from .coordinator import TransactionCoordinator
from .metadata import TRANSACTION_STATE_TOPIC, TransactionMetadata, TxnState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionConfig",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TxnState",
]
