"""The JWKS an OIDC listener verifies tokens with (KIP-768's RefreshingHttpsJwks).

``sasl.oauthbearer.jwks.endpoint.url`` is an ``https:``, ``http:`` or ``file:`` URL of a
JSON Web Key Set. It is fetched in a worker thread (never on the event loop), first
when a token is to be checked, then every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``
by a background task; a failed fetch is retried after
``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``, doubling up to
``...retry.backoff.max.ms``, and the last good key set is kept meanwhile. A token whose
``kid`` is not in the set triggers one early refresh (at most one per key id every
``MISSING_KID_REFRESH_MS``, as Kafka's maybeExpediteRefresh) that the check waits for.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.request
from urllib.parse import urlsplit

import jwt

log = logging.getLogger(__name__)

SCHEMES = ("https", "http", "file")
FETCH_TIMEOUT_S = 10.0
MAX_JWKS_BYTES = 1 << 20
#: Kafka's RefreshingHttpsJwks.MISSING_KEY_ID_CACHE_IN_FLIGHT_MS and key id length limit
MISSING_KID_REFRESH_MS = 10_000
MAX_KID_LENGTH = 1000


def check_url(url: str) -> str:
    """The URL, or ValueError saying why it cannot be a JWKS endpoint."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in SCHEMES:
        raise ValueError(f"{url!r}: the JWKS endpoint must be an https:, http: or file: URL")
    return url


def fetch_jwks(url: str) -> dict[str, jwt.PyJWK]:
    """kid -> key, read from ``url`` (blocking: run it in a thread). Keys without a kid
    or of a kind PyJWT cannot use are skipped."""
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as resp:  # noqa: S310 (scheme checked)
        body = resp.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise ValueError(f"the JWKS is larger than {MAX_JWKS_BYTES} bytes")
    data = json.loads(body)
    keys: dict[str, jwt.PyJWK] = {}
    for entry in data.get("keys", []) if isinstance(data, dict) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
            continue
        try:
            keys[entry["kid"]] = jwt.PyJWK(entry)
        except jwt.PyJWTError as exc:
            log.info("JWKS %s: skipping key %s: %s", url, entry.get("kid"), exc)
    return keys


class JwksCache:
    def __init__(
        self, url: str, refresh_ms: int, backoff_ms: int = 100, backoff_max_ms: int = 10000
    ) -> None:
        self.url = check_url(url)
        self.refresh_ms = refresh_ms
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = max(backoff_max_ms, backoff_ms)
        self._keys: dict[str, jwt.PyJWK] | None = None
        self._missing: dict[str, float] = {}  # kid -> when it last caused a refresh
        self._refreshing: asyncio.Task | None = None
        self._refresher: asyncio.Task | None = None
        self.fetches = 0

    @property
    def loaded(self) -> bool:
        return self._keys is not None

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._keys or ())

    async def key(self, kid: str) -> jwt.PyJWK | None:
        """The key named ``kid``, fetching the set first if it was never fetched."""
        self._start()
        if self._keys is None:
            await self._refresh()
        if self._keys is not None and kid in self._keys:
            return self._keys[kid]
        if self._may_refresh_for(kid):
            await self._refresh()
        return (self._keys or {}).get(kid)

    def _may_refresh_for(self, kid: str) -> bool:
        if len(kid) > MAX_KID_LENGTH:
            return False
        now = time.monotonic() * 1000
        if now - self._missing.get(kid, -MISSING_KID_REFRESH_MS) < MISSING_KID_REFRESH_MS:
            return False
        if len(self._missing) > 1000:
            self._missing.clear()
        self._missing[kid] = now
        return True

    async def _refresh(self) -> bool:
        """One fetch, shared by everyone waiting for it; False if it failed."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._fetch())
        return await asyncio.shield(self._refreshing)

    async def _fetch(self) -> bool:
        try:
            keys = await asyncio.to_thread(fetch_jwks, self.url)
        except Exception as exc:  # noqa: BLE001 (any fetch or parse error: keep the old set)
            log.warning("Could not fetch the JWKS from %s: %s", self.url, exc)
            return False
        self.fetches += 1
        if self._keys is None or keys.keys() != self._keys.keys():
            log.info("JWKS from %s: key ids %s", self.url, ", ".join(sorted(keys)) or "(none)")
        self._keys = keys
        return True

    def _start(self) -> None:
        if self._refresher is None:
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def _refresh_loop(self) -> None:
        backoff = self.backoff_ms
        delay = self.refresh_ms
        while True:
            await asyncio.sleep(delay / 1000)
            if await self._refresh():
                backoff, delay = self.backoff_ms, self.refresh_ms
            else:
                delay, backoff = backoff, min(backoff * 2, self.backoff_max_ms)

    def close(self) -> None:
        for task in (self._refresher, self._refreshing):
            if task is not None:
                task.cancel()
