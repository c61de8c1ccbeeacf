"""broker.server.heap: long-lived objects frozen out of CPython's full collections, frozen
again after partitions came, and freed (cycles too) after partitions went; and the
collector's pauses counted for the metrics endpoint. Real gc, in this process: every
test leaves the heap unfrozen."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from broker.metrics.process import GcMetrics, GcPauses
from broker.server.heap import HeapFreezer


class Node:
    """Stands for a partition's objects: they refer to each other (a cycle)."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freeze_moves_what_exists_out_of_collections():
    kept = [Node() for _ in range(1000)]
    loop = asyncio.new_event_loop()
    HeapFreezer(loop).freeze()
    loop.close()
    assert gc.get_freeze_count() >= len(kept)
    tracked = {id(o) for o in gc.get_objects()}  # get_objects skips the frozen generation
    assert not any(id(k) in tracked for k in kept)


def test_partitions_added_are_frozen_after_the_quiet_period():
    async def main():
        heap = HeapFreezer(asyncio.get_running_loop(), refreeze_after_s=0.05)
        heap.freeze()
        added = [Node() for _ in range(500)]
        heap.partitions_changed(removed=False)
        heap.partitions_changed(removed=False)  # a second request inside the period
        assert heap.freezes == 1  # nothing yet: debounced
        await asyncio.sleep(0.3)
        assert heap.freezes == 2  # one freeze for both changes
        tracked = {id(o) for o in gc.get_objects()}  # the frozen generation is not listed
        assert not any(id(a) in tracked for a in added)
        heap.close()

    asyncio.run(main())


def test_changes_that_keep_coming_do_not_put_the_freeze_off_for_ever():
    async def main():
        heap = HeapFreezer(asyncio.get_running_loop(), refreeze_after_s=30, refreeze_at_most_s=0.3)
        for _ in range(100):  # a change every 50 ms for up to 5 s: never 30 s of quiet
            heap.partitions_changed(removed=False)
            await asyncio.sleep(0.05)
            if heap.freezes:
                break
        assert heap.freezes == 1  # the at-most bound froze it while changes went on
        heap.close()

    asyncio.run(main())


def test_partitions_removed_free_their_cycles():
    async def main():
        heap = HeapFreezer(asyncio.get_running_loop(), refreeze_after_s=0.05)
        gone = Node()
        probe = weakref.ref(gone)
        heap.freeze()  # the partition's objects, frozen while it was held
        del gone
        gc.collect()
        assert probe() is not None  # a frozen cycle is not collected...
        heap.partitions_changed(removed=True)
        await asyncio.sleep(0.3)
        assert probe() is None  # ...until the partitions' removal unfreezes and collects
        assert gc.get_freeze_count() > 0  # and what lives on is frozen again
        heap.close()

    asyncio.run(main())


def test_close_cancels_a_pending_freeze():
    async def main():
        heap = HeapFreezer(asyncio.get_running_loop(), refreeze_after_s=0.05)
        heap.partitions_changed(removed=False)
        heap.close()
        await asyncio.sleep(0.2)
        assert heap.freezes == 0

    asyncio.run(main())


def test_pauses_are_counted_per_generation_and_served():
    pauses = GcPauses()
    pauses.install()
    try:
        gc.collect(0)
        gc.collect(2)
    finally:
        pauses.uninstall()
    assert pauses.count[0] >= 1 and pauses.count[2] >= 1
    assert pauses.seconds[2] > 0 and pauses.max_seconds[2] <= pauses.seconds[2]
    families = {f.name: f for f in GcMetrics(pauses).collect()}
    gen2 = [s for s in families["python_gc_collections"].samples if s.labels["generation"] == "2"]
    assert gen2[0].value == pauses.count[2]
    assert "python_gc_objects_frozen" in families
