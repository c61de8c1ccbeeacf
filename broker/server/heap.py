"""The broker's long-lived objects kept out of CPython's cyclic garbage collector.

A full (generation 2) collection walks every container object the process holds, and
a broker's are mostly long-lived: partitions, logs, segments, indexes, the metadata
cache, the loaded modules. Measured under ``bench/acks_all.py`` (three brokers, acks=all,
linger 0, 10,000 records/s): each broker ran a full collection every ~18 s that stopped
its event loop for 22-48 ms with ~65,000 objects, the largest single stall behind the
p99.9; with 10,000 partitions per broker the same collection took 150-350 ms.

``gc.freeze()`` moves everything that exists into a permanent generation that
collections skip (CPython's documented use for long-lived state); reference counting
still frees those objects, only cycles among them are no longer looked for. So:

- once the broker has started (logs loaded, listeners up): collect, then freeze;
- a while after LeaderAndIsr added partitions (debounced: a topic of 1,000 partitions
  arrives in several requests; but at most REFREEZE_AT_MOST_S after the first change, so
  that partitions that keep coming and going do not put it off for ever): collect what
  is not frozen yet (only what came since), then freeze it too;
- after partitions went away (StopReplica, reassignment): unfreeze, one full collection
  so that cycles among their objects are freed, and freeze again.

The pauses themselves are on the metrics endpoint (``python_gc_*``,
``broker.metrics.process``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger(__name__)

#: how long after the last change of the partitions held the heap is frozen again
REFREEZE_AFTER_S = 5.0
#: ...and at the latest this long after the first change not frozen yet
REFREEZE_AT_MOST_S = 60.0


class HeapFreezer:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        refreeze_after_s: float = REFREEZE_AFTER_S,
        refreeze_at_most_s: float = REFREEZE_AT_MOST_S,
    ) -> None:
        self.loop = loop
        self.refreeze_after_s = refreeze_after_s
        self.refreeze_at_most_s = refreeze_at_most_s
        #: one timer, re-armed when it fires early: a LeaderAndIsr of 1,000 partitions
        #: calls partitions_changed 1,000 times, and each only moves the due time
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0  # loop time of the next freeze, as the last change set it
        self._first_change: float | None = None  # loop time of the first change not frozen
        self._removed = False  # partitions went away since the last freeze
        self.freezes = 0

    def freeze(self) -> None:
        """Collect what is not frozen yet (after removals: everything), then freeze."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        started = time.perf_counter()
        full = self._removed
        if full:
            gc.unfreeze()
        collected = gc.collect()
        gc.freeze()
        self._removed = False
        self._first_change = None
        self.freezes += 1
        log.debug(
            "froze %d long-lived objects (%s, %d unreachable freed) in %.0f ms",
            gc.get_freeze_count(),
            "full collection" if full else "new objects only",
            collected,
            (time.perf_counter() - started) * 1e3,
        )

    def partitions_changed(self, removed: bool) -> None:
        """The set of partitions held changed (call on the event loop): freeze again
        ``refreeze_after_s`` after the last such change, at most ``refreeze_at_most_s``
        after the first."""
        self._removed = self._removed or removed
        now = self.loop.time()
        if self._first_change is None:
            self._first_change = now
        self._due = min(now + self.refreeze_after_s, self._first_change + self.refreeze_at_most_s)
        if self._timer is None:
            self._timer = self.loop.call_at(self._due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.loop.time() + 0.001 < self._due:  # changes came since it was armed
            self._timer = self.loop.call_at(self._due, self._on_timer)
        else:
            self.freeze()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
