"""kazoo's threading handler with a ``select`` that costs one ``poll(2)`` call.

kazoo 2.11's ``SequentialThreadingHandler.select`` builds a new epoll selector on every
call: ``epoll_create``, an ``epoll_ctl`` per socket, ``epoll_wait``, ``close``, and a
Python selector object around them. Its connection thread selects before every read
and every write, so each ZooKeeper request and answer pays that. A broker restarted at
10,000 partitions spent 40 % of its CPU in that thread while its ISRs caught up
(docs/benchmarks.md, issue 27). ``poll`` takes any descriptor number, as the selector
does (``select(2)`` stops at 1,024, and a broker holds more files than that), in one
system call, with the same answers: a descriptor in error or hung up is reported ready
for what it was asked about, so the caller's next read or write raises.
"""

from __future__ import annotations

import math
import select
from collections import defaultdict

from kazoo.handlers.threading import SequentialThreadingHandler

_READ = select.POLLIN
_WRITE = select.POLLOUT


def _fd(fileobj) -> int:
    return fileobj if isinstance(fileobj, int) else fileobj.fileno()


def poll_select(rlist, wlist, xlist, timeout=None) -> tuple[list, list, list]:
    """``select.select``'s contract (kazoo's ``selector_select``: the same file objects
    back, ``xlist`` never reported) on ``poll``."""
    if timeout is not None:
        if not isinstance(timeout, int | float):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    masks: dict[int, int] = defaultdict(int)
    readers: dict[int, list] = defaultdict(list)
    writers: dict[int, list] = defaultdict(list)
    for fileobj in rlist:
        fd = _fd(fileobj)
        masks[fd] |= _READ
        readers[fd].append(fileobj)
    for fileobj in wlist:
        fd = _fd(fileobj)
        masks[fd] |= _WRITE
        writers[fd].append(fileobj)
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = poller.poll(None if timeout is None else math.ceil(timeout * 1000))
    readable, writable = [], []
    for fd, events in ready:
        if events & ~_WRITE:  # data, or an error or hang-up the read will report
            readable.extend(readers.get(fd, ()))
        if events & ~_READ:
            writable.extend(writers.get(fd, ()))
    return readable, writable, []


class PollingHandler(SequentialThreadingHandler):
    """SequentialThreadingHandler, selecting with ``poll_select``."""

    name = "quill_polling_threading_handler"

    def select(self, *args, **kwargs):
        return poll_select(*args, **kwargs)
