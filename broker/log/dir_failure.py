"""Log dir failures, as Kafka's ``LogDirFailureChannel`` reports them.

A write or fsync that fails with an I/O error leaves the data on that disk in doubt,
so the whole log dir goes offline: its partitions answer KAFKA_STORAGE_ERROR, and the
broker tells the controller (``/log_dir_event_notification``), which moves their
leadership to other replicas. A dir that is only full is not in doubt: the append
that did not fit is cut off again and refused (KAFKA_STORAGE_ERROR), and the dir
keeps serving reads; see ``is_disk_full``.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from pathlib import Path

from ..protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

_FULL = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(exc: OSError) -> bool:
    return exc.errno in _FULL


def storage_error(message: str) -> KafkaError:
    return KafkaError(ErrorCode.kafka_storage_error, message)


def write_failure(
    channel: LogDirFailureChannel | None, log_dir: Path, where: str, exc: OSError, what: str
) -> KafkaError:
    """KAFKA_STORAGE_ERROR for a failed ``what`` ("append", "flush") of ``where``: a
    full disk refuses just that append (the segment already cut it back); any other
    error takes ``log_dir`` offline through ``channel``."""
    if what == "append" and is_disk_full(exc):
        return storage_error(
            f"No space left to append to {where} ({exc.strerror}); nothing of the batch was written"
        )
    if channel is not None:
        channel.fail(log_dir, f"{what} of {where} failed: {exc}")
    return storage_error(f"The {what} of {where} failed ({exc}); the log dir is offline")


class LogDirFailureChannel:
    """Offline log dirs, each reported once to every listener."""

    def __init__(self) -> None:
        self.offline: dict[Path, str] = {}  # dir -> why
        self._listeners: list[Callable[[Path, str], None]] = []

    def on_failure(self, listener: Callable[[Path, str], None]) -> None:
        self._listeners.append(listener)

    def is_offline(self, log_dir: Path) -> bool:
        return log_dir in self.offline

    def fail(self, log_dir: Path, reason: str) -> None:
        """Take ``log_dir`` offline (Kafka's maybeAddOfflineLogDir); idempotent."""
        if log_dir in self.offline:
            return
        self.offline[log_dir] = reason
        log.error("log dir %s is offline: %s", log_dir, reason)
        for listener in self._listeners:
            try:
                listener(log_dir, reason)
            except Exception:
                log.exception("log dir failure listener failed for %s", log_dir)
