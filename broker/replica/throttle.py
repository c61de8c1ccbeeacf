"""Replication throttles (Kafka's ReplicationQuotaManager, reduced to what it does):
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` bytes/s
(dynamic broker configs at /config/brokers/<id> or <default>) applied to the replicas
the topic configs ``leader|follower.replication.throttled.replicas`` name
(``*`` or ``partition:broker,...``), and only while a replica is out of sync.
"""

from __future__ import annotations

import time

UNTHROTTLED = 2**63 - 1


class ReplicationQuota:
    """Bytes per second over a sliding window of one-second samples (Kafka keeps 11)."""

    def __init__(self, rate: int = UNTHROTTLED, samples: int = 11) -> None:
        self.rate = rate
        self.samples = samples
        self._window: dict[int, int] = {}  # second -> bytes recorded in it
        self._started: dict[int, float] = {}  # second -> time of its first record

    def record(self, nbytes: int) -> None:
        if self.rate >= UNTHROTTLED or nbytes <= 0:
            return
        now = time.monotonic()
        second = int(now)
        self._window[second] = self._window.get(second, 0) + nbytes
        self._started.setdefault(second, now)
        for old in [s for s in self._window if s <= second - self.samples]:
            del self._window[old]
            self._started.pop(old, None)

    def exceeded(self) -> bool:
        if self.rate >= UNTHROTTLED:
            return False
        now = time.monotonic()
        recent = {s: b for s, b in self._window.items() if s > now - self.samples}
        if not recent:
            return False
        # the time the samples really span, from the oldest one's first record (as
        # Kafka's samples start when first recorded; from the start of its second let
        # up to a second's worth more through), at least one second
        elapsed = max(now - self._started[min(recent)], 1.0)
        return sum(recent.values()) / elapsed > self.rate


def is_throttled(entries: tuple[str, ...] | list[str], partition: int, broker_id: int) -> bool:
    """Does ``leader|follower.replication.throttled.replicas`` cover this replica?"""
    for entry in entries:
        entry = entry.strip()
        if entry == "*":
            return True
        p, _, b = entry.partition(":")
        if p.strip() == str(partition) and b.strip() == str(broker_id):
            return True
    return False
