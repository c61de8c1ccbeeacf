"""A follower fetcher checks its partitions' request fields against their logs a share
per round, every partition within FIELDS_REFRESH_S (what moves without the fetcher, a
follower's log start offset by retention, reaches the next Fetch)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from broker.replica.fetcher import (
    FIELDS_REFRESH_S,
    FetchState,
    ReplicaFetcher,
    ReplicaFetcherManager,
)


def follower_of(n: int) -> ReplicaFetcher:
    manager = ReplicaFetcherManager(1, {"replica.fetch.max.bytes": 1 << 20}, lambda _id: None)
    fetcher = ReplicaFetcher(manager, leader_id=2)  # no partitions yet: its task ends
    for p in range(n):
        log_ = SimpleNamespace(log_end_offset=100 + p, log_start_offset=0, latest_epoch=3)
        fetcher.partitions[("t", p)] = FetchState(SimpleNamespace(log=log_, leader_epoch=3))
        fetcher._set_ready(("t", p))
    fetcher.dirty.clear()
    return fetcher


def test_a_share_per_round_and_every_partition_within_the_period():
    async def main():
        fetcher = follower_of(1000)
        fetcher._refresh_share(100.0)  # first round: all of them, nothing moved
        assert not fetcher.dirty
        for key, st in fetcher.partitions.items():  # retention moved every log start
            st.partition.log.log_start_offset = 50 + key[1]
        fetcher._refresh_share(100.0 + FIELDS_REFRESH_S / 5)
        assert len(fetcher.dirty) == 200  # a fifth of the period: a fifth of them
        fetcher._refresh_share(100.0 + FIELDS_REFRESH_S)
        assert len(fetcher.dirty) == 1000  # the whole period: every one, once
        assert all(
            fetcher.wanted[key]["log_start_offset"] == 50 + key[1] for key in fetcher.partitions
        )
        assert all(
            fetcher.wanted[key]["fetch_offset"] == 100 + key[1] for key in fetcher.partitions
        )

    asyncio.run(main())


def test_partitions_that_left_while_queued_are_skipped():
    async def main():
        fetcher = follower_of(10)
        fetcher._refresh_share(100.0)
        fetcher._refresh_share(100.0 + FIELDS_REFRESH_S / 2)  # half a pass queued behind
        for p in range(1, 10, 2):
            fetcher.remove(("t", p))
        fetcher.dirty.clear()
        for st in fetcher.partitions.values():
            st.partition.log.log_end_offset += 7
        fetcher._refresh_share(100.0 + 2 * FIELDS_REFRESH_S)  # no KeyError for the gone
        fetcher._refresh_share(100.0 + 3 * FIELDS_REFRESH_S)
        assert fetcher.dirty == {("t", p) for p in range(0, 10, 2)}
        assert all(fetcher.wanted[("t", p)]["fetch_offset"] == 107 + p for p in range(0, 10, 2))

    asyncio.run(main())
