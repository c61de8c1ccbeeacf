"""asyncio helpers for the hot paths.

``asyncio.wait_for`` (Python 3.11) wraps the future it waits on in a second one and
releases it through a done-callback: the waiting task wakes one loop turn after the
result is set, behind everything else that turn made ready. A follower's fetch round
pays that twice (the leader's parked fetch, the follower's answer). ``Deadlines.wait``
waits on the future itself, with its deadline kept beside it: same outcome, one turn
sooner. And one loop timer serves all of a ``Deadlines``' futures, set at the earliest
deadline: a timer per future was made, pushed on the loop's heap (through Python
``TimerHandle.__lt__`` calls) and cancelled again on every follower fetch round, at the
leader (its parked fetch) and at the follower (its request).
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

log = logging.getLogger(__name__)


def _time_out(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class Deadlines:
    """Futures waited on with a timeout each, on one timer of their loop.

    One loop at a time, from that loop's thread: a future of a new loop moves the timer
    there (the old loop ended, as between tests); two loops running at once must each
    have their own ``Deadlines``."""

    def __init__(self) -> None:
        self._due: dict[asyncio.Future, tuple[float, bool]] = {}  # future -> (deadline, quiet)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._loop: asyncio.AbstractEventLoop | None = None

    async def wait(self, fut: asyncio.Future, timeout_s: float, quiet: bool = False) -> Any:
        """``fut``'s result, or TimeoutError after ``timeout_s`` (``fut`` then holds the
        error). With ``quiet``, the timeout instead resolves ``fut`` to None. Cancelling
        the waiting task cancels ``fut``, as with ``asyncio.wait_for``."""
        loop = fut.get_loop()
        deadline = loop.time() + timeout_s
        self._due[fut] = (deadline, quiet)
        if deadline < self._timer_at or loop is not self._loop:  # a new loop: its own timer
            self._arm(loop, deadline)
        try:
            return await fut
        finally:
            self._due.pop(fut, None)

    def track(self, fut: Any, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        """As ``wait``, for what no coroutine awaits: ``fut`` (anything with ``done()`` and
        ``set_exception``) gets TimeoutError after ``timeout_s`` unless ``untrack``ed."""
        deadline = loop.time() + timeout_s
        self._due[fut] = (deadline, False)
        if deadline < self._timer_at or loop is not self._loop:
            self._arm(loop, deadline)

    def untrack(self, fut: Any) -> None:
        self._due.pop(fut, None)

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._loop, self._timer_at = loop, deadline
        self._timer = loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        """The earliest deadline came: every future due ends; the timer moves on."""
        loop, fired_for = self._loop, self._timer_at
        self._timer, self._timer_at = None, math.inf
        # a loop may run a timer a clock tick early (uvloop's clock is in milliseconds):
        # the deadline it was set for counts as come, or it would be set again at once
        now = max(loop.time(), fired_for)
        due = self._due
        for fut, (deadline, quiet) in list(due.items()):
            if deadline <= now:
                del due[fut]
                (_resolve if quiet else _time_out)(fut)
        if due:
            self._arm(loop, min(deadline for deadline, _quiet in due.values()))


class AnswerFuture(asyncio.Future):
    """A future whose completer then calls, in the same call, the functions in
    ``at_once``: a done-callback runs a turn of the loop later, and the network layer
    sends an acks=all produce's answer from here instead, in the call that moves the
    high watermark (issue 24). A function that raises is logged and skipped."""

    __slots__ = ("at_once",)

    def __init__(self, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(loop=loop)
        self.at_once: list = []

    def run_at_once(self) -> None:
        calls, self.at_once = self.at_once, []
        for fn in calls:
            try:
                fn(self)
            except Exception:  # noqa: BLE001 - the completer goes on (the HW advance)
                log.exception("a function waiting on an answer failed")
