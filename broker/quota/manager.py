"""Client quotas (Kafka's ClientQuotaManager with its DefaultQuotaCallback).

Quota configs live in ZooKeeper per entity: ``users/<user>``, ``clients/<client-id>``,
``users/<user>/clients/<client-id>``, any name possibly ``<default>``. For a request
from (user, client-id) the first entity in Kafka's order of precedence that sets the
quota key in question gives the bound:

  1. users/<user>/clients/<client-id>      5. users/<default>/clients/<default>
  2. users/<user>/clients/<default>        6. users/<default>
  3. users/<user>                          7. clients/<client-id>
  4. users/<default>/clients/<client-id>   8. clients/<default>

Clients that match the same entity share one rate only when the entity names them:
``clients/<default>`` gives every client-id its own rate of that size, ``users/<user>``
one rate shared by all of that user's client-ids (Kafka's quota metric tags). Without
authentication every client is the user ``ANONYMOUS``, so user quotas (and
``users/<default>``) apply to everyone, as in Kafka.

A request that takes the rate over its bound is throttled for
``(rate - bound) / bound * window`` (Kafka's QuotaUtils.throttleTime), where window is
the span the rate was measured over; we cap it at the whole measurement window
(quota.window.num x quota.window.size.seconds) so one huge request cannot mute a
client for minutes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote, unquote

from ..zk.znodes import ConfigType
from .rate import Rate

log = logging.getLogger(__name__)

ANONYMOUS = "ANONYMOUS"  # Kafka's KafkaPrincipal.ANONYMOUS name
DEFAULT = "<default>"
PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"
REQUEST = "request_percentage"
QUOTA_KEYS = (PRODUCE, FETCH, REQUEST)

IDLE_EXPIRY_MS = 3600 * 1000  # Kafka's InactiveSensorExpirationTimeSeconds

# (user, client-id): None where the entity does not name that part
Entity = tuple[str | None, str | None]


def sanitize(name: str) -> str:
    """Kafka's Sanitizer for znode names: URL-encoded, '*' too; <default> as it is."""
    return name if name == DEFAULT else quote(name, safe="").replace("*", "%2A")


def _desanitize(name: str) -> str:
    return name if name == DEFAULT else unquote(name)


def parse_entity_path(path: str) -> Entity | None:
    """``clients/c``, ``users/u``, ``users/u/clients/c`` -> entity; anything else None."""
    parts = path.strip("/").split("/")
    users, clients = ConfigType.USER, ConfigType.CLIENT
    if len(parts) == 2 and parts[0] == clients and parts[1]:
        return None, _desanitize(parts[1])
    if len(parts) == 2 and parts[0] == users and parts[1]:
        return _desanitize(parts[1]), None
    if len(parts) == 4 and parts[0] == users and parts[2] == clients and parts[1] and parts[3]:
        return _desanitize(parts[1]), _desanitize(parts[3])
    return None


def entity_path(entity: Entity) -> str:
    user, client = entity
    if user is not None and client is not None:
        user_path = ConfigType.entity(ConfigType.USER, sanitize(user))
        return user_path + "/" + ConfigType.entity(ConfigType.CLIENT, sanitize(client))
    if user is not None:
        return ConfigType.entity(ConfigType.USER, sanitize(user))
    if client is not None:
        return ConfigType.entity(ConfigType.CLIENT, sanitize(client))
    raise ValueError("an entity names a user, a client-id or both")


def parse_quota_config(entity: Entity, config: dict[str, str]) -> dict[str, float]:
    """The quota keys of a config znode; bad values are logged and left out."""
    out: dict[str, float] = {}
    for key in QUOTA_KEYS:
        raw = config.get(key)
        if raw is None:
            continue
        try:
            value = float(str(raw).strip())
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            log.error(
                "ignoring quota %s=%r of %s: not a number greater than 0",
                key,
                raw,
                entity_path(entity),
            )
            continue
        out[key] = value
    return out


def precedence(user: str, client_id: str) -> list[tuple[Entity, tuple[str, str]]]:
    """The entities that may hold a quota for (user, client-id), most specific first,
    each with the (user, client-id) tags of the rate it is measured on."""
    return [
        ((user, client_id), (user, client_id)),
        ((user, DEFAULT), (user, client_id)),
        ((user, None), (user, "")),
        ((DEFAULT, client_id), (user, client_id)),
        ((DEFAULT, DEFAULT), (user, client_id)),
        ((DEFAULT, None), (user, "")),
        ((None, client_id), ("", client_id)),
        ((None, DEFAULT), ("", client_id)),
    ]


@dataclass
class ThrottleStats:
    """What the broker keeps per (quota key, user, client-id) for operators."""

    bytes: float = 0.0
    requests: int = 0
    throttled_requests: int = 0
    throttle_time_ms: int = 0
    last_throttle_ms: int = 0
    last_throttled_at: float = 0.0  # wall clock, seconds
    quota: float = 0.0


