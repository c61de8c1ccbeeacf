"""The network layer's request coroutines without a Task (broker/server/network.py's
``_Eager``) and answers sent in the call that completes them (broker/aio.py's
``AnswerFuture``): what a Task would do, step for step, on a real event loop."""

from __future__ import annotations

import asyncio
import logging

from broker.aio import AnswerFuture
from broker.server.network import _run_eagerly


def test_a_coroutine_that_completes_at_once_needs_nothing() -> None:
    async def main() -> None:
        ran = []

        async def quick() -> None:
            ran.append(1)

        assert _run_eagerly(quick()) is None and ran == [1]

    asyncio.run(main())


def test_results_exceptions_and_bare_yields_reach_the_coroutine_as_a_task_gives_them() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        seen = []

        async def steps() -> None:
            seen.append(await first)
            try:
                await second
            except KeyError as exc:
                seen.append(repr(exc))
            await asyncio.sleep(0)  # a bare yield
            seen.append("after the yield")

        eager = _run_eagerly(steps())
        assert eager is not None and not eager.done() and seen == []
        first.set_result("one")
        await asyncio.sleep(0)
        assert seen == ["one"]
        second.set_exception(KeyError("two"))
        await asyncio.wait_for(eager, 5)  # awaitable, as a Task
        assert eager.done() and seen == ["one", "KeyError('two')", "after the yield"]

    asyncio.run(main())


def test_cancel_throws_cancelled_error_in_at_its_wait() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        waited_on = loop.create_future()
        seen = []

        async def parked() -> None:
            try:
                await waited_on
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        eager = _run_eagerly(parked())
        assert eager.cancel() and waited_on.cancelled()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert seen == ["cancelled"] and eager.done() and not eager.cancel()

        # cancelled after its future completed, before it ran on: still cancelled
        done_first = loop.create_future()

        async def woken() -> None:
            try:
                await done_first
                seen.append("ran on")
            except asyncio.CancelledError:
                seen.append("cancelled late")

        late = _run_eagerly(woken())
        done_first.set_result(None)
        late.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert seen[-1] == "cancelled late" and late.done()

    asyncio.run(main())


def test_answer_future_calls_its_waiters_in_the_completing_call(caplog) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        answer = AnswerFuture(loop=loop)
        calls = []

        def broken(_fut) -> None:
            raise RuntimeError("boom")

        answer.at_once += [broken, lambda fut: calls.append(fut.result())]
        answer.add_done_callback(lambda fut: calls.append("done-callback"))
        answer.set_result(b"bytes")
        with caplog.at_level(logging.ERROR, logger="broker.aio"):
            answer.run_at_once()
        assert calls == [b"bytes"]  # before any loop turn; the broken one logged, not raised
        assert "a function waiting on an answer failed" in caplog.text
        await asyncio.sleep(0)
        assert calls == [b"bytes", "done-callback"] and answer.at_once == []

    asyncio.run(main())
