"""glibc's malloc, set for a broker's reads (issue 24).

Every read the event loop makes allocates its buffer before it knows how much came
(asyncio's socket transport asks ``recv`` for up to 256 KiB), and the bytes are shrunk or
freed soon after. glibc's defaults return the top of the heap to the kernel once
128-512 KiB lie free there (its dynamic trim threshold), so the next read's buffer is
new memory again: a ``brk`` and a page fault per 4 KiB touched, on every read. ``perf
record -e cpu-clock`` of a broker taking a bulk produce shows it as
``exc_page_fault``/``clear_page_erms`` under ``memmove``. ``bench/security.py
--baseline`` measured the broker's CPU per MB of produced 1,000-byte values at 3.83 ms
before and 3.03 ms after (docs/benchmarks.md).

So the broker keeps up to ``TRIM_THRESHOLD`` free at the top of each malloc arena, and
allocations under ``MMAP_THRESHOLD`` come from the heap instead of a fresh ``mmap`` each
(setting either turns glibc's dynamic thresholds off, so both are set, the mmap one at
the 32 MiB glibc's dynamic one may grow to: above any response or request buffer a
broker makes with Kafka's default sizes, e.g. replica.fetch.response.max.bytes 10 MiB).
The cost is resident memory the process may keep after a burst: up to 16 MiB per arena
(the main one, and one per thread that allocates: ZooKeeper's, the executor's).

An operator's own ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_MMAP_THRESHOLD_`` (glibc's
environment tunables) win: nothing is changed then. Other C libraries (musl) are left
alone.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

log = logging.getLogger(__name__)

TRIM_THRESHOLD = 16 * 1024 * 1024  # dozens of 256 KiB read buffers
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's own ceiling for its dynamic threshold
# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_OPERATOR_TUNABLES = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def tune() -> bool:
    """Set the thresholds; True when glibc took them."""
    if platform.libc_ver()[0] != "glibc":
        return False
    if any(name in os.environ for name in _OPERATOR_TUNABLES):
        log.info("malloc left as the environment sets it")
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    took = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    took = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and took
    if not took:
        log.warning("glibc refused the broker's malloc thresholds; reads allocate as it likes")
    return took