class ClientQuotaManager:
    """Quota bounds from the config entities and one Rate per quota metric."""

    def __init__(
        self,
        samples: int = 11,
        window_s: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.samples = samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = samples * self.window_ms
        self.enabled_keys: set[str] = set()
        self.clock = clock
        self.overrides: dict[Entity, dict[str, float]] = {}
        self._rates: dict[tuple[str, str, str], Rate] = {}
        self._last_used: dict[tuple[str, str, str], float] = {}
        self._next_expiry_ms = 0.0
        self.stats: dict[tuple[str, str, str], ThrottleStats] = {}

    # -- configs --------------------------------------------------------------------
    def update(self, entity: Entity, config: dict[str, str]) -> None:
        """An entity's config znode as read from ZooKeeper (empty: removed)."""
        quotas = parse_quota_config(entity, config)
        if self.overrides.get(entity, {}) == quotas:
            return
        if quotas:
            self.overrides[entity] = quotas
        else:
            self.overrides.pop(entity, None)
        self.enabled_keys = {k for q in self.overrides.values() for k in q}
        log.info("quotas of %s are now %s", entity_path(entity), quotas or "unset")

    def enabled(self, key: str) -> bool:
        return key in self.enabled_keys

    def quota(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """(bound, rate tags) of the most specific entity setting ``key``, or None."""
        for entity, tags in precedence(user, client_id):
            quotas = self.overrides.get(entity)
            if quotas is not None and key in quotas:
                return quotas[key], tags
        return None

    # -- measuring -------------------------------------------------------------------
    def record(
        self, key: str, user: str, client_id: str, value: float, now_ms: float | None = None
    ) -> int:
        """Record ``value`` on the client's rate; the throttle time in ms (0: within)."""
        if not self.overrides:
            return 0
        found = self.quota(key, user, client_id)
        if found is None:
            return 0
        bound, tags = found
        now_ms = self.clock() * 1000.0 if now_ms is None else now_ms
        self._expire_idle(now_ms)
        rate = self._rate(key, tags)
        self._last_used[(key, *tags)] = now_ms
        rate.record(value, now_ms)
        stats = self.stats.setdefault((key, *tags), ThrottleStats())
        stats.bytes += value
        stats.requests += 1
        stats.quota = bound
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = (observed - bound) / bound * rate.window_size_ms(now_ms)
        # Kafka bounds the request quota's throttle at one window (boundedThrottleTime)
        cap = self.window_ms if key == REQUEST else self.max_throttle_ms
        throttle_ms = int(min(round(throttle), cap))
        self._note_throttle(key, (user, client_id), stats, observed, bound, throttle_ms)
        return throttle_ms

    def unrecord(
        self, key: str, user: str, client_id: str, value: float, now_ms: float | None = None
    ) -> None:
        """Take back a recorded value (a throttled fetch returns no data, as in Kafka)."""
        found = self.quota(key, user, client_id)
        if found is None:
            return
        now_ms = self.clock() * 1000.0 if now_ms is None else now_ms
        self._rate(key, found[1]).record(-value, now_ms)
        stats = self.stats.get((key, *found[1]))
        if stats is not None:
            stats.bytes -= value

    def _expire_idle(self, now_ms: float) -> None:
        """Forget the rates and counters of clients idle for an hour (Kafka expires its
        quota sensors after an hour too), so many short-lived client-ids under a
        default quota do not grow the broker forever. Checked once a minute."""
        if now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + 60_000
        for metric in [m for m, t in self._last_used.items() if now_ms - t > IDLE_EXPIRY_MS]:
            del self._last_used[metric]
            self._rates.pop(metric, None)
            self.stats.pop(metric, None)

    def _rate(self, key: str, tags: tuple[str, str]) -> Rate:
        rate = self._rates.get((key, *tags))
        if rate is None:
            rate = self._rates[(key, *tags)] = Rate(self.samples, self.window_ms)
        return rate

    def _note_throttle(self, key, who, stats, observed, bound, throttle_ms) -> None:
        now = time.time()
        quiet = now - stats.last_throttled_at > self.max_throttle_ms / 1000.0
        stats.throttled_requests += 1
        stats.throttle_time_ms += throttle_ms
        stats.last_throttle_ms = throttle_ms
        stats.last_throttled_at = now
        (log.info if quiet else log.debug)(
            "throttling user %r client-id %r for %d ms: %s at %.0f/s over its quota of %.0f/s",
            who[0],
            who[1],
            throttle_ms,
            key,
            observed,
            bound,
        )

    def measured(self, key: str, user: str, client_id: str) -> float:
        """The current rate of a quota metric (Kafka's byte-rate/request-time), per second."""
        rate = self._rates.get((key, user, client_id))
        return rate.measure(self.clock() * 1000.0) if rate is not None else 0.0

    def snapshot(self) -> list[dict]:
        """Throttle counters per quota metric, for logs and (later) the console."""
        return [
            {"quota_key": k, "user": u, "client_id": c, **vars(s)}
            for (k, u, c), s in sorted(self.stats.items())
        ]
