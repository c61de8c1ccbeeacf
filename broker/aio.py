"""asyncio helpers for the hot paths.

``asyncio.wait_for`` (Python 3.11) wraps the future it waits on in a second one and
releases it through a done-callback: the waiting task wakes one loop turn after the
result is set, behind everything else that turn made ready. A follower's fetch round
pays that twice (the leader's parked fetch, the follower's answer). ``await_future``
waits on the future itself with a timer beside it: same outcome, one turn sooner.
"""

from __future__ import annotations

import asyncio
from typing import Any


def _time_out(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


async def await_future(fut: asyncio.Future, timeout_s: float, quiet: bool = False) -> Any:
    """``fut``'s result, or TimeoutError after ``timeout_s`` (``fut`` then holds the
    error). With ``quiet``, the timeout instead resolves ``fut`` to None. Cancelling
    the waiting task cancels ``fut``, as with ``asyncio.wait_for``."""
    handle = fut.get_loop().call_later(timeout_s, _resolve if quiet else _time_out, fut)
    try:
        return await fut
    finally:
        handle.cancel()
