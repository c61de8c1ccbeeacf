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
from collections.abc import Callable, Coroutine
from dataclasses import is_dataclass
from typing import Any

from ..aio import Deadlines
from ..protocol.fetch_request import FOLLOWER_FETCH_VERSION, encode_fetch_request
from ..protocol.fetch_response import FollowerFetchAnswer, decode_follower_fetch_response
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


class ConnectionClosed(ConnectionError):
    pass


def follower_fetch_answer(frame: bytes) -> FollowerFetchAnswer:
    """A Fetch v12 response for a follower: read by hand in the usual shape, else by
    kio (which refuses what is malformed) and put in the same form."""
    answer = decode_follower_fetch_response(frame)
    if answer is not None:
        return answer
    resp = parse_response(1, FOLLOWER_FETCH_VERSION, frame)[1]
    return FollowerFetchAnswer(
        resp.error_code,
        resp.session_id,
        [
            (
                t.topic,
                p.partition_index,
                p.error_code,
                p.high_watermark,
                p.log_start_offset,
                p.records,
            )
            for t in resp.responses
            for p in t.partitions
        ],
    )


__all__ = ["AuthenticationFailed", "BrokerConnection", "ConnectionClosed", "follower_fetch_answer"]


class _AnswerProtocol(asyncio.streams.FlowControlMixin):
    """The connection's read side: each frame is answered in the loop's own read
    callback, with no reader task to wake (a follower's fetch answer comes every
    round). Writes keep asyncio's flow control (StreamWriter.drain)."""

    def __init__(self, conn: BrokerConnection) -> None:
        super().__init__()
        self._conn = conn
        # at least a correlation id; any size above (Kafka's clients set no limit)
        self._decoder = FrameDecoder(min_size=4, limit_name="response size")
        self._closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except FrameSizeError as exc:
            self._conn._lost(exc)
            return
        answer = self._conn._answer
        for frame in frames:
            answer(frame)

    def eof_received(self) -> bool:
        self._conn._lost(ConnectionError("closed by the broker"))
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._conn._lost(exc or ConnectionError("closed by the broker"))
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future:
        return self._closed  # StreamWriter.wait_closed


class _Callback:
    """``send_now``'s stand-in for a request's future: the answer or the failure goes
    straight to a function, once."""

    __slots__ = ("_on_answer", "_on_error", "_conn", "_correlation_id", "_done")

    def __init__(self, on_answer, on_error, conn: BrokerConnection, correlation_id: int) -> None:
        self._on_answer, self._on_error = on_answer, on_error
        self._conn, self._correlation_id = conn, correlation_id
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, answer: Any) -> None:
        if not self._done:
            self._done = True
            self._conn._deadlines.untrack(self)
            self._on_answer(answer)

    def set_exception(self, exc: BaseException) -> None:
        if not self._done:
            self._done = True
            self._conn._deadlines.untrack(self)
            self._conn._pending.pop(self._correlation_id, None)  # timed out: forget it
            self._on_error(exc)


