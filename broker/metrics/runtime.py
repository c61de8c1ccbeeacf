"""What the broker's runtime does: ZooKeeper request latency and session events
(kazoo's threads), and the event loop's lag and idle share (the loop's own thread)."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from .stats import Histogram


class ZkStats:
    """Kafka's ZooKeeperClientMetrics and SessionExpireListener, fed by kazoo."""

    def __init__(self) -> None:
        self.latency = Histogram()
        self.expires = 0
        self.disconnects = 0
        self.connects = 0
        self.connected = False

    def instrument(self, client: KazooClient) -> None:
        """Time every request the client sends (from queueing to its answer) and count
        session state changes. Call before ``client.start()``."""
        send = client._call  # kazoo's one funnel for requests
        latency = self.latency

        def timed_call(request, async_object):
            start = time.perf_counter()
            async_object.rawlink(lambda _r: latency.update((time.perf_counter() - start) * 1e3))
            return send(request, async_object)

        client._call = timed_call
        client.add_listener(self._on_state)

    def _on_state(self, state: KazooState) -> None:
        self.connected = state == KazooState.CONNECTED
        if state == KazooState.CONNECTED:
            self.connects += 1
        elif state == KazooState.SUSPENDED:
            self.disconnects += 1
        elif state == KazooState.LOST:
            self.expires += 1


class LoopMonitor:
    """Samples the event loop every ``interval_s``: how late a sleep wakes (lag) and
    how much of the time the loop's thread spent on the CPU (1 - idle)."""

    def __init__(self, interval_s: float = 0.25, window: int = 20) -> None:
        self.interval_s = interval_s
        self._lags: deque[float] = deque(maxlen=window)
        self._cpu: deque[tuple[float, float]] = deque(maxlen=window)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            self._cpu.append((before, time.thread_time()))
            await asyncio.sleep(self.interval_s)
            self._lags.append(max(0.0, time.perf_counter() - before - self.interval_s))

    @property
    def lag_s(self) -> float:
        return max(self._lags, default=0.0)

    @property
    def idle_ratio(self) -> float:
        if len(self._cpu) < 2:
            return 1.0
        (wall0, cpu0), (wall1, cpu1) = self._cpu[0], self._cpu[-1]
        if wall1 <= wall0:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (cpu1 - cpu0) / (wall1 - wall0)))
