"""broker/aio.py Deadlines.wait on a real loop: a result, a timeout (raised, or quiet),
cancellation passed to the future, no late timeout once answered, several futures on
one timer each ending at its own deadline, and one Deadlines used from two loops."""

from __future__ import annotations

import asyncio

import pytest

from broker.aio import Deadlines


def test_result_then_no_late_timeout() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop.call_soon(fut.set_result, 7)
        assert await Deadlines().wait(fut, 0.05) == 7
        await asyncio.sleep(0.1)  # past the timeout: the timer was cancelled
        assert fut.result() == 7

    asyncio.run(main())


def test_timeout_raises_or_resolves_quietly() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await Deadlines().wait(fut, 0.05)
        assert loop.time() - started >= 0.05 - 1e-3
        assert isinstance(fut.exception(), TimeoutError)
        quiet = loop.create_future()
        assert await Deadlines().wait(quiet, 0.01, quiet=True) is None
        assert quiet.result() is None

    asyncio.run(main())


def test_cancelling_the_waiter_cancels_the_future() -> None:
    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        waiter = asyncio.ensure_future(Deadlines().wait(fut, 10.0))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert fut.cancelled()

    asyncio.run(main())


def test_futures_on_one_timer_each_end_at_their_own_deadline() -> None:
    deadlines = Deadlines()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        slow, quick, answered = (loop.create_future() for _ in range(3))
        waiting_slow = asyncio.ensure_future(deadlines.wait(slow, 10.0))
        waiting_answered = asyncio.ensure_future(deadlines.wait(answered, 0.02))
        await asyncio.sleep(0)
        answered.set_result("in time")
        assert await waiting_answered == "in time"
        assert await deadlines.wait(quick, 0.05, quiet=True) is None  # earlier than slow's
        assert not slow.done()
        slow.set_result("late")
        assert await waiting_slow == "late"

    asyncio.run(main())


def test_one_deadlines_from_a_second_loop_arms_that_loops_timer() -> None:
    """A timer left on a closed loop (set for an earlier deadline) must not stand in
    for the new loop's: the new future would wait forever."""
    deadlines = Deadlines()

    async def first() -> None:
        fut = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(fut.set_result, None)
        await deadlines.wait(fut, 0.3)  # answered: its timer stays, for a loop now gone

    async def second() -> None:
        fut = asyncio.get_running_loop().create_future()
        waited = deadlines.wait(fut, 0.5, quiet=True)  # later than the stale timer's
        assert await asyncio.wait_for(waited, 10.0) is None

    asyncio.run(first())
    asyncio.run(second())


def test_a_timer_run_a_clock_tick_early_ends_its_futures_without_setting_it_again():
    """uvloop's clock is in milliseconds: it runs a timer when the deadline rounds down to
    now. The deadline the timer was set for counts as come; before, the timer was set
    again at once until the clock caught up (about 20 times a wait here)."""
    import uvloop

    deadlines = Deadlines()
    arms = 0
    arm = deadlines._arm

    def counting_arm(loop, deadline):
        nonlocal arms
        arms += 1
        arm(loop, deadline)

    deadlines._arm = counting_arm

    async def main():
        loop = asyncio.get_running_loop()
        timed_out = 0
        for n in range(50):
            try:
                await deadlines.wait(loop.create_future(), 0.0104 + n * 0.00001)
            except TimeoutError:
                timed_out += 1
        return timed_out

    assert uvloop.run(main()) == 50
    assert arms <= 2 * 50
