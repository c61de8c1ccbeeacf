"""The controller's event queue, with a lane for events that must not wait.

Kafka's ControllerEventManager is one FIFO queue; a ControlledShutdown waits there
behind whatever the ZooKeeper watches queued before it (with 10,000 partitions: a
topic creation's assignment events, a restarted broker's ISR notifications), longer
than the stopping broker's ``controller.socket.timeout.ms``. Here such an event goes
to an urgent lane the controller thread empties first, so it waits at most for the
event being handled. That is safe for a controlled shutdown: it reads the partition
states it changes from ZooKeeper and writes them conditionally, so the events it
overtakes see its result as they would any other write. Broker registrations, elections
and resignations go to the same lane, first in first out with the shutdowns: a shutdown
sees the live brokers and broker epochs of every registration before it, and never runs
after this broker lost its session or the controllership changed.
"""

from __future__ import annotations

import threading
from collections import deque


class ControllerEventQueue:
    def __init__(self) -> None:
        self._urgent: deque = deque()
        self._normal: deque = deque()
        self._ready = threading.Condition()

    def put(self, event: tuple, *, urgent: bool = False) -> None:
        with self._ready:
            (self._urgent if urgent else self._normal).append(event)
            self._ready.notify()

    def get(self) -> tuple:
        """The next event (an urgent one first), waiting for one."""
        with self._ready:
            while not self._urgent and not self._normal:
                self._ready.wait()
            return (self._urgent or self._normal).popleft()

    def drain(self) -> list[tuple]:
        """Every queued event, urgent ones first; the queue is left empty."""
        with self._ready:
            events = [*self._urgent, *self._normal]
            self._urgent.clear()
            self._normal.clear()
            return events

    def __len__(self) -> int:
        with self._ready:
            return len(self._urgent) + len(self._normal)
