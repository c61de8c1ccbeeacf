"""ISR change propagation: a leader's ISR changes reach the controller in batches.

As Kafka's ReplicaManager (isrChangeSet, maybePropagateIsrChanges): every ISR change a
leader writes to its partition state znode is recorded here; every CHECK_INTERVAL_S the
recorded partitions are written as ONE sequential znode
``/isr_change_notification/isr_change_<seq>`` with Kafka's JSON
``{"version":1,"partitions":[{"topic":..,"partition":..},...]}`` once no change came
for LINGER_S (Kafka's blackout, 5 s), or once MAX_DELAY_S (60 s) passed since the
last propagation while changes keep coming. A rolling restart that changes the ISR of
thousands of partitions thus costs the controller a handful of notifications instead
of one znode (and one watch event) per partition.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# Kafka's IsrChangePropagationConfig defaults (ReplicaManager.DefaultIsrPropagationConfig)
CHECK_INTERVAL_S = 2.5
LINGER_S = 5.0
MAX_DELAY_S = 60.0
PARTITIONS_PER_ZNODE = 1000  # keeps a notification well under jute.maxbuffer (1 MB)


class IsrChangePropagation:
    def __init__(
        self,
        notify: Callable[[list[tuple[str, int]]], None],
        *,
        check_interval_s: float = CHECK_INTERVAL_S,
        linger_s: float = LINGER_S,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        self._notify = notify  # blocking: writes one notification znode
        self.check_interval_s = check_interval_s
        self.linger_s = linger_s
        self.max_delay_s = max_delay_s
        self._changes: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._last_change = 0.0
        self._last_propagation = time.monotonic()
        self.notifications_written = 0

    def record(self, topic: str, partition: int) -> None:
        with self._lock:
            self._changes.add((topic, partition))
            self._last_change = time.monotonic()

    def _take(self, now: float, force: bool = False) -> list[tuple[str, int]]:
        with self._lock:
            if not self._changes:
                return []
            if not (
                force
                or self._last_change + self.linger_s < now
                or self._last_propagation + self.max_delay_s < now
            ):
                return []
            changes = sorted(self._changes)
            self._changes.clear()
            self._last_propagation = now
            return changes

    def _write(self, changes: list[tuple[str, int]]) -> None:
        for i in range(0, len(changes), PARTITIONS_PER_ZNODE):
            self._notify(changes[i : i + PARTITIONS_PER_ZNODE])
            self.notifications_written += 1
        log.debug("propagated ISR changes of %d partition(s)", len(changes))

    async def maybe_propagate(self, force: bool = False) -> None:
        changes = self._take(time.monotonic(), force)
        if not changes:
            return
        try:
            await asyncio.to_thread(self._write, changes)
        except Exception as exc:  # noqa: BLE001 - ZooKeeper away: keep them for next time
            log.warning("cannot propagate ISR changes (%r); will retry", exc)
            with self._lock:
                self._changes.update(changes)

    async def run(self) -> None:
        """Kafka's isr-change-propagation task; cancel it to stop."""
        while True:
            await asyncio.sleep(self.check_interval_s)
            await self.maybe_propagate()
