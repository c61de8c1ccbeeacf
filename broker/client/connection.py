"""BrokerConnection: the broker's own async Kafka client, for inter-broker traffic.

One TCP connection, requests pipelined by correlation id, responses decoded with the
same kio codecs the server uses. Used by follower fetchers, the controller's channel,
transaction marker writes, log-dir events, controlled shutdown and the CLIs' controller
requests. With a ``ClientSecurity`` it speaks TLS and authenticates with SASL before
``connect`` returns, as the inter-broker listener asks. When the broker gives the
session a lifetime (KIP-368, ``connections.max.reauth.ms``) the connection
re-authenticates in place before it ends, as Kafka's clients do (at 85-95% of the
lifetime, on the first request after that; other requests wait for it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from dataclasses import is_dataclass
from typing import Any

from ..aio import Deadlines
from ..protocol.fetch_request import FOLLOWER_FETCH_VERSION, encode_fetch_request
from ..protocol.framing import SIZE, FrameDecoder, FrameSizeError
from ..protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)
from .sasl import AuthenticationFailed, authenticate
from .security import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)
_READ_CHUNK = 1 << 20


class ConnectionClosed(ConnectionError):
    pass


__all__ = ["AuthenticationFailed", "BrokerConnection", "ConnectionClosed"]


class BrokerConnection:
    def __init__(
        self, host: str, port: int, client_id: str, security: ClientSecurity | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security or PLAINTEXT
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future]] = {}
        self._ids = itertools.count(1)
        self._read_task: asyncio.Task | None = None
        self._reauth_at: float | None = None  # time.monotonic() to re-authenticate at
        self._reauth: asyncio.Future | None = None  # a re-authentication under way
        self._deadlines = Deadlines()  # the requests' timeouts, on one timer

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self, timeout_s: float = 5.0) -> None:
        tls = self.security.ssl_context()
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(
                self.host,
                self.port,
                limit=1 << 22,
                ssl=tls,
                server_hostname=self.host if tls is not None else None,
            ),
            timeout_s,
        )
        self._read_task = asyncio.ensure_future(self._read_loop())
        if self.security.sasl:
            try:
                await self._authenticate(timeout_s)
            except BaseException:
                await self.close()
                raise

    async def _authenticate(self, timeout_s: float) -> None:
        peer = f"{self.host}:{self.port}"
        lifetime_ms = await asyncio.wait_for(
            authenticate(self._request, self.security, peer), timeout_s
        )
        self._reauth_at = None
        if lifetime_ms > 0:  # Kafka's clients: somewhere in the last 15% of the session
            self._reauth_at = time.monotonic() + lifetime_ms / 1000 * random.uniform(0.85, 0.95)

    async def _reauthenticate(self) -> None:
        try:
            await self._authenticate(30.0)
            log.debug("re-authenticated to %s:%d", self.host, self.port)
        except BaseException:
            self._fail(ConnectionClosed(f"re-authentication to {self.host}:{self.port} failed"))
            raise
        finally:
            self._reauth = None

    async def _read_loop(self) -> None:
        reader = self._reader
        # at least a correlation id; any size above (Kafka's clients set no limit)
        decoder = FrameDecoder(min_size=4, limit_name="response size")
        try:
            while True:
                data = await reader.read(_READ_CHUNK)
                if not data:
                    raise ConnectionError("closed by the broker")
                for frame in decoder.feed(data):
                    self._answer(frame)
        except (ConnectionError, OSError, FrameSizeError) as exc:
            self._fail(ConnectionClosed(f"connection to {self.host}:{self.port} lost: {exc!r}"))
        except asyncio.CancelledError:
            self._fail(ConnectionClosed("connection closed"))

    def _answer(self, frame: bytes) -> None:
        (correlation_id,) = SIZE.unpack_from(frame, 0)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            return
        api_key, version, fut = entry
        if not fut.done():
            try:
                fut.set_result(parse_response(api_key, version, frame)[1])
            except Exception as exc:  # noqa: BLE001 - a bad response fails one call
                fut.set_exception(exc)

    def _fail(self, exc: Exception) -> None:
        pending, self._pending = self._pending, {}
        for _k, _v, fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)
        if self._writer is not None:
            self._writer.close()

    async def request(self, api_key: int, version: int, body: dict, timeout_s: float = 30.0) -> Any:
        """Send one request and wait for its answer (re-authenticating first when the
        SASL session is due: no request may go out during the exchange)."""
        if self._reauth is None and self._reauth_at is not None:
            if time.monotonic() >= self._reauth_at:
                self._reauth = asyncio.ensure_future(self._reauthenticate())
        if self._reauth is not None:
            await asyncio.shield(self._reauth)
        return await self._request(api_key, version, body, timeout_s)

    async def _request(
        self, api_key: int, version: int, body: dict, timeout_s: float = 30.0
    ) -> Any:
        if not self.connected:
            raise ConnectionClosed(f"not connected to {self.host}:{self.port}")
        correlation_id = next(self._ids)
        if api_key == 1 and version == FOLLOWER_FETCH_VERSION and isinstance(body, dict):
            frame = encode_fetch_request(correlation_id, self.client_id, body)  # hot: by hand
        else:
            payload = body if is_dataclass(body) else build(request_schema(api_key, version), body)
            frame = encode_request(
                RequestHeader(api_key, version, correlation_id, self.client_id), payload
            )
        fut = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, version, fut)
        try:
            writer = self._writer
            writer.write(frame)
            if writer.transport.get_write_buffer_size():  # else drain() returns at once
                await writer.drain()
            return await self._deadlines.wait(fut, timeout_s)  # from the send on
        finally:
            self._pending.pop(correlation_id, None)

    async def close(self) -> None:
        if self._read_task is not None:
            self._read_task.cancel()
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass
