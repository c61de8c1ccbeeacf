"""A wall clock that can jump, for the fault harness (faults/, issue 27).

With ``QUILL_FAULT_CLOCK_FILE`` set in a broker's environment, ``time.time`` and
``time.time_ns`` in that process read the real clock plus the offset in seconds written
in that file (a float; missing, empty or unreadable: 0). The nemesis writes the file to
make one broker's wall clock jump forward or back while the others keep the true time,
as NTP stepping a host's clock would. The monotonic clock (``time.monotonic``, which
the event loop and every timeout of ours use) is left alone: a real clock step leaves it
alone too. The file is read again at most every 50 ms of monotonic time, so a jump
takes effect within that.

Nothing in production sets the variable; without it this module changes nothing.
"""

from __future__ import annotations

import logging
import os
import time

ENV = "QUILL_FAULT_CLOCK_FILE"
_REREAD_NS = 50_000_000

log = logging.getLogger(__name__)


class _OffsetClock:
    __slots__ = ("path", "offset_ns", "read_at", "real_time_ns")

    def __init__(self, path: str, real_time_ns) -> None:
        self.path = path
        self.offset_ns = 0
        self.read_at = -_REREAD_NS
        self.real_time_ns = real_time_ns

    def _offset(self) -> int:
        now = time.monotonic_ns()
        if now - self.read_at >= _REREAD_NS:
            self.read_at = now
            try:
                with open(self.path) as f:
                    text = f.read().strip()
                offset = int(float(text) * 1e9) if text else 0
            except (OSError, ValueError):
                offset = 0
            if offset != self.offset_ns:
                log.warning("fault clock: wall clock offset now %+.3f s", offset / 1e9)
                self.offset_ns = offset
        return self.offset_ns

    def time_ns(self) -> int:
        return self.real_time_ns() + self._offset()

    def time(self) -> float:
        return self.time_ns() / 1e9


def install(environ=os.environ) -> bool:
    """Replace ``time.time`` and ``time.time_ns`` when the variable is set; True if so."""
    path = environ.get(ENV)
    if not path:
        return False
    clock = _OffsetClock(path, time.time_ns)
    time.time_ns = clock.time_ns
    time.time = clock.time
    log.warning("fault clock installed: the wall clock follows the offset in %s", path)
    return True
