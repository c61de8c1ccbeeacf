"""Shared timeout timers of delayed produces (broker/replica/expiry.py), on a real
asyncio loop: an operation expires once its tick has come, never before its timeout,
and one completed early is never expired."""

from __future__ import annotations

import asyncio

import pytest

from broker.replica.expiry import ExpiryBuckets
from broker.replica.partition import DelayedProduce


def test_delayed_produces_expire_at_their_timeouts_and_not_when_settled() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        expiry = ExpiryBuckets(tick_s=0.01)
        started = loop.time()
        slow = DelayedProduce(2, 0.05, expiry=expiry)
        quick = DelayedProduce(1, 0.05, expiry=expiry)  # same tick as slow
        late = DelayedProduce(1, 0.3, expiry=expiry)
        quick.settle(0, True)
        assert quick.future.result() == [True]
        slow.settle(1, True)  # one of two slots: still waiting
        assert len(expiry) == 2
        flags = await slow.future
        assert flags == [False, True]  # unsettled slot: False
        assert loop.time() - started >= 0.05 - 1e-3
        assert not late.future.done()
        late.settle(0, True)
        slow.settle(0, True)  # after its expiry: ignored
        assert late.future.result() == [True] and slow.future.result() == [False, True]
        assert len(expiry) == 0
        finished = [DelayedProduce(1, 0.0, finish=lambda f: ("done", f), expiry=expiry)]
        assert await finished[0].future == ("done", [False])
        assert DelayedProduce(0, 5.0, expiry=expiry).future.result() == []

    asyncio.run(main())


def test_then_is_applied_as_the_produce_completes_on_the_same_future() -> None:
    """An acks=all response is encoded in the call that completes its produce, on the
    future the connection already waits on, after the handler's own finish."""

    async def main() -> None:
        expiry = ExpiryBuckets(tick_s=0.01)
        op = DelayedProduce(2, 5.0, finish=lambda flags: {"flags": flags}, expiry=expiry)
        fut = op.then(lambda body: ("encoded", body))
        assert fut is op.future and not fut.done()
        op.settle(0, True)
        op.settle(1, True)
        assert fut.result() == ("encoded", {"flags": [True, True]})
        bare = DelayedProduce(1, 0.01, expiry=expiry)
        assert await bare.then(len) == 1  # expired: [False], then len
        failing = DelayedProduce(1, 5.0, expiry=expiry)
        failing.then(lambda flags: 1 / 0)
        failing.settle(0, True)
        with pytest.raises(ZeroDivisionError):  # handed to whoever awaits the future
            failing.future.result()
        done = DelayedProduce(0, 5.0, expiry=expiry)
        with pytest.raises(RuntimeError):
            done.then(len)

    asyncio.run(main())
