"""Visiting many partitions a share per round instead of all at once."""

from __future__ import annotations


def share_due(credit: float, total: int, elapsed: float, period: float) -> tuple[int, float]:
    """How many of ``total`` items this round owes, so that each is visited within
    ``period`` (any unit, as ``elapsed``), and the fractional credit carried to the next
    round. A round that owes all of them, or has none, carries nothing."""
    if total <= 0:
        return 0, 0.0
    due = credit + total * max(elapsed, 0) / period
    count = min(int(due), total)
    return count, (due - count if count < total else 0.0)
