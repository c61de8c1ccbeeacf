"""Burrow's consumer lag evaluation rules, over a sliding window of commits.

Burrow (LinkedIn) evaluates each partition over the last N offset commits:
  - REWIND: the committed offset went backwards within the window.
  - STOP: lag > 0 and the time since the last commit exceeds the window's span
    (the consumer stopped committing).
  - OK: any commit within the window had zero lag.
  - STALL: lag > 0 and the committed offset did not move across the window while the
    consumer is still there.
  - WARN: offsets move but lag never decreases across the window.
The group is ERR if any partition is STOP, STALL or REWIND, WARN if any is WARN.

Kafka's OffsetFetch carries no commit time, so the monitor records a window entry when
it sees a committed offset change (or the first time it sees one). Without commit
times, "not moving for longer than the window's span" is STALL while the group has
members (they keep committing the same offset) and STOP when it has none.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

WINDOW = 10  # Burrow's default intervals
MIN_SPAN_S = 30.0  # a window shorter than this does not prove a consumer stopped (default)
RATE_WINDOW_S = 60.0  # consume rates are over the last minute, ending now
ERROR_STATES = {"STOP", "STALL", "REWIND"}


@dataclass(frozen=True)
class Commit:
    ts: float
    offset: int
    lag: int


class PartitionWindow:
    def __init__(self, size: int = WINDOW):
        self.commits: deque[Commit] = deque(maxlen=size)

    def observe(self, ts: float, offset: int, lag: int) -> None:
        """Record a commit when the offset changed (or on first sight)."""
        if not self.commits or self.commits[-1].offset != offset:
            self.commits.append(Commit(ts, offset, lag))

    def consume_rate(self, now: float, window_s: float = RATE_WINDOW_S) -> float | None:
        """Records per second committed over the last `window_s` seconds, ending `now`
        (a group that stopped committing falls to 0, not to its last rate); None while
        fewer than `window_s` seconds of one unchanged offset were seen."""
        if not self.commits:
            return None
        start = now - window_s
        base = next((c for c in reversed(self.commits) if c.ts <= start), None)
        if base is None:  # every commit seen is inside the window
            base = self.commits[0]
            if len(self.commits) == 1:
                return None
            start = base.ts
        span = now - start
        return None if span <= 0 else max(0.0, (self.commits[-1].offset - base.offset) / span)


def partition_status(
    commits, now: float, lag_now: int, has_members: bool, min_span_s: float = MIN_SPAN_S
) -> str:
    commits = list(commits)
    if not commits:
        return "OK" if lag_now == 0 else "STOP"
    if any(b.offset < a.offset for a, b in zip(commits, commits[1:], strict=False)):
        return "REWIND"
    if lag_now == 0:
        return "OK"
    last = commits[-1]
    span = max(last.ts - commits[0].ts, min_span_s)
    if now - last.ts > span:
        return "STALL" if has_members else "STOP"
    if any(c.lag == 0 for c in commits):
        return "OK"
    lags = [c.lag for c in commits] + [lag_now]
    if len(commits) >= 3 and all(b >= a for a, b in zip(lags, lags[1:], strict=False)):
        return "WARN"
    return "OK"


def group_status(statuses) -> str:
    statuses = set(statuses)
    if statuses & ERROR_STATES:
        return "ERR"
    if "WARN" in statuses:
        return "WARN"
    return "OK"


def catch_up_s(lag: int, consume_rate: float | None, produce_rate: float | None) -> float | None:
    """Seconds until lag reaches zero at the recent rates, or None when it is not closing."""
    if lag == 0:
        return 0.0
    if consume_rate is None:
        return None
    closing = consume_rate - (produce_rate or 0.0)
    return lag / closing if closing > 0 else None
