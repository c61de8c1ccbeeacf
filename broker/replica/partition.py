"""Partition: one topic-partition replica on this broker (leader or follower).

Holds the log, the leader epoch, the ISR as last known, and the high watermark.
Consumers read only below the high watermark. Fetch requests that want more bytes
than are there wait on ``wait_for_data`` (the delayed-fetch purgatory of Kafka,
reduced to a future per waiting fetch).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from ..log.log import Log
from ..protocol.errors import ErrorCode, KafkaError


@dataclass
class PartitionState:
    """What the controller decided for a partition (LeaderAndIsr in Kafka's words)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    controller_epoch: int = 0
    zk_version: int = -1


@dataclass
class Partition:
    topic: str
    index: int
    broker_id: int
    log: Log | None = None
    state: PartitionState | None = None
    _waiters: set[asyncio.Future] = field(default_factory=set)

    @property
    def is_leader(self) -> bool:
        return self.state is not None and self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state else -1

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark if self.log else 0

    def require_leader(self) -> Log:
        if not self.is_leader or self.log is None:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"broker {self.broker_id} is not the leader of {self.topic}-{self.index}",
            )
        return self.log

    def check_leader_epoch(self, epoch: int) -> None:
        """A client's current_leader_epoch against ours (KIP-320)."""
        if epoch < 0 or self.state is None:
            return
        if epoch < self.state.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch, "the client's leader epoch is stale")
        if epoch > self.state.leader_epoch:
            raise KafkaError(ErrorCode.unknown_leader_epoch, "the client's leader epoch is newer")

    def append_as_leader(self, records: bytearray, headers: list) -> object:
        log = self.require_leader()
        info = log.append_as_leader(records, headers, self.leader_epoch, int(time.time() * 1000))
        self.maybe_advance_high_watermark()
        return info

    def maybe_advance_high_watermark(self) -> None:
        """HW = min LEO over the ISR. With only the leader in sync, that is our LEO."""
        log = self.log
        if log is None or self.state is None:
            return
        if self.state.isr == [self.broker_id] and log.high_watermark != log.log_end_offset:
            log.high_watermark = log.log_end_offset
            self.wake_waiters()

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def add_waiter(self, fut: asyncio.Future) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future) -> None:
        self._waiters.discard(fut)
