"""broker/aio.py await_future on a real loop: a result, a timeout (raised, or quiet),
cancellation passed to the future, and no late timeout once answered."""

from __future__ import annotations

import asyncio

import pytest

from broker.aio import await_future


def test_result_then_no_late_timeout() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop.call_soon(fut.set_result, 7)
        assert await await_future(fut, 0.05) == 7
        await asyncio.sleep(0.1)  # past the timeout: the timer was cancelled
        assert fut.result() == 7

    asyncio.run(main())


def test_timeout_raises_or_resolves_quietly() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await await_future(fut, 0.05)
        assert loop.time() - started >= 0.05 - 1e-3
        assert isinstance(fut.exception(), TimeoutError)
        quiet = loop.create_future()
        assert await await_future(quiet, 0.01, quiet=True) is None
        assert quiet.result() is None

    asyncio.run(main())


def test_cancelling_the_waiter_cancels_the_future() -> None:
    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        waiter = asyncio.ensure_future(await_future(fut, 10.0))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert fut.cancelled()

    asyncio.run(main())