class BrokerConnection:
    def __init__(
        self, host: str, port: int, client_id: str, security: ClientSecurity | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security or PLAINTEXT
        self._writer: asyncio.StreamWriter | None = None
        self._transport: asyncio.Transport | None = None  # the writer's
        #: correlation id -> (api key, version, the answer's future, its decoder or None
        #: for kio's)
        self._pending: dict[int, tuple[int, int, asyncio.Future, Any]] = {}
        self._ids = itertools.count(1)
        self._reauth_at: float | None = None  # time.monotonic() to re-authenticate at
        self._reauth: asyncio.Future | None = None  # a re-authentication under way
        self._deadlines = Deadlines()  # the requests' timeouts, on one timer

    @property
    def connected(self) -> bool:
        transport = self._transport  # the writer's: one call, every follower round
        return transport is not None and not transport.is_closing()

    async def connect(self, timeout_s: float = 5.0) -> None:
        tls = self.security.ssl_context()
        loop = asyncio.get_running_loop()
        transport, protocol = await asyncio.wait_for(
            loop.create_connection(
                lambda: _AnswerProtocol(self),
                self.host,
                self.port,
                ssl=tls,
                server_hostname=self.host if tls is not None else None,
            ),
            timeout_s,
        )
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self._transport = transport
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

    def _lost(self, exc: BaseException) -> None:
        self._fail(ConnectionClosed(f"connection to {self.host}:{self.port} lost: {exc!r}"))

    def _answer(self, frame: bytes) -> None:
        (correlation_id,) = SIZE.unpack_from(frame, 0)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            return
        api_key, version, fut, decode = entry
        if fut.done():
            return
        try:
            answer = decode(frame) if decode else parse_response(api_key, version, frame)[1]
        except Exception as exc:  # noqa: BLE001 - a bad response fails one call
            fut.set_exception(exc)
            return
        fut.set_result(answer)  # a send_now request's answer is handled here, at once

    def _fail(self, exc: Exception) -> None:
        pending, self._pending = self._pending, {}
        for _k, _v, fut, _d in pending.values():
            if not fut.done():
                fut.set_exception(exc)
        if self._writer is not None:
            self._writer.close()

    def request(
        self, api_key: int, version: int, body: dict, timeout_s: float = 30.0, decode: Any = None
    ) -> Coroutine[Any, Any, Any]:
        """Send one request and wait for its answer (re-authenticating first when the
        SASL session is due: no request may go out during the exchange). ``decode``:
        reads the answer's frame instead of kio's decoder (a follower's Fetch). Without
        SASL re-authentication (the usual case) the request's own coroutine, with no
        frame wrapped around it: a follower sends one every round."""
        if self._reauth is None and self._reauth_at is None:
            return self._request(api_key, version, body, timeout_s, decode)
        return self._request_after_reauth(api_key, version, body, timeout_s, decode)

    async def _request_after_reauth(
        self, api_key: int, version: int, body: dict, timeout_s: float, decode: Any
    ) -> Any:
        if self._reauth is None and self._reauth_at is not None:
            if time.monotonic() >= self._reauth_at:
                self._reauth = asyncio.ensure_future(self._reauthenticate())
        if self._reauth is not None:
            await asyncio.shield(self._reauth)
        return await self._request(api_key, version, body, timeout_s, decode)

    def can_send_now(self) -> bool:
        """Whether ``send_now`` may be used: connected, and no SASL re-authentication due
        (that one waits for its exchange: ``request``)."""
        return self.connected and self._reauth is None and self._reauth_at is None

    def send_now(
        self,
        api_key: int,
        version: int,
        body: dict,
        timeout_s: float,
        decode: Any,
        on_answer: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        """Send one request (``can_send_now()`` first) with no coroutine waiting for it:
        its answer goes to ``on_answer`` from the read callback that brings it, in the
        same loop turn; a timeout, a lost connection or an answer that cannot be read goes
        to ``on_error``. A follower's fetch round trip, every round (issue 24): no task
        to wake, no turn of the loop between the answer and the next request."""
        correlation_id = next(self._ids)
        callback = _Callback(on_answer, on_error, self, correlation_id)
        self._pending[correlation_id] = (api_key, version, callback, decode)
        self._deadlines.track(callback, asyncio.get_running_loop(), timeout_s)
        self._transport.write(self._frame(api_key, version, correlation_id, body))

    def _frame(self, api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
        if api_key == 1 and version == FOLLOWER_FETCH_VERSION and isinstance(body, dict):
            return encode_fetch_request(correlation_id, self.client_id, body)  # hot: by hand
        payload = body if is_dataclass(body) else build(request_schema(api_key, version), body)
        return encode_request(
            RequestHeader(api_key, version, correlation_id, self.client_id), payload
        )

    async def _request(
        self,
        api_key: int,
        version: int,
        body: dict,
        timeout_s: float = 30.0,
        decode: Any = None,
    ) -> Any:
        transport = self._transport
        if transport is None or transport.is_closing():  # self.connected, in one call
            raise ConnectionClosed(f"not connected to {self.host}:{self.port}")
        correlation_id = next(self._ids)
        frame = self._frame(api_key, version, correlation_id, body)
        fut = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, version, fut, decode)
        try:
            transport.write(frame)
            if transport.get_write_buffer_size():  # else drain() returns at once
                await self._writer.drain()
            return await self._deadlines.wait(fut, timeout_s)  # from the send on
        finally:
            self._pending.pop(correlation_id, None)

    async def close(self) -> None:
        self._fail(ConnectionClosed("connection closed"))
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass
