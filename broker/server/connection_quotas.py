"""Connection limits, as Kafka's ``ConnectionQuotas`` and ``MemoryPool`` have them.

``max.connections``: the broker-wide count. As in Kafka, an acceptor that reaches it
stops accepting (new connections wait in the listen backlog) until one closes.

``max.connections.per.ip`` and ``max.connections.per.ip.overrides``
(``host:count,ip:count``): a connection from an address that already holds its
maximum is closed at once, and the broker says so in its log.

``max.connection.creation.rate`` and ``listener.name.<l>.max.connection.creation.rate``
(KIP-612): connections accepted per second, measured as Kafka's quota sensors measure
(``quota.window.num`` samples of ``quota.window.size.seconds``). Each accepted connection
is recorded; when a rate goes over its limit the acceptor waits (at most one window)
before it sets the connection up and accepts the next, as Kafka's acceptor blocks. The
broker-wide limit spares the inter-broker listener when there are others.

``queued.max.request.bytes``: the memory held by requests that have been read but not
yet answered, over all connections (Kafka's request memory pool; -1: unbounded). A
connection whose bytes would take the pool past it stops being read (it is muted)
until answered requests give memory back.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import Counter
from collections.abc import Callable

from ..quota.rate import Rate

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1


class ConfigValueError(ValueError):
    """A connection-limit setting the broker cannot start with."""


def parse_ip_overrides(text: str) -> dict[str, int]:
    """``"127.0.0.1:2,broker-a:10"`` -> ``{"127.0.0.1": 2, <broker-a's address>: 10}``.

    Host names are resolved once, at start-up, as Kafka does.
    """
    result: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ConfigValueError(f"expected host:count entries, got {item!r}")
        try:
            limit = int(count)
        except ValueError:
            raise ConfigValueError(f"count of {host!r} is not a number: {count!r}") from None
        if limit < 0:
            raise ConfigValueError(f"count of {host!r} must be at least 0, got {limit}")
        try:
            address = socket.getaddrinfo(host, None)[0][4][0]
        except OSError as exc:
            raise ConfigValueError(f"cannot resolve host {host!r}: {exc}") from None
        result[address] = limit
    return result


class ConnectionQuotas:
    """Counts open connections in total and per client address."""

    def __init__(
        self,
        max_connections: int = INT_MAX,
        max_per_ip: int = INT_MAX,
        per_ip_overrides: dict[str, int] | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.total = 0
        self.per_ip: Counter[str] = Counter()
        self._slot_freed = asyncio.Event()
        self.creation = CreationRates()

    def reconfigure(
        self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int]
    ) -> None:
        """New limits (dynamic broker configs): they count for the next connection;
        those open stay, as in Kafka. An acceptor waiting for a slot looks again."""
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self._slot_freed.set()

    def limit_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_per_ip)

    async def wait_for_slot(self) -> None:
        """Until the broker holds fewer than ``max.connections`` (Kafka's acceptor waits)."""
        while self.total >= self.max_connections:
            self._slot_freed.clear()
            await self._slot_freed.wait()

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``, or say why it is refused."""
        limit = self.limit_for(ip)
        if self.per_ip[ip] >= limit:
            return (
                f"address {ip} already has the configured maximum of {limit} connections "
                "(max.connections.per.ip)"
            )
        if self.total >= self.max_connections:
            return f"the broker holds max.connections={self.max_connections} connections"
        self.per_ip[ip] += 1
        self.total += 1
        return None

    def release(self, ip: str) -> None:
        self.total -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
        self._slot_freed.set()


class RequestMemoryPool:
    """Bytes held by requests read but not yet answered; -1 capacity: unbounded."""

    def __init__(self, capacity: int = -1) -> None:
        self.capacity = capacity
        self.used = 0
        self._waiting: dict[object, Callable[[], None]] = {}

    @property
    def bounded(self) -> bool:
        return self.capacity >= 0

    def exhausted(self) -> bool:
        return self.bounded and self.used >= self.capacity

    def take(self, n: int) -> None:
        self.used += n

    def give_back(self, n: int) -> None:
        self.used -= n
        if self._waiting and not self.exhausted():
            waiting, self._waiting = self._waiting, {}
            for resume in waiting.values():
                resume()

    def wait(self, owner: object, resume: Callable[[], None]) -> None:
        """Call ``resume`` once memory is given back (a muted connection reads again)."""
        self._waiting[owner] = resume

    def forget(self, owner: object) -> None:
        self._waiting.pop(owner, None)


class CreationRates:
    """KIP-612's connection creation rates: per listener, and broker-wide."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples, self.window_ms = samples, window_ms
        self.broker_limit = INT_MAX
        self.listener_limits: dict[str, int] = {}
        self.protected: str | None = None  # the inter-broker listener, if there are others
        self.broker_rate = Rate(samples, window_ms)
        self.rates: dict[str, Rate] = {}
        self.created: Counter[str] = Counter()  # connection-creation-total per listener
        self.throttle_ms: dict[str, float] = {}  # the last connection-accept-throttle-time

    def reconfigure(
        self, broker_limit: int, listener_limits: dict[str, int], protected: str | None
    ) -> None:
        self.broker_limit = broker_limit
        self.listener_limits = dict(listener_limits)
        self.protected = protected

    def rate(self, listener: str) -> Rate:
        if listener not in self.rates:
            self.rates[listener] = Rate(self.samples, self.window_ms)
        return self.rates[listener]

    def _throttle(self, rate: Rate, limit: int, now_ms: float) -> float:
        """Kafka's QuotaUtils.boundedThrottleTime, at most one window."""
        value = rate.measure(now_ms)
        if value <= limit:
            return 0.0
        if limit <= 0:
            return float(self.window_ms)
        delay = (value - limit) / limit * rate.window_size_ms(now_ms)
        return min(delay, float(self.window_ms))

    def record(self, listener: str, now_ms: float) -> float:
        """One connection accepted on ``listener``: how long (ms) the acceptor waits."""
        self.created[listener] += 1
        rate = self.rate(listener)
        rate.record(1.0, now_ms)
        delay = self._throttle(rate, self.listener_limits.get(listener, INT_MAX), now_ms)
        if listener != self.protected:
            self.broker_rate.record(1.0, now_ms)
            delay = max(delay, self._throttle(self.broker_rate, self.broker_limit, now_ms))
        self.throttle_ms[listener] = delay
        return delay
